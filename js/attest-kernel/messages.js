// The payloads of the protocol's messages (impl/PROTOCOL.md): the DESCRIPTOR a declaration
// becomes, the problem of FORWARD and BACKWARD, the decode configuration, and the replies.
import { ALIBI_SLOPES, CACHE_POLICIES, EMPTY_ROWS, INPUT_DOMAINS, LAYOUTS, MASK_TERMS } from "./interface.js";
import { FORMAT_CODES, arrayType } from "./storage.js";
import { decode as decodeQuantized, isQuantized } from "./quantized.js";
import { Path, RANGES as PATH_RANGES } from "./paths.js";
import { ProtocolError, Reader, Writer } from "./wire.js";

export const INTEGER_MASK_TERMS = MASK_TERMS.map((row) => row[1]);
const PRECISION_2_0 = ["q", "k", "v", "o", "scores", "p", "accumulator"];
const RANGES = ["head_dim", "batch", "heads", "q_len", "k_len", "q_offset"];

function writePrecision(w, p) {
  for (const name of PRECISION_2_0) w.i32(FORMAT_CODES[p[name]]);
  w.f64(p.exp_ulps);
}

function writePrecision21(w, p) {
  w.i32(FORMAT_CODES[p.bias]).i32(p.weight_sum == null ? 0 : FORMAT_CODES[p.weight_sum] + 1).i32(p.pv_unnormalised ? 1 : 0);
  for (const name of ["q_entry", "k_entry", "v_entry"]) w.i32(FORMAT_CODES[p[name]]);
}

/** ABI 2.2's attest_path_predicate (layouts.def's path_declaration), its name first. */
function writePathDeclaration(w, path) {
  w.str(path.name);
  for (const name of PATH_RANGES) w.i64(path[name][0]).i64(path[name][1]);
  w.i32(path.head_dim_multiple).i32(path.value_dim_multiple).i32(path.k_len_multiple).i32(path.k_len_not_multiple ? 1 : 0);
  w.u32(Path.bits(path.required)).u32(Path.bits(path.excluded)).i32(path.no_mask ? 1 : 0);
}

/** DESCRIPTOR: attest_kernel_v2 with its 2.1 (paths), 2.2 (declared paths), 2.3, 2.4, 2.7 and 2.9 sections. */
export function encodeDescriptor(d, abiVersion) {
  const c = d.contract;
  const w = new Writer();
  w.u32(abiVersion).str(d.name).u32(d.capabilities).i32(EMPTY_ROWS[d.empty_rows][0]);
  writePrecision(w, d.precision);
  w.array(c.head_dims, Int32Array);
  for (const name of RANGES) w.i64(c[name][0]).i64(c[name][1]);
  for (const value of [c.dk_equals_dv, c.default_scale_only, c.causal_required, c.decode_only, c.query_tile,
    c.key_tile, c.decode_lse_optional, c.self_attention_only, ALIBI_SLOPES[c.alibi_slopes][0], INPUT_DOMAINS[c.inputs][0]]) {
    w.i32(Number(value));
  }
  w.f64(c.alibi_max_bias).f64(c.max_abs_value);
  writePrecision21(w, d.precision);
  w.u32(d.path_precisions.length);
  for (const [name, p] of d.path_precisions) {
    w.str(name);
    writePrecision(w, p);
    writePrecision21(w, p);
  }
  w.u32(d.declared_paths.length); // 2.2
  for (const path of d.declared_paths) writePathDeclaration(w, path);
  w.i32(c.deterministic_backward ? 1 : 0); // 2.3
  // Each later section is written only when it or a later one says something (they follow in order).
  const cache = [CACHE_POLICIES[d.cache_policy][0], d.cache_sinks, d.cache_recent, d.cache_policy === "explicit" ? 1 : 0,
    d.page_tokens];
  const tiles = d.declared_paths.some((path) => path.key_tile);
  const flush = d.precision.flush_subnormals; // 2.9
  const widths = c.value_dims.length || c.value_dim[0] || c.value_dim[1] || c.alibi_excludes_bias || tiles || flush;
  if (cache.some((x) => x) || widths) for (const value of cache) w.i32(value); // 2.4
  if (widths) {
    w.array(c.value_dims, Int32Array); // 2.7
    w.i64(c.value_dim[0]).i64(c.value_dim[1]);
    w.i32(c.alibi_excludes_bias ? 1 : 0);
    w.array(tiles ? d.declared_paths.map((path) => path.key_tile) : [], Int32Array); // declared_key_tiles
  }
  if (flush) w.i32(1); // 2.9: precision.flush_subnormals, the kernel's (its paths inherit it)
  return w.finish();
}

function product(...dims) {
  let n = 1;
  for (const d of dims) {
    if (d < 1 || d > 2 ** 31) throw new ProtocolError("shape field out of range");
    n *= d;
    if (n > 2 ** 34) throw new ProtocolError("shape too large");
  }
  return n;
}

function terms(r, into) {
  const values = r.array(Int32Array);
  INTEGER_MASK_TERMS.forEach((name, i) => { into[name] = i < values.length ? values[i] : 0; });
  if (values.slice(INTEGER_MASK_TERMS.length).some((x) => x !== 0)) {
    throw new ProtocolError("an integer mask term this package does not know is set");
  }
}

/** A buffer of `shape` in its storage format: a typed array, or quantized K/V as QuantizedRows
 * (headScales: a decode step's q8_head scales of its kv heads, which then carries codes alone). */
export function storageArray(raw, format, shape, what, headScales = null) {
  if (isQuantized(format)) {
    try {
      return decodeQuantized(raw, format, shape, headScales);
    } catch (e) {
      throw new ProtocolError(`array ${what} does not match the shape: ${e.message}`);
    }
  }
  const count = shape.reduce((a, b) => a * b, 1);
  const Type = arrayType(format);
  if (raw.length !== count * Type.BYTES_PER_ELEMENT) throw new ProtocolError(`array ${what} does not match the shape`);
  return new Type(raw.buffer, raw.byteOffset, count);
}

function optional(values, count, what) {
  if (values.length === 0) return null;
  if (values.length !== count) throw new ProtocolError(`array ${what} does not match the shape`);
  return values;
}

/** The fields of a problem from a FORWARD (or BACKWARD) payload; flat typed arrays in
 * row-major order of docs/design.md#problem-semantics. `storage` maps q, k, v, bias to formats. */
export function decodeProblem(r, storage) {
  const p = {};
  for (const name of ["batch", "heads", "kv_heads", "q_len", "k_len", "head_dim", "value_dim"]) p[name] = r.i32();
  p.scale = r.f64();
  p.q_offset = r.i64();
  p.causal = r.i32() !== 0;
  terms(r, p);
  p.rope = r.i32() !== 0;
  p.rope_base = r.f64();
  const [kvValid, qValid, qSegment, kSegment] = [0, 1, 2, 3].map(() => r.array(Int32Array));
  const explicitMask = r.array(Uint8Array);
  p.softcap = r.f64();
  const slopes = r.array(Float32Array);
  const bias = r.array(storage.bias === "f32" ? Float32Array : Uint16Array);
  p.bias_per_batch = r.i32() !== 0;
  p.bias_per_head = r.i32() !== 0;
  const sinks = r.array(Float32Array);
  const [q, k, v] = [0, 1, 2].map(() => r.array(Uint8Array));
  const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  for (const dims of [[B, H, Tq, Dk], [B, Hkv, Tk, Dk], [B, Hkv, Tk, Dv]]) product(...dims); // in range, not absurd
  p.q = storageArray(q, storage.q, [B, H, Tq, Dk], "q");
  p.k = storageArray(k, storage.k, [B, Hkv, Tk, Dk], "k");
  p.v = storageArray(v, storage.v, [B, Hkv, Tk, Dv], "v");
  if (H % Hkv) throw new ProtocolError(`heads ${H} is not a multiple of kv_heads ${Hkv}`);
  p.kv_valid = optional(kvValid, B, "kv_valid");
  p.q_valid = optional(qValid, B, "q_valid");
  p.q_segment = optional(qSegment, B * Tq, "q_segment");
  p.k_segment = optional(kSegment, B * Tk, "k_segment");
  if ((p.q_segment === null) !== (p.k_segment === null)) throw new ProtocolError("q_segment and k_segment travel together");
  p.explicit_mask = optional(explicitMask, B * Tq * Tk, "explicit_mask");
  p.alibi_slopes = optional(slopes, H, "alibi_slopes");
  p.sinks = optional(sinks, H, "sinks");
  p.bias = optional(bias, (p.bias_per_batch ? B : 1) * (p.bias_per_head ? H : 1) * Tq * Tk, "bias");
  return p;
}

/** A decode configuration (DECODE_OPEN; with scalesFollow, the head of PAGE_BYTES and DECODE_PAGED,
 * whose q8_head scale arrays are always present, empty for any other format). */
export function decodeDecodeOpen(r, scalesFollow = false) {
  const c = {};
  for (const name of ["batch", "heads", "kv_heads", "head_dim", "value_dim"]) c[name] = r.i32();
  c.scale = r.f64();
  terms(r, c);
  c.rope = r.i32() !== 0;
  c.rope_base = r.f64();
  c.softcap = r.f64();
  const slopes = r.array(Float32Array);
  const sinks = r.array(Float32Array);
  // 2.4: q8_head's static scales, [B][Hkv] each (always present, maybe empty, with scalesFollow).
  const [kScales, vScales] = scalesFollow || !r.atEnd() ? [r.array(Float32Array), r.array(Float32Array)] : [[], []];
  if (!scalesFollow) r.expectEnd();
  for (const name of ["batch", "heads", "kv_heads", "head_dim", "value_dim"]) {
    if (c[name] < 1 || c[name] > 2 ** 30) throw new ProtocolError("decode configuration field out of range");
  }
  if ((slopes.length && slopes.length !== c.heads) || (sinks.length && sinks.length !== c.heads)) {
    throw new ProtocolError("decode slopes or sinks do not match the heads");
  }
  if (c.heads % c.kv_heads) throw new ProtocolError(`decode heads ${c.heads} is not a multiple of kv_heads ${c.kv_heads}`);
  const heads = c.batch * c.kv_heads;
  if ((kScales.length || vScales.length) && (kScales.length !== heads || vScales.length !== heads)) {
    throw new ProtocolError("decode k_scales and v_scales must hold B x Hkv values each");
  }
  c.alibi_slopes = slopes.length ? slopes : null;
  c.sinks = sinks.length ? sinks : null;
  c.k_scales = kScales.length ? kScales : null; // [B][Hkv] flat
  c.v_scales = vScales.length ? vScales : null;
  return c;
}

export function encodeForwardResult({ status, error = "", path = "", fault = "", o = null, lse = null }) {
  return new Writer().i32(status).str(error).str(path).str(fault).bytes(o).array(lse, Float32Array).finish();
}

export function encodeDecodeResult({ status, error = "", path = "", o = null, lse = null }) {
  return new Writer().i32(status).str(error).str(path).bytes(o).array(lse, Float32Array).finish();
}

export function encodeBackwardResult({ status, error = "", path = "", fault = "", dq = null, dk = null, dv = null, dsinks = null }) {
  return new Writer().i32(status).str(error).str(path).str(fault).bytes(dq).bytes(dk).bytes(dv)
    .array(dsinks, Float32Array).finish();
}

export function encodeMergeResult({ status, error = "", path = "", fault = "", o = null, lse = null }) {
  return new Writer().i32(status).str(error).str(path).str(fault).array(o, Float32Array).array(lse, Float32Array).finish();
}

// A reader per field type of the table's layouts; a type this file does not know throws, by name.
const READERS = { i32: (r) => r.i32(), i64: (r) => r.i64(), f64: (r) => r.f64(), f32_array: (r) => r.array(Float32Array),
  i32_array: (r) => r.array(Int32Array), i64_array: (r) => r.array(BigInt64Array), u8_array: (r) => r.array(Uint8Array) };

/** The fields of `layout` (a LAYOUTS entry) read in the table's order, by name. */
export function readLayout(r, layout, what) {
  const fields = {};
  for (const [type, name] of layout) {
    if (!READERS[type]) throw new ProtocolError(`${what}: field ${name} of type ${type} has no reader here`);
    fields[name] = READERS[type](r);
  }
  return fields;
}

/** The step of a DECODE_PAGED payload after its configuration, read field by field as the table's
 * paged_step layout lists them (PagedStep checks it knows each of them). */
export function decodePagedStep(r) {
  const s = readLayout(r, LAYOUTS.paged_step, "paged step");
  r.expectEnd();
  s.want_lse = s.want_lse !== 0;
  return s;
}

/** A FORWARD_PACKED payload, read field by field as the table's packed_problem layout lists them,
 * then want_lse: the fields of a PackedProblem (empty slopes or sinks: null; flags as booleans). */
export function decodePackedProblem(r) {
  const p = readLayout(r, LAYOUTS.packed_problem, "packed problem");
  p.want_lse = r.i32() !== 0;
  r.expectEnd();
  for (const name of ["causal", "rope"]) p[name] = p[name] !== 0;
  for (const name of ["alibi_slopes", "sinks"]) p[name] = p[name].length ? p[name] : null;
  for (const name of ["batch", "heads", "kv_heads", "head_dim", "value_dim"]) {
    if (p[name] < 1 || p[name] > 2 ** 30) throw new ProtocolError("packed problem field out of range");
  }
  return p;
}

export function encodePackedResult({ status, error = "", path = "", fault = "", o = null, lse = null }) {
  return new Writer().i32(status).str(error).str(path).str(fault).array(o, Float32Array).array(lse, Float32Array).finish();
}

export function encodeDecodePagedResult({ status, error = "", path = "", fault = "", pool = null, o = null, lse = null }) {
  return new Writer().i32(status).str(error).str(path).str(fault).bytes(pool).bytes(o).array(lse, Float32Array).finish();
}

export function encodeRetained(status, error, positions) {
  return new Writer().i32(status).str(error).array(positions, BigInt64Array).finish();
}

export function encodePageBytesResult(status, error, bytes) {
  return new Writer().i32(status).str(error).i64(bytes).finish();
}

export function encodeDecodeOpened(status, error, session) {
  return new Writer().i32(status).str(error).u64(session).finish();
}

export function encodeString(message) {
  return new Writer().str(message).finish();
}

export { Reader };
