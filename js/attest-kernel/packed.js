// A packed varlen batch (ABI 2.8's FORWARD_PACKED, attest_packed_problem) as a JS kernel receives
// it: no padding; sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of
// q [total_q][H][Dk], its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k [total_k][Hkv][Dk]
// and v [total_k][Hkv][Dv] (float32). The kernel returns o [total_q][H][Dv] and lse [H][total_q].
// cu_seqlens are Int32Array, or BigInt64Array for a kernel declaring packed_int64 (ABI 2.10).
import { INTEGER_MASK_TERMS } from "./messages.js";
import { ProtocolError } from "./wire.js";

export class PackedProblem {
  constructor(fields) {
    Object.assign(this, fields);
    const { batch: B, heads: H, kv_heads: Hkv, head_dim: Dk, value_dim: Dv } = this;
    for (const name of ["cu_seqlens_q", "cu_seqlens_k"]) {
      const cu = this[name];
      if (cu.length !== B + 1 || cu[0] !== 0) throw new ProtocolError(`packed ${name} is not batch + 1 offsets from 0`);
      for (let b = 0; b < B; b++) if (cu[b + 1] < cu[b]) throw new ProtocolError(`packed ${name} decreases at ${b}`);
    }
    if (H % Hkv) throw new ProtocolError(`packed heads ${H} is not a multiple of kv_heads ${Hkv}`);
    const [Tq, Tk] = [this.cu_seqlens_q[B], this.cu_seqlens_k[B]];
    if (this.q.length !== Tq * H * Dk || this.k.length !== Tk * Hkv * Dk || this.v.length !== Tk * Hkv * Dv) {
      throw new ProtocolError("packed q, k or v does not match cu_seqlens and the heads");
    }
    if ((this.alibi_slopes && this.alibi_slopes.length !== H) || (this.sinks && this.sinks.length !== H)) {
      throw new ProtocolError("packed slopes or sinks do not match the heads");
    }
  }

  /** The offsets as the declaration reads them: BigInt64Array with packed_int64 (ABI 2.10). */
  widenOffsets() {
    for (const name of ["cu_seqlens_q", "cu_seqlens_k"]) this[name] = BigInt64Array.from(this[name], (x) => BigInt(x));
  }

  get total_q() { return Number(this.cu_seqlens_q[this.batch]); }
  get total_k() { return Number(this.cu_seqlens_k[this.batch]); }
  get oLength() { return this.total_q * this.heads * this.value_dim; }
  get lseLength() { return this.heads * this.total_q; }

  /** Sequence b: {q0, q_len, k0, k_len}: its first query and key rows and their counts. */
  sequence(b) {
    const [cq, ck] = [this.cu_seqlens_q, this.cu_seqlens_k].map((cu) => Array.from(cu.subarray(b, b + 2), Number));
    return { q0: cq[0], q_len: cq[1] - cq[0], k0: ck[0], k_len: ck[1] - ck[0] };
  }

  /** Whether key j of a sequence is visible to its query i (query i at q_offset + i, key j at j). */
  visible(i, j) {
    const position = this.q_offset + i;
    if (this.causal && j > position) return false;
    if (this.window && position - j >= this.window) return false;
    if (this.chunk && Math.floor(position / this.chunk) !== Math.floor(j / this.chunk)) return false;
    if (this.lookahead && j - position >= this.lookahead) return false;
    return true;
  }

  toString() {
    const terms = INTEGER_MASK_TERMS.filter((n) => this[n]).map((n) => ` ${n}=${this[n]}`).join("");
    return `PackedProblem(B=${this.batch} H=${this.heads} Hkv=${this.kv_heads} total_q=${this.total_q} ` +
      `total_k=${this.total_k} Dk=${this.head_dim} Dv=${this.value_dim} q_offset=${this.q_offset}` +
      `${this.causal ? " causal" : ""}${terms})`;
  }
}
