// K and V in the ABI 2.4 quantized formats (the interface table's format rows past f16), as
// python/attest_kernel/quantized.py serves them: the bytes as they travel, typed arrays of codes and
// scales, and their values decoded exactly as attest's C++ codecs do (impl/model/src/quantized.cpp:
// a value is the f16 scale times its code, in float32).
//
// A row is one token of one kv head (Dk or Dv values); its groups follow one another, each its f16
// scale (2 bytes, little endian) then its codes:
//   q8        groups of 32, int8 codes in [-127, 127]
//   q4        groups of 32, codes in [-8, 7] stored as code + 8, two a byte: values 2m, 2m + 1 in byte m
//   q4_0      ggml's block_q4_0: byte j holds value j (low nibble) and j + ceil(n / 2) (high nibble)
//   q8_token  one group per row
//   q8_head   one static scale per (sequence, kv head): in a problem, all Tk rows of the kv head are
//             one group; in a decode step the rows are codes alone (the scales came with the config)
//   e4m3, e5m2  fp8, one byte a value, no scale
import { FORMATS } from "./interface.js";
import { f16ToF32 } from "./storage.js";

export const SCALED = ["q8", "q4", "q8_token", "q8_head", "q4_0"];
export const NIBBLES = ["q4", "q4_0"];
export const FP8 = ["e4m3", "e5m2"];
export const QUANTIZED = [...SCALED, ...FP8];
// Every quantized format the table defines must be one this file decodes (test/quantized.test.js).
export const TABLE_QUANTIZED = Object.keys(FORMATS).filter((name) => !["f32", "bf16", "f16"].includes(name));

export const isQuantized = (format) => QUANTIZED.includes(format);

/** Values per scale in a row of `width`. */
export function groupWidth(format, width) {
  return format === "q8_token" || format === "q8_head" ? width : Math.min(32, width);
}

/** Bytes of one row of `width` values (a q8_head row in a decode step: withScale false). */
export function rowBytes(format, width, withScale = true) {
  if (FP8.includes(format) || (format === "q8_head" && !withScale)) return width;
  const g = groupWidth(format, width);
  const groups = Math.ceil(width / g);
  return groups * 2 + (NIBBLES.includes(format) ? Math.ceil(width / 2) : width);
}

/** Bytes of values of `shape` [..., T, D] in `format` (a q8_head decode step's codes: headScales). */
export function storedSize(format, shape, headScales = false) {
  const product = (dims) => dims.reduce((a, b) => a * b, 1);
  const width = shape[shape.length - 1];
  if (format === "q8_head" && !headScales) return product(shape.slice(0, -2)) * (2 + shape[shape.length - 2] * width);
  return product(shape.slice(0, -1)) * rowBytes(format, width, !headScales);
}

/** float32 value of each of the 256 fp8 bit patterns (e4m3fn: one NaN, no infinity). */
function fp8Table(format) {
  const [mantissaBits, bias, top] = format === "e4m3" ? [3, 7, 0xf] : [2, 15, 0x1f];
  return Float32Array.from({ length: 256 }, (_, bits) => {
    const sign = bits & 0x80 ? -1 : 1;
    const exponent = (bits & 0x7f) >> mantissaBits;
    const mantissa = bits & ((1 << mantissaBits) - 1);
    if (exponent === top && format === "e4m3" && mantissa === (1 << mantissaBits) - 1) return NaN;
    if (exponent === top && format === "e5m2") return mantissa ? NaN : sign * Infinity;
    if (exponent === 0) return sign * mantissa * 2 ** (1 - bias - mantissaBits);
    return sign * (1 + mantissa / (1 << mantissaBits)) * 2 ** (exponent - bias);
  });
}

export const FP8_VALUES = Object.fromEntries(FP8.map((format) => [format, fp8Table(format)]));

const f16At = (raw, at) => f16ToF32(raw[at] | (raw[at + 1] << 8));

/** K or V stored quantized. shape: the values' shape ([B][Hkv][T][D] in a problem or a decode step,
 * [Hkv][n][D] for one sequence of a paged step). codes: Int8Array [...shape] (q4 and q4_0 codes in
 * [-8, 7]), or for fp8 Uint8Array bit patterns. scales: Float32Array [...shape[:-1]][groups] for q8,
 * q4, q4_0 and q8_token (one group), [...shape[:-2]] for q8_head, null for fp8. raw: the bytes as they
 * arrived (what a cache stores, rowBytes(format, D) a row; a problem's q8_head is one block a head). */
export class QuantizedRows {
  constructor(format, shape, codes, scales, raw) {
    Object.assign(this, { format, shape, codes, scales, raw });
  }

  get width() { return this.shape[this.shape.length - 1]; }

  /** Scales a row (groups of groupWidth(format, width) values); 0 for fp8, per head for q8_head. */
  get groups() { return this.scales === null || this.format === "q8_head" ? 0 : Math.ceil(this.width / groupWidth(this.format, this.width)); }

  /** The values as a Float32Array [...shape]: scale * code (exact in float32), or the fp8 values. */
  float32() {
    const out = new Float32Array(this.codes.length);
    if (this.scales === null) {
      const table = FP8_VALUES[this.format];
      for (let i = 0; i < out.length; i++) out[i] = table[this.codes[i]];
      return out;
    }
    if (this.format === "q8_head") {
      const block = this.shape[this.shape.length - 2] * this.width;
      for (let i = 0; i < out.length; i++) out[i] = this.scales[Math.floor(i / block)] * this.codes[i];
      return out;
    }
    const [width, g, groups] = [this.width, groupWidth(this.format, this.width), this.groups];
    for (let i = 0; i < out.length; i++) {
      const row = Math.floor(i / width);
      out[i] = this.scales[row * groups + Math.floor((i - row * width) / g)] * this.codes[i];
    }
    return out;
  }

  toString() { return `QuantizedRows(${this.format}, [${this.shape.join(", ")}])`; }
}

function expect(raw, size, format) {
  if (raw.length !== size) throw new RangeError(`${format} data of ${raw.length} bytes, expected ${size}`);
}

/** QuantizedRows of `raw` (Uint8Array) holding values of `shape` [..., T, D] in `format`. q8_head:
 * with headScales ([...shape[:-2]] numbers) the bytes are codes alone (a decode step); without,
 * each [T][D] block is its scale then its codes (a problem). RangeError on a size that does not match. */
export function decode(raw, format, shape, headScales = null) {
  const count = shape.reduce((a, b) => a * b, 1);
  const width = shape[shape.length - 1];
  if (FP8.includes(format)) {
    expect(raw, count, format);
    return new QuantizedRows(format, shape, raw, null, raw);
  }
  if (format === "q8_head") {
    const block = shape[shape.length - 2] * width;
    const heads = shape.slice(0, -2).reduce((a, b) => a * b, 1); // not count / block: a sequence may append 0 tokens
    if (headScales !== null) {
      expect(raw, count, format);
      if (headScales.length !== heads) throw new RangeError(`q8_head: ${headScales.length} scales for ${heads} kv heads`);
      return new QuantizedRows(format, shape, new Int8Array(raw.buffer, raw.byteOffset, count), Float32Array.from(headScales), raw);
    }
    expect(raw, heads * (2 + block), format);
    const codes = new Int8Array(count);
    const scales = new Float32Array(heads);
    for (let h = 0; h < heads; h++) {
      const at = h * (2 + block);
      scales[h] = f16At(raw, at);
      codes.set(new Int8Array(raw.buffer, raw.byteOffset + at + 2, block), h * block);
    }
    return new QuantizedRows(format, shape, codes, scales, raw);
  }
  if (!SCALED.includes(format)) throw new RangeError(`${format} is not a quantized format (expected one of ${QUANTIZED.join(", ")})`);
  const rows = count / width;
  const perRow = rowBytes(format, width);
  expect(raw, rows * perRow, format);
  const g = groupWidth(format, width);
  const groups = Math.ceil(width / g);
  const codes = new Int8Array(count);
  const scales = new Float32Array(rows * groups);
  for (let row = 0; row < rows; row++) {
    let at = row * perRow;
    for (let group = 0; group < groups; group++) {
      const first = group * g, n = Math.min(g, width - first), out = row * width + first;
      scales[row * groups + group] = f16At(raw, at);
      at += 2;
      if (NIBBLES.includes(format)) {
        const half = Math.ceil(n / 2);
        for (let i = 0; i < n; i++) { // q4 pairs neighbours; q4_0 the first half with the second
          const [byte, shift] = format === "q4" ? [i >> 1, (i & 1) * 4] : i < half ? [i, 0] : [i - half, 4];
          codes[out + i] = ((raw[at + byte] >> shift) & 0xf) - 8;
        }
        at += half;
      } else {
        for (let i = 0; i < n; i++) codes[out + i] = (raw[at + i] << 24) >> 24;
        at += n;
      }
    }
  }
  return new QuantizedRows(format, shape, codes, scales, raw);
}
