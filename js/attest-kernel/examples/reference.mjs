// A float64 reference kernel in JavaScript (every mask term and score modifier, GQA, LSE, decode),
// and the same kernel with a wrong declaration on purpose. Serve it with
//   node js/attest-kernel/serve.js js/attest-kernel/examples/reference.mjs:attention
import { declare, Unsupported } from "../index.js";

const FEATURES = ["causal", "window", "key_padding", "query_padding", "segments", "explicit_mask", "gqa", "lse",
  "chunk", "softcap", "alibi", "bias", "sinks", "lookahead"];

/** One row of attention: scores of the visible keys, a sink in the denominator only. */
function attendRow(q, qAt, k, v, kAt, vAt, keys, Dk, Dv, logit, sink, o, oAt) {
  const s = new Float64Array(keys.length);
  let m = sink;
  for (let n = 0; n < keys.length; n++) {
    const j = keys[n];
    let dot = 0;
    for (let d = 0; d < Dk; d++) dot += q[qAt + d] * k[kAt + j * Dk + d];
    s[n] = logit(dot, j);
    if (s[n] > m) m = s[n];
  }
  if (m === -Infinity) return -Infinity; // an empty row: O stays 0
  let total = Math.exp(sink - m);
  for (let n = 0; n < keys.length; n++) {
    const w = Math.exp(s[n] - m);
    total += w;
    for (let d = 0; d < Dv; d++) o[oAt + d] += w * v[vAt + keys[n] * Dv + d];
  }
  for (let d = 0; d < Dv; d++) o[oAt + d] /= total;
  return Math.log(total) + m;
}

export function forward(p, { alignToStart = false } = {}) {
  const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const [q, k, v, bias] = ["q", "k", "v", "bias"].map((name) => p.float32(name));
  const o = new Float64Array(B * H * Tq * Dv);
  const lse = new Float64Array(B * H * Tq);
  const problem = alignToStart ? Object.assign(Object.create(p), { q_offset: 0 }) : p;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kvAt = (b * Hkv + Math.floor(h / (H / Hkv))) * Tk;
      for (let i = 0; i < Tq; i++) {
        const row = (b * H + h) * Tq + i;
        const biasAt = (((p.bias_per_batch ? b : 0) * (p.bias_per_head ? H : 1) + (p.bias_per_head ? h : 0)) * Tq + i) * Tk;
        const keys = []; // a -inf bias hides its key before its score is read (its K row may be NaN)
        for (let j = 0; j < Tk; j++) if (problem.visible(b, i, j) && !(bias && bias[biasAt + j] === -Infinity)) keys.push(j);
        const logit = (dot, j) => {
          let x = p.scale * dot;
          if (p.softcap) x = p.softcap * Math.tanh(x / p.softcap);
          if (p.alibi_slopes) x += p.alibi_slopes[h] * (j - (p.q_offset + i));
          if (bias) x += bias[biasAt + j];
          return x;
        };
        const sink = p.sinks ? p.sinks[h] : -Infinity;
        lse[row] = attendRow(q, row * Dk, k, v, kvAt * Dk, kvAt * Dv, keys, Dk, Dv, logit, sink, o, row * Dv);
        if (lse[row] === -Infinity && p.sinks) lse[row] = sink; // a sink and no key: O = 0, LSE = sink
      }
    }
  }
  return { o, lse, path: alignToStart ? "top-left" : "float64" };
}

/** A decode session: keeps every token's K and V, attends each new query causally. */
export function openSession(c) {
  const keys = [];
  const values = [];
  return {
    step(q, k, v, wantLse, n) {
      const { batch: B, heads: H, kv_heads: Hkv, head_dim: Dk, value_dim: Dv } = c;
      for (let b = 0; b < B; b++) {
        keys[b] ??= Array.from({ length: Hkv }, () => []);
        values[b] ??= Array.from({ length: Hkv }, () => []);
        for (let g = 0; g < Hkv; g++) {
          for (let t = 0; t < n; t++) {
            keys[b][g].push(...k.subarray(((b * Hkv + g) * n + t) * Dk, ((b * Hkv + g) * n + t + 1) * Dk));
            values[b][g].push(...v.subarray(((b * Hkv + g) * n + t) * Dv, ((b * Hkv + g) * n + t + 1) * Dv));
          }
        }
      }
      const held = keys[0][0].length / Dk;
      const o = new Float64Array(B * H * n * Dv);
      const lse = new Float64Array(B * H * n);
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H; h++) {
          const g = Math.floor(h / (H / Hkv));
          for (let t = 0; t < n; t++) {
            const position = held - n + t;
            const visible = [];
            for (let j = 0; j <= position; j++) {
              if (c.window && position - j >= c.window) continue;
              if (c.chunk && Math.floor(position / c.chunk) !== Math.floor(j / c.chunk)) continue;
              visible.push(j);
            }
            const logit = (dot, j) => {
              let x = c.scale * dot;
              if (c.softcap) x = c.softcap * Math.tanh(x / c.softcap);
              if (c.alibi_slopes) x += c.alibi_slopes[h] * (j - position);
              return x;
            };
            const row = (b * H + h) * n + t;
            const sink = c.sinks ? c.sinks[h] : -Infinity;
            lse[row] = attendRow(q, row * Dk, keys[b][g], values[b][g], 0, 0, visible, Dk, Dv, logit, sink, o, row * Dv);
          }
        }
      }
      return { o, lse: wantLse ? lse : null, path: "float64-decode" };
    },
  };
}

export const attention = declare({ name: "js-reference", features: FEATURES, decode: openSession }, (p) => forward(p));

// Declared causal with attest's alignment (query i at q_offset + i), computed with the opposite
// one (query i at i): wrong on purpose, attest must not certify it.
export const wrongAlignment = declare({ name: "js-causal-top-left", features: ["causal", "lse"] },
  (p) => forward(p, { alignToStart: true }));

// A decode-only kernel whose sessions score with twice the scale: wrong on purpose; its failures
// name the path its steps report ("float64-decode"), not "default".
export const wrongDecode = declare({
  name: "js-wrong-decode", features: ["causal", "lse"], contract: { decode_only: true },
  decode: (c) => openSession({ ...c, scale: 2 * c.scale }),
}, () => { throw new Unsupported("decode sessions only"); });
