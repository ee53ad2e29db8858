// The field checks a declaration and its paths share (as python/attest_kernel/_checks.py): each
// throws DeclarationError naming the field, before anything is served.
import { CAPABILITIES, FORMATS } from "./interface.js";

export const FEATURES = Object.keys(CAPABILITIES).filter((name) => !["decode", "backward", "merge", "packed", "packed_int64"].includes(name));
export const PRECISIONS = ["f32", "bf16", "f16"]; // number formats; K and V may also be stored quantized
export const KV_FORMATS = Object.keys(FORMATS); // K and V storage: also the 2.4 quantized formats (quantized.js)
export const PRECISION_FIELDS = ["q", "k", "v", "o", "scores", "p", "accumulator", "bias", "q_entry", "k_entry", "v_entry"];
export const I32_MAX = 2 ** 31 - 1;

export class DeclarationError extends Error {}

export function fail(where, message) { throw new DeclarationError(`${where}: ${message}`); }
export const show = (value) => JSON.stringify(value) ?? String(value);

export function unknownKeys(where, object, known) {
  for (const key of Object.keys(object)) if (!known.includes(key)) fail(where, `unknown field ${show(key)} (known: ${known.join(", ")})`);
}

export function format(where, value, known = PRECISIONS) {
  if (!known.includes(value)) fail(where, `${show(value)} is not a number format here (expected one of ${known.join(", ")})`);
  return value;
}

export function integer(where, value, low, high) {
  if (!Number.isInteger(value) || value < low || value > high) fail(where, `${show(value)} is not an integer in [${low}, ${high}]`);
  return value;
}

export function flag(where, value) {
  if (typeof value !== "boolean") fail(where, `${show(value)} is not a boolean`);
  return value;
}

export function number(where, value, low = 0) {
  if (typeof value !== "number" || !Number.isFinite(value) || value < low) fail(where, `${show(value)} is not a finite number >= ${low}`);
  return value;
}

/** null (no limit) or [min, max] inclusive; returns [min, max], [0, 0] for no limit. */
export function range(where, value, allowNegative) {
  if (value == null) return [0, 0];
  if (!Array.isArray(value) || value.length !== 2) fail(where, `${show(value)} is not a [min, max] pair or null`);
  const low = allowNegative ? -Number.MAX_SAFE_INTEGER : 0;
  const [a, b] = value.map((x, i) => integer(`${where} ${i ? "max" : "min"}`, x, low, Number.MAX_SAFE_INTEGER));
  if (a > b) fail(where, `min ${a} is larger than max ${b}`);
  return [a, b];
}

/** A list of feature names, each once. byFunction: decode, backward, merge and packed are declared as
 * functions (a kernel's features); a path's feature list just does not know them. */
export function features(where, names, byFunction = false) {
  if (!Array.isArray(names)) fail(where, `${show(names)} is not a list of feature names`);
  for (const name of names) {
    if (byFunction && ["decode", "backward", "merge", "packed"].includes(name)) fail(where, `${show(name)} is not declared by name: give ${name}: function`);
    if (byFunction && name === "packed_int64") fail(where, `${show(name)} is not declared by name: give packed_int64: true`);
    if (!FEATURES.includes(name)) fail(where, `unknown feature ${show(name)} (known: ${FEATURES.join(", ")})`);
  }
  return [...new Set(names)];
}

// The fields that take more than a number format: K and V storage, and Q rounded on entry to q8 (2.6, ggml's).
const KNOWN = { k: KV_FORMATS, v: KV_FORMATS, q_entry: [...PRECISIONS, "q8"] };

/** Where the kernel rounds (attest_precision_spec); every field f32 unless given. */
export function precision(fields = {}, where = "precision") {
  if (typeof fields !== "object" || fields === null) fail(where, `${show(fields)} is not an object`);
  unknownKeys(where, fields, [...PRECISION_FIELDS, "exp_ulps", "weight_sum", "pv_unnormalised", "flush_subnormals"]);
  const p = {};
  for (const name of PRECISION_FIELDS) p[name] = format(`${where}.${name}`, fields[name] ?? "f32", KNOWN[name]);
  p.exp_ulps = number(`${where}.exp_ulps`, fields.exp_ulps ?? 1);
  p.weight_sum = fields.weight_sum == null ? null : format(`${where}.weight_sum`, fields.weight_sum);
  p.pv_unnormalised = flag(`${where}.pv_unnormalised`, fields.pv_unnormalised ?? false);
  // ABI 2.9: values below 2^-126 may be flushed to a zero of their sign (FTZ/DAZ, wasm, GPUs).
  p.flush_subnormals = flag(`${where}.flush_subnormals`, fields.flush_subnormals ?? false);
  return p;
}
