// A declared internal path (ABI 2.2's attest_path_predicate, 2.7's key tile): its name, as the
// kernel returns it with {o, lse, path}, the problems it takes, and where it rounds.
//
// attest then draws each path's problems from its predicate, judges each call at the precision of
// the path that served it, and fails a call served by another path than the first declared path
// whose predicate the problem meets (impl/kernels/include/attest/kernels/path_predicate.h).
// python/attest_kernel/paths.py is the same class in Python.
import { CAPABILITIES, MASK_TERMS } from "./interface.js";
import { I32_MAX, fail, features, flag, integer, precision, range, show, unknownKeys } from "./checks.js";

export const PATH_NAME_BYTES = 31;
export const OPEN_END = 2 ** 40; // a range's max given as null: what C kernels write for "no upper limit"
export const MAX_KEY_TILE = 4096; // kMaxContractTile
// The features that are mask terms (FeatureKind::kMaskTerm in impl/model/src/features.cpp).
export const MASK_FEATURES = ["causal", "key_padding", "query_padding", "segments", "explicit_mask", ...MASK_TERMS.map((t) => t[1])];
export const RANGES = ["batch", "heads", "q_len", "k_len", "head_dim", "value_dim"]; // in wire order
const FIELDS = ["precision", ...RANGES, "head_dim_multiple", "value_dim_multiple", "k_len_multiple", "k_len_not_multiple",
  "required", "excluded", "no_mask", "key_tile"];

export function checkName(where, name) {
  if (typeof name !== "string" || Buffer.byteLength(name) < 1 || Buffer.byteLength(name) > PATH_NAME_BYTES || /[\x00-\x1f\x7f]/.test(name)) {
    fail(where, `path name ${show(name)}: 1 to ${PATH_NAME_BYTES} printable bytes`);
  }
  return name;
}

/** null (any), or [min, max] with max null for no upper limit. */
function openRange(where, value) {
  if (Array.isArray(value) && value.length === 2 && value[1] === null) value = [value[0], OPEN_END];
  return range(where, value, false);
}

/** A path and the problems it takes: a problem goes to the first declared path whose predicate it
 * meets (every range holds, the widths are multiples, Tk's remainder is as stated, the required
 * features are used, the excluded ones and, with no_mask, every mask term are not), so declare the
 * narrowest first. Ranges are [min, max] inclusive, max null for no limit, null for any.
 * head_dim_multiple, value_dim_multiple: 0 or Dk (Dv) % it === 0. k_len_multiple: 0, or Tk % it
 * === 0 (!== 0 with k_len_not_multiple). key_tile (ABI 2.7): keys per online-softmax tile on this
 * path (0: the contract's key_tile). precision: null (the kernel's), or where this path rounds. */
export class Path {
  constructor(name, fields = {}) {
    checkName("paths", name);
    const where = `path ${show(name)}`;
    if (typeof fields !== "object" || fields === null) fail(where, `${show(fields)} is not an object`);
    unknownKeys(where, fields, FIELDS);
    this.name = name;
    this.precision = fields.precision == null ? null : precision(fields.precision, `${where}.precision`);
    for (const r of RANGES) this[r] = openRange(`${where}.${r}`, fields[r]);
    for (const m of ["head_dim_multiple", "value_dim_multiple", "k_len_multiple"]) {
      this[m] = integer(`${where}.${m}`, fields[m] ?? 0, 0, I32_MAX);
    }
    this.key_tile = integer(`${where}.key_tile`, fields.key_tile ?? 0, 0, MAX_KEY_TILE);
    for (const f of ["k_len_not_multiple", "no_mask"]) this[f] = flag(`${where}.${f}`, fields[f] ?? false);
    if (this.k_len_not_multiple && this.k_len_multiple <= 1) {
      fail(`${where}.k_len_not_multiple`, `Tk % ${this.k_len_multiple} != 0 takes no problem`);
    }
    for (const f of ["required", "excluded"]) this[f] = features(`${where}.${f}`, fields[f] ?? []);
    const both = this.required.filter((f) => this.excluded.includes(f));
    if (both.length) fail(where, `${both.join(", ")} both required and excluded`);
    if (this.no_mask && this.required.some((f) => MASK_FEATURES.includes(f))) fail(where, "requires a mask term and no_mask");
    Object.freeze(this);
  }

  /** The ATTEST_CAP_* bits of `required` or `excluded`. */
  static bits(names) {
    return names.reduce((bits, f) => bits | (1 << CAPABILITIES[f][0]), 0) >>> 0;
  }
}
