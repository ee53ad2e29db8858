// A float64 kernel on packed varlen buffers (ABI 2.8): q [total_q][H][Dk], k and v
// [total_k][Hkv][D], sequences cut by cu_seqlens, no padding (flash_attn_varlen_func's layout).
// Its padded FORWARD is the reference kernel's. `packedSharedKeys` reads every sequence's keys
// from the start of k, as a kernel forgetting cu_seqlens_k does: attest must not certify it.
// `packedInt64` declares int64 offsets (ABI 2.10) and refuses any other width.
//   node js/attest-kernel/serve.js js/attest-kernel/examples/packed.mjs:packed
import { declare } from "../index.js";
import { attention } from "./reference.mjs";

const FEATURES = ["causal", "window", "chunk", "lookahead", "gqa", "lse", "softcap", "alibi", "sinks"];

/** o [total_q][H][Dv], lse [H][total_q] of a PackedProblem. keysFromStart: the mutant. */
function packedForward(p, { keysFromStart = false } = {}) {
  const { batch: B, heads: H, kv_heads: Hkv, head_dim: Dk, value_dim: Dv } = p;
  const o = new Float64Array(p.total_q * H * Dv), lse = new Float64Array(H * p.total_q);
  for (let b = 0; b < B; b++) {
    const { q0, q_len: Tq, k_len: Tk } = p.sequence(b);
    const k0 = keysFromStart ? 0 : p.sequence(b).k0;
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / Hkv));
      for (let i = 0; i < Tq; i++) {
        const row = (q0 + i) * H + h, position = p.q_offset + i;
        const s = [];
        let m = p.sinks ? p.sinks[h] : -Infinity;
        for (let j = 0; j < Tk; j++) {
          if (!p.visible(i, j)) continue;
          let dot = 0;
          for (let d = 0; d < Dk; d++) dot += p.q[row * Dk + d] * p.k[((k0 + j) * Hkv + g) * Dk + d];
          let x = p.scale * dot;
          if (p.softcap) x = p.softcap * Math.tanh(x / p.softcap);
          if (p.alibi_slopes) x += p.alibi_slopes[h] * (j - position);
          s.push([j, x]);
          m = Math.max(m, x);
        }
        const at = h * p.total_q + q0 + i;
        if (m === -Infinity) { lse[at] = -Infinity; continue; } // an empty row: O stays 0
        let total = p.sinks ? Math.exp(p.sinks[h] - m) : 0;
        for (const [j, x] of s) {
          const w = Math.exp(x - m);
          total += w;
          for (let d = 0; d < Dv; d++) o[row * Dv + d] += w * p.v[((k0 + j) * Hkv + g) * Dv + d];
        }
        for (let d = 0; d < Dv; d++) o[row * Dv + d] /= total;
        lse[at] = Math.log(total) + m;
      }
    }
  }
  return { o, lse: p.want_lse ? lse : null, path: "packed" };
}

// Sizes kept small (float64 in JS is slow) so that its ctest stays cheap.
const contract = { head_dim: [1, 64], q_len: [1, 64], k_len: [1, 64] };
const declared = (name, options) => declare({ name, features: FEATURES, contract,
  packed: (p) => packedForward(p, options) }, (p) => attention(p));

export const packed = declared("js-packed");
export const packedSharedKeys = declared("js-packed-shared-keys", { keysFromStart: true });
export const packedInt64 = declare({ name: "js-packed-int64", features: FEATURES, contract, packed_int64: true,
  packed: (p) => {
    if (!(p.cu_seqlens_q instanceof BigInt64Array && p.cu_seqlens_k instanceof BigInt64Array)) {
      throw new TypeError(`cu_seqlens are ${p.cu_seqlens_q.constructor.name}, not the int64 declared`);
    }
    return { ...packedForward(p), path: "packed-int64" };
  } }, (p) => attention(p));
