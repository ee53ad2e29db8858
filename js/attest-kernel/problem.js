// A problem as the kernel function receives it: the fields of impl/PROTOCOL.md's problem, flat
// typed arrays in row-major order, and helpers for the mask and the storage formats.
import { toFloat32 } from "./storage.js";
import { QuantizedRows } from "./quantized.js";
import { INTEGER_MASK_TERMS } from "./messages.js";

export class Problem {
  /** fields: decodeProblem's; q [B][H][Tq][Dk], k [B][Hkv][Tk][Dk], v [B][Hkv][Tk][Dv] in their
   * storage formats (Float32Array, or Uint16Array bit patterns for bf16 / f16: see float32()); k and v
   * stored quantized arrive as QuantizedRows (codes and scales, see quantized.js). */
  constructor(fields, declaration) {
    Object.assign(this, fields);
    this.declaration = declaration;
    this.storage = { q: declaration.precision.q, k: declaration.precision.k, v: declaration.precision.v,
      o: declaration.precision.o, bias: declaration.precision.bias };
  }

  /** q, k, v or bias as a Float32Array whatever its storage format (quantized K/V decoded exactly:
   * scale times code). */
  float32(name) {
    if (this[name] instanceof QuantizedRows) return this[name].float32();
    return this[name] == null ? null : toFloat32(this[name], this.storage[name]);
  }

  get oLength() { return this.batch * this.heads * this.q_len * this.value_dim; }
  get lseLength() { return this.batch * this.heads * this.q_len; }

  /** Whether key j is visible to query i of sequence b under every mask term (the bias's -inf aside):
   * causal j <= qpos; window qpos - j < window; chunk same block; lookahead j - qpos < lookahead;
   * padding; segments; the explicit mask. Query i sits at q_offset + i, key j at j. */
  visible(b, i, j) {
    const position = this.q_offset + i;
    if (this.causal && j > position) return false;
    if (this.window && position - j >= this.window) return false;
    if (this.chunk && Math.floor(position / this.chunk) !== Math.floor(j / this.chunk)) return false;
    if (this.lookahead && j - position >= this.lookahead) return false;
    if (this.kv_valid && j >= this.kv_valid[b]) return false;
    if (this.q_valid && i >= this.q_valid[b]) return false;
    if (this.q_segment && this.q_segment[b * this.q_len + i] !== this.k_segment[b * this.k_len + j]) return false;
    if (this.explicit_mask && !this.explicit_mask[(b * this.q_len + i) * this.k_len + j]) return false;
    return true;
  }

  toString() {
    const on = ["causal", "rope"].filter((n) => this[n]);
    const termsOn = INTEGER_MASK_TERMS.filter((n) => this[n]).map((n) => `${n}=${this[n]}`);
    return `Problem(B=${this.batch} H=${this.heads} Hkv=${this.kv_heads} Tq=${this.q_len} Tk=${this.k_len} ` +
      `Dk=${this.head_dim} Dv=${this.value_dim} scale=${this.scale} q_offset=${this.q_offset}` +
      [...on, ...termsOn].map((t) => " " + t).join("") + ")";
  }
}

/** A decode session's configuration (DECODE_OPEN): causal, its first step at position 0; k_scales and
 * v_scales: the [B][Hkv] static scales of q8_head K and V (flat Float32Array), else null. */
export class DecodeConfig {
  constructor(fields, declaration) {
    Object.assign(this, fields);
    this.declaration = declaration;
  }
}
