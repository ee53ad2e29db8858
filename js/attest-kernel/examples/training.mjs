// A float64 training kernel in JavaScript: the forward of reference.mjs without score modifiers,
// and its backward from attest's O and LSE (dV = P^T dO, dS = P (dP - rowsum(dO O)), dQ = scale dS K,
// dK = scale dS^T Q, summed over each kv head's query heads); and the same with dQ 1% off on purpose.
import { declare } from "../index.js";
import { attention } from "./reference.mjs";

const FEATURES = ["causal", "window", "key_padding", "query_padding", "segments", "explicit_mask", "chunk", "lookahead",
  "gqa", "lse"];

function gradients(p, grad, dqFactor = 1) {
  const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const [q, k, v] = ["q", "k", "v"].map((name) => p.float32(name));
  const dq = new Float64Array(B * H * Tq * Dk);
  const dk = new Float64Array(B * Hkv * Tk * Dk);
  const dv = new Float64Array(B * Hkv * Tk * Dv);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kv = (b * Hkv + Math.floor(h / (H / Hkv))) * Tk;
      for (let i = 0; i < Tq; i++) {
        const row = (b * H + h) * Tq + i;
        const lse = grad.lse[row];
        if (lse === -Infinity) continue; // an empty row contributes nothing
        let rowDot = 0; // rowsum(dO * O)
        for (let d = 0; d < Dv; d++) rowDot += grad.d_o[row * Dv + d] * grad.o[row * Dv + d];
        for (let j = 0; j < Tk; j++) {
          if (!p.visible(b, i, j)) continue; // masked keys may hold NaN: never read
          let s = 0;
          for (let d = 0; d < Dk; d++) s += q[row * Dk + d] * k[(kv + j) * Dk + d];
          const P = Math.exp(p.scale * s - lse);
          let dP = 0;
          for (let d = 0; d < Dv; d++) {
            dP += grad.d_o[row * Dv + d] * v[(kv + j) * Dv + d];
            dv[(kv + j) * Dv + d] += P * grad.d_o[row * Dv + d];
          }
          const dS = P * (dP - rowDot) * p.scale;
          for (let d = 0; d < Dk; d++) {
            dq[row * Dk + d] += dqFactor * dS * k[(kv + j) * Dk + d];
            dk[(kv + j) * Dk + d] += dS * q[row * Dk + d];
          }
        }
      }
    }
  }
  return { dq, dk, dv, path: "float64" };
}

export const training = declare({ name: "js-training", features: FEATURES, backward: gradients }, attention);
export const wrongDq = declare({ name: "js-wrong-dq", features: FEATURES, backward: (p, g) => gradients(p, g, 1.01) },
  attention);
