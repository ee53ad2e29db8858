// Storage formats at the boundary: f32 travels as Float32Array, bf16 and f16 as Uint16Array bit
// patterns. Conversions round to nearest even, as attest and the C++ kernels do.
import { FORMATS } from "./interface.js";

export const FORMAT_CODES = Object.fromEntries(Object.entries(FORMATS).map(([name, row]) => [name, row[0]]));
export const SIXTEEN_BIT = new Set(["bf16", "f16"]);

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export function f32ToF16(x) {
  f32[0] = x;
  const bits = u32[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) { // subnormal or zero in f16: round the shifted mantissa to nearest even
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let value = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    if (rest > half || (rest === half && (value & 1))) value += 1;
    return sign | value;
  }
  let value = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (value & 1))) value += 1; // a carry may reach infinity: right
  return sign | value;
}

export function bf16ToF32(h) { u32[0] = h << 16; return f32[0]; }

export function f32ToBf16(x) {
  f32[0] = x;
  const bits = u32[0];
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff)) return (bits >>> 16) | 0x40;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Values of a buffer in `format` as a Float32Array. */
export function toFloat32(values, format) {
  if (format === "f32") return values;
  const decode = format === "f16" ? f16ToF32 : format === "bf16" ? bf16ToF32 : null;
  if (!decode) throw new Error(`${format} is not a 16-bit or f32 format`);
  const out = new Float32Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = decode(values[i]);
  return out;
}

/** Numbers (any array) in `format`: Float32Array for f32, Uint16Array bit patterns otherwise. */
export function fromNumbers(values, format) {
  if (format === "f32") return values instanceof Float32Array ? values : Float32Array.from(values);
  const encode = format === "f16" ? f32ToF16 : format === "bf16" ? f32ToBf16 : null;
  if (!encode) throw new Error(`${format} is not a 16-bit or f32 format`);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = encode(values[i]);
  return out;
}

/** The typed array a buffer of `format` arrives as. */
export function arrayType(format) {
  if (format === "f32") return Float32Array;
  if (SIXTEEN_BIT.has(format)) return Uint16Array;
  throw new Error(`storage format ${format} has no typed array of values (quantized K/V: quantized.js)`);
}
