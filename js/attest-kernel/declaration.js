// What a kernel declares: its features, where it rounds, the problems it accepts, its paths.
// declare({...}, fn) checks every field when called: a bad value throws DeclarationError naming
// the field, before anything is served (serve.js then answers attest's HELLO with an ERROR).
import { CAPABILITIES, EMPTY_ROWS, ALIBI_SLOPES, CACHE_POLICIES, INPUT_DOMAINS } from "./interface.js";
import { DeclarationError, FEATURES, PRECISIONS, PRECISION_FIELDS, I32_MAX, fail, show, unknownKeys, integer, flag, number,
  range, features, precision } from "./checks.js";
import { Path, checkName } from "./paths.js";

export { DeclarationError, FEATURES, PRECISIONS, precision, Path };
const RANGES = ["head_dim", "batch", "heads", "q_len", "k_len", "q_offset"];
const FLAGS = ["dk_equals_dv", "default_scale_only", "causal_required", "self_attention_only", "inputs_finite",
  "decode_only", "decode_lse_optional", "deterministic_backward", "alibi_excludes_bias"];

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

const DECLARATION_FIELDS = ["name", "features", "empty_rows", "precision", "contract", "paths", "decode", "backward", "merge",
  "cache_policy", "cache_sinks", "cache_recent", "page_tokens", "page_bytes", "decode_paged", "packed",
  "packed_int64"];

/** ABI 2.4's serving cache: which positions a decoder's sessions keep (cache_policy: "full", "window"
 * and "sinks_recent" with cache_recent and cache_sinks, or "explicit": each session's retained(b, t)
 * names them), and block tables: page_tokens > 0 with page_bytes(config) -> bytes of one page and
 * decode_paged(config, step) -> {o: [one [H][n_b][Dv] per sequence], lse, path} (see paged.js). */
function checkCache(d, fields) {
  d.cache_policy = fields.cache_policy ?? "full";
  if (!(d.cache_policy in CACHE_POLICIES)) fail("cache_policy", `${show(d.cache_policy)} is not one of ${Object.keys(CACHE_POLICIES).join(", ")}`);
  d.cache_sinks = integer("cache_sinks", fields.cache_sinks ?? 0, 0, I32_MAX);
  d.cache_recent = integer("cache_recent", fields.cache_recent ?? 0, 0, I32_MAX);
  if (["window", "sinks_recent"].includes(d.cache_policy) && d.cache_recent < 1) {
    fail("cache_recent", `cache_policy ${show(d.cache_policy)} needs cache_recent >= 1`);
  }
  if ((d.cache_policy === "sinks_recent") !== d.cache_sinks > 0) {
    fail("cache_sinks", `${d.cache_sinks}: at least 1 with cache_policy "sinks_recent", 0 otherwise`);
  }
  if (d.cache_policy === "full" && d.cache_recent) fail("cache_recent", `${d.cache_recent} with cache_policy "full" (0 there)`);
  d.page_tokens = integer("page_tokens", fields.page_tokens ?? 0, 0, I32_MAX);
  for (const name of ["page_bytes", "decode_paged"]) {
    if (fields[name] != null && typeof fields[name] !== "function") fail(name, "is not a function");
    d[name] = fields[name] ?? null;
  }
  if (d.page_tokens && !(d.page_bytes && d.decode_paged)) fail("page_tokens", "block tables need page_bytes: and decode_paged: functions");
  if (!d.page_tokens && (d.page_bytes || d.decode_paged)) fail("page_tokens", "page_bytes and decode_paged need page_tokens >= 1");
  if ((d.cache_policy !== "full" || d.page_tokens) && !d.decode) {
    fail("cache_policy", "a cache policy and block tables belong to a decoder: give decode: function");
  }
}

/** paths: [name, precision fields] for a path that rounds elsewhere (ABI 2.1), or a Path (2.2), or
 * its fields with its name ({name, k_len, ...}: what a module without Path, a page's, can write). */
function checkPaths(entries, kernelPrecision) {
  if (!Array.isArray(entries)) fail("paths", `${show(entries)} is not a list of paths`);
  const paths = [];
  for (let [index, entry] of entries.entries()) {
    const where = `paths[${index}]`;
    if (entry !== null && typeof entry === "object" && !Array.isArray(entry) && !(entry instanceof Path) && "name" in entry) {
      const { name, ...fields } = entry;
      entry = new Path(name, fields);
    }
    let name, p;
    if (entry instanceof Path) {
      [name, p] = [entry.name, entry.precision];
    } else if (Array.isArray(entry) && entry.length === 2) {
      name = checkName(where, entry[0]);
      p = precision(entry[1], `${where}.precision`);
    } else {
      fail(where, `${show(entry)} is not a [name, precision] pair, a Path or {name, ...}`);
    }
    for (const storage of ["q", "k", "v", "o", "bias"]) {
      if (p && p[storage] !== kernelPrecision[storage]) fail(where, `path ${show(name)} stores ${storage} in ${p[storage]}, the kernel in ${kernelPrecision[storage]}: a path changes arithmetic, never storage`);
    }
    if (p && p.flush_subnormals && !kernelPrecision.flush_subnormals) fail(where, `path ${show(name)}: flush_subnormals is the kernel's precision's to declare (its paths inherit it)`);
    if (paths.some((other) => (other instanceof Path ? other.name : other[0]) === name)) fail(where, `path ${show(name)} declared twice`);
    paths.push(entry instanceof Path ? entry : [name, p]);
  }
  return paths;
}

/** A checked declaration from plain fields (see declare). */
export function declaration(fields) {
  if (typeof fields !== "object" || fields === null) fail("declaration", `${show(fields)} is not an object`);
  unknownKeys("declaration", fields, DECLARATION_FIELDS);
  const d = {};
  if (typeof fields.name !== "string" || !fields.name || Buffer.byteLength(fields.name) > 63) {
    fail("name", `${show(fields.name)}: a non-empty string of at most 63 bytes`);
  }
  d.name = fields.name;
  d.features = features("features", fields.features ?? [], true);
  d.empty_rows = fields.empty_rows ?? "zero";
  if (!(d.empty_rows in EMPTY_ROWS)) fail("empty_rows", `${show(d.empty_rows)} is not "zero" or "nan"`);
  d.precision = precision(fields.precision ?? {});
  d.contract = contract(fields.contract ?? {});
  for (const name of ["decode", "backward", "merge", "packed"]) {
    if (fields[name] != null && typeof fields[name] !== "function") fail(name, "is not a function");
    d[name] = fields[name] ?? null;
  }
  if (d.backward && (PRECISION_FIELDS.some((f) => d.precision[f] !== "f32") || d.precision.flush_subnormals)) {
    fail("backward", "attest sends a backward only to a kernel whose storage and arithmetic are f32");
  }
  if (d.packed && ["q", "k", "v", "o"].some((f) => d.precision[f] !== "f32")) {
    fail("packed", "a packed call is float32: Q, K, V and O stored in f32");
  }
  // ABI 2.10: the packed function's cu_seqlens as BigInt64Array, not Int32Array.
  d.packed_int64 = fields.packed_int64 ?? false;
  if (typeof d.packed_int64 !== "boolean") fail("packed_int64", `${show(d.packed_int64)} is not true or false`);
  if (d.packed_int64 && !d.packed) fail("packed_int64", "int64 offsets belong to the packed layout: give packed: function");
  if (d.contract.deterministic_backward && !d.backward) fail("contract.deterministic_backward", "needs backward: function");
  if (d.contract.decode_only && !d.decode) fail("contract.decode_only", "a decode-only kernel needs decode: function");
  if (d.contract.causal_required && !d.features.includes("causal")) fail("contract.causal_required", "needs the feature \"causal\"");
  d.paths = checkPaths(fields.paths ?? [], d.precision);
  // ABI 2.1's list: every path that rounds elsewhere than the kernel; 2.2's: the declared paths.
  d.path_precisions = d.paths.map((p) => (p instanceof Path ? [p.name, p.precision] : p)).filter(([, p]) => p);
  d.declared_paths = d.paths.filter((p) => p instanceof Path);
  d.capabilities = d.features.reduce((bits, f) => bits | (1 << CAPABILITIES[f][0]), 0)
    | (d.decode ? 1 << CAPABILITIES.decode[0] : 0) | (d.backward ? 1 << CAPABILITIES.backward[0] : 0)
    | (d.merge ? 1 << CAPABILITIES.merge[0] : 0) | (d.packed ? 1 << CAPABILITIES.packed[0] : 0)
    | (d.packed_int64 ? 1 << CAPABILITIES.packed_int64[0] : 0);
  d.capabilities >>>= 0;
  d.has = (feature) => d.features.includes(feature);
  checkCache(d, fields);
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
