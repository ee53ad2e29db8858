// What a kernel declares: its features, where it rounds, the problems it accepts, its paths.
// declare({...}, fn) checks every field when called: a bad value throws DeclarationError naming
// the field, before anything is served (serve.js then answers attest's HELLO with an ERROR).
import { CAPABILITIES, EMPTY_ROWS, ALIBI_SLOPES, CACHE_POLICIES, INPUT_DOMAINS } from "./interface.js";

export const FEATURES = Object.keys(CAPABILITIES).filter((name) => !["decode", "backward", "merge", "packed"].includes(name));
export const PRECISIONS = ["f32", "bf16", "f16"]; // what this package serves (quantized K/V is not)
const PRECISION_FIELDS = ["q", "k", "v", "o", "scores", "p", "accumulator", "bias", "q_entry", "k_entry", "v_entry"];
const RANGES = ["head_dim", "batch", "heads", "q_len", "k_len", "q_offset"];
const FLAGS = ["dk_equals_dv", "default_scale_only", "causal_required", "self_attention_only", "inputs_finite",
  "decode_only", "decode_lse_optional", "deterministic_backward", "alibi_excludes_bias"];
const I32_MAX = 2 ** 31 - 1;

export class DeclarationError extends Error {}

function fail(where, message) { throw new DeclarationError(`${where}: ${message}`); }
const show = (value) => JSON.stringify(value) ?? String(value);

function unknownKeys(where, object, known) {
  for (const key of Object.keys(object)) if (!known.includes(key)) fail(where, `unknown field ${show(key)} (known: ${known.join(", ")})`);
}

function format(where, value) {
  if (!PRECISIONS.includes(value)) fail(where, `${show(value)} is not a number format here (expected one of ${PRECISIONS.join(", ")})`);
  return value;
}

function integer(where, value, low, high) {
  if (!Number.isInteger(value) || value < low || value > high) fail(where, `${show(value)} is not an integer in [${low}, ${high}]`);
  return value;
}

function flag(where, value) {
  if (typeof value !== "boolean") fail(where, `${show(value)} is not a boolean`);
  return value;
}

function number(where, value, low = 0) {
  if (typeof value !== "number" || !Number.isFinite(value) || value < low) fail(where, `${show(value)} is not a finite number >= ${low}`);
  return value;
}

function range(where, value, allowNegative) {
  if (value == null) return [0, 0];
  if (!Array.isArray(value) || value.length !== 2) fail(where, `${show(value)} is not a [min, max] pair or null`);
  const low = allowNegative ? -Number.MAX_SAFE_INTEGER : 0;
  const [a, b] = value.map((x, i) => integer(`${where} ${i ? "max" : "min"}`, x, low, Number.MAX_SAFE_INTEGER));
  if (a > b) fail(where, `min ${a} is larger than max ${b}`);
  return [a, b];
}

/** Where the kernel rounds (attest_precision_spec); every field f32 unless given. */
export function precision(fields = {}, where = "precision") {
  if (typeof fields !== "object" || fields === null) fail(where, `${show(fields)} is not an object`);
  unknownKeys(where, fields, [...PRECISION_FIELDS, "exp_ulps", "weight_sum", "pv_unnormalised"]);
  const p = {};
  for (const name of PRECISION_FIELDS) p[name] = format(`${where}.${name}`, fields[name] ?? "f32");
  p.exp_ulps = number(`${where}.exp_ulps`, fields.exp_ulps ?? 1);
  p.weight_sum = fields.weight_sum == null ? null : format(`${where}.weight_sum`, fields.weight_sum);
  p.pv_unnormalised = flag(`${where}.pv_unnormalised`, fields.pv_unnormalised ?? false);
  return p;
}

/** The problems the kernel accepts (attest_contract); attest sends no other. */
export function contract(fields = {}) {
  unknownKeys("contract", fields, ["head_dims", "value_dims", "value_dim", ...RANGES, ...FLAGS, "query_tile", "key_tile",
    "max_abs_value", "alibi_slopes", "alibi_max_bias", "inputs"]);
  const c = {};
  // Dk's widths, and (ABI 2.7) Dv's apart from them: value_dims and value_dim (null: head_dim's range).
  for (const name of ["head_dims", "value_dims"]) {
    const dims = fields[name] ?? [];
    if (!Array.isArray(dims)) fail(`contract.${name}`, `${show(dims)} is not a list of head widths`);
    c[name] = dims.map((d) => integer(`contract.${name}`, d, 1, I32_MAX));
  }
  for (const name of [...RANGES, "value_dim"]) c[name] = range(`contract.${name}`, fields[name], name === "q_offset");
  for (const name of FLAGS) c[name] = flag(`contract.${name}`, fields[name] ?? false);
  if (c.dk_equals_dv && (c.value_dims.length || c.value_dim[0] || c.value_dim[1])) {
    fail("contract.value_dims", "value_dims or value_dim with dk_equals_dv (Dv is then Dk)");
  }
  c.query_tile = integer("contract.query_tile", fields.query_tile ?? 0, 0, I32_MAX);
  c.key_tile = integer("contract.key_tile", fields.key_tile ?? 0, 0, I32_MAX);
  c.max_abs_value = number("contract.max_abs_value", fields.max_abs_value ?? 0);
  if (c.max_abs_value > 0 && c.max_abs_value < 1) fail("contract.max_abs_value", `${c.max_abs_value}: 0 (any) or at least 1`);
  c.alibi_slopes = fields.alibi_slopes ?? "arbitrary";
  if (!(c.alibi_slopes in ALIBI_SLOPES)) fail("contract.alibi_slopes", `${show(c.alibi_slopes)} is not one of ${Object.keys(ALIBI_SLOPES).join(", ")}`);
  c.alibi_max_bias = number("contract.alibi_max_bias", fields.alibi_max_bias ?? 0);
  // What masked keys may hold (INPUT_DOMAINS); inputs_finite: true is the older spelling of "finite".
  c.inputs = fields.inputs ?? (c.inputs_finite ? "finite" : "masked_may_be_nonfinite");
  if (!(c.inputs in INPUT_DOMAINS)) fail("contract.inputs", `${show(c.inputs)} is not one of ${Object.keys(INPUT_DOMAINS).join(", ")}`);
  if (c.inputs_finite && c.inputs !== "finite") fail("contract.inputs", `${show(c.inputs)} with inputs_finite: true`);
  return c;
}

const DECLARATION_FIELDS = ["name", "features", "empty_rows", "precision", "contract", "paths", "decode", "backward", "merge"];

/** A checked declaration from plain fields (see declare). */
export function declaration(fields) {
  if (typeof fields !== "object" || fields === null) fail("declaration", `${show(fields)} is not an object`);
  unknownKeys("declaration", fields, DECLARATION_FIELDS);
  const d = {};
  if (typeof fields.name !== "string" || !fields.name || Buffer.byteLength(fields.name) > 63) {
    fail("name", `${show(fields.name)}: a non-empty string of at most 63 bytes`);
  }
  d.name = fields.name;
  const features = fields.features ?? [];
  if (!Array.isArray(features)) fail("features", `${show(features)} is not a list of feature names`);
  for (const feature of features) {
    if (["decode", "backward", "merge"].includes(feature)) fail("features", `${show(feature)} is not declared by name: give ${feature}: function`);
    if (!FEATURES.includes(feature)) fail("features", `unknown feature ${show(feature)} (known: ${FEATURES.join(", ")})`);
  }
  d.features = [...new Set(features)];
  d.empty_rows = fields.empty_rows ?? "zero";
  if (!(d.empty_rows in EMPTY_ROWS)) fail("empty_rows", `${show(d.empty_rows)} is not "zero" or "nan"`);
  d.precision = precision(fields.precision ?? {});
  d.contract = contract(fields.contract ?? {});
  for (const name of ["decode", "backward", "merge"]) {
    if (fields[name] != null && typeof fields[name] !== "function") fail(name, "is not a function");
    d[name] = fields[name] ?? null;
  }
  if (d.backward && PRECISION_FIELDS.some((f) => d.precision[f] !== "f32")) {
    fail("backward", "attest sends a backward only to a kernel whose storage and arithmetic are f32");
  }
  if (d.contract.deterministic_backward && !d.backward) fail("contract.deterministic_backward", "needs backward: function");
  if (d.contract.decode_only && !d.decode) fail("contract.decode_only", "a decode-only kernel needs decode: function");
  if (d.contract.causal_required && !d.features.includes("causal")) fail("contract.causal_required", "needs the feature \"causal\"");
  d.paths = [];
  for (const [index, entry] of (fields.paths ?? []).entries()) {
    const where = `paths[${index}]`;
    if (!Array.isArray(entry) || entry.length !== 2) fail(where, `${show(entry)} is not a [name, precision] pair`);
    const [name, fieldsOfPath] = entry;
    if (typeof name !== "string" || Buffer.byteLength(name) < 1 || Buffer.byteLength(name) > 31 || /[\x00-\x1f\x7f]/.test(name)) {
      fail(where, `path name ${show(name)}: 1 to 31 printable bytes`);
    }
    const p = precision(fieldsOfPath, `${where}.precision`);
    for (const storage of ["q", "k", "v", "o", "bias"]) {
      if (p[storage] !== d.precision[storage]) fail(where, `path ${show(name)} stores ${storage} in ${p[storage]}, the kernel in ${d.precision[storage]}: a path changes arithmetic, never storage`);
    }
    if (d.paths.some(([other]) => other === name)) fail(where, `path ${show(name)} declared twice`);
    d.paths.push([name, p]);
  }
  d.capabilities = d.features.reduce((bits, f) => bits | (1 << CAPABILITIES[f][0]), 0)
    | (d.decode ? 1 << CAPABILITIES.decode[0] : 0) | (d.backward ? 1 << CAPABILITIES.backward[0] : 0)
    | (d.merge ? 1 << CAPABILITIES.merge[0] : 0);
  d.capabilities >>>= 0;
  d.has = (feature) => d.features.includes(feature);
  d.cache_policy = Object.keys(CACHE_POLICIES)[0]; // "full": caches and block tables are not served here
  return Object.freeze(d);
}

/** A kernel: a new function calling fn, carrying the checked declaration (the property serve.js
 * reads). fn itself is left alone, so one function may be declared several ways. */
export function declare(fields, fn) {
  if (typeof fn !== "function") throw new DeclarationError(`declare(): the kernel ${show(fn)} is not a function`);
  const kernel = (problem) => fn(problem);
  Object.defineProperty(kernel, "name", { value: fn.name });
  kernel.declaration = declaration(fields);
  return kernel;
}
