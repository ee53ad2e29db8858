// A kernel with two declared paths (ABI 2.2 predicates, a 2.7 key tile, a path's own precision),
// as python/tests/path_kernels.py: "short" (Tk <= 64) runs an online softmax over tiles of 16 keys
// in float64; "long" (Tk >= 65) rounds P to bf16 before P.V. `paths` declares both honestly;
// `longUndeclaredBf16` declares the long path at the kernel's f32 (its rounding is then an error of
// that path); `shortPast64` serves Tk = 65 by its short path (the predicate says long).
import { declare, Path, bf16ToF32, f32ToBf16 } from "../index.js";

const FEATURES = ["causal", "lse"];
const SHORT = new Path("short", { k_len: [1, 64], key_tile: 16 });
const LONG = new Path("long", { k_len: [65, null], precision: { p: "bf16" } });

/** Online softmax over tiles of `tile` keys, each rescaling the running sums to the running max. */
function online(s, keyRows, Dv, tile = 16) {
  let m = -Infinity, total = 0;
  const o = new Float64Array(Dv);
  for (let start = 0; start < s.length; start += tile) {
    const end = Math.min(start + tile, s.length);
    let newM = m;
    for (let j = start; j < end; j++) newM = Math.max(newM, s[j]);
    if (newM === -Infinity) continue; // no visible key yet
    const rescale = Math.exp(m - newM);
    total *= rescale;
    for (let d = 0; d < Dv; d++) o[d] *= rescale;
    for (let j = start; j < end; j++) {
      if (s[j] === -Infinity) continue; // a masked key's V may hold NaN: never read
      const w = Math.exp(s[j] - newM);
      const vj = keyRows(j);
      total += w;
      for (let d = 0; d < Dv; d++) o[d] += w * vj[d];
    }
    m = newM;
  }
  return finish(o, total, m);
}

/** P = w / sum rounded to bf16 before P.V (the sum and LSE from the unrounded weights). */
function pInBf16(s, keyRows, Dv) {
  const m = s.reduce((a, b) => Math.max(a, b), -Infinity);
  let total = 0;
  for (const x of s) total += Math.exp(x - m);
  const o = new Float64Array(Dv);
  if (m === -Infinity) return finish(o, 0, m);
  for (let j = 0; j < s.length; j++) {
    if (s[j] === -Infinity) continue;
    const P = bf16ToF32(f32ToBf16(Math.exp(s[j] - m) / total));
    const vj = keyRows(j);
    for (let d = 0; d < Dv; d++) o[d] += P * vj[d] * total;
  }
  return finish(o, total, m);
}

/** o / total and LSE; an empty row's O = 0 and LSE = -inf. */
function finish(o, total, m) {
  if (total === 0) return { o, lse: -Infinity };
  for (let d = 0; d < o.length; d++) o[d] /= total;
  return { o, lse: Math.log(total) + m };
}

function forward(p, path) {
  const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const [q, k, v] = ["q", "k", "v"].map((name) => p.float32(name));
  const o = new Float64Array(B * H * Tq * Dv);
  const lse = new Float64Array(B * H * Tq);
  const row = path === "short" ? online : pInBf16;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kv = (b * Hkv + Math.floor(h / (H / Hkv))) * Tk;
      for (let i = 0; i < Tq; i++) {
        const at = (b * H + h) * Tq + i;
        const s = new Float64Array(Tk).fill(-Infinity);
        for (let j = 0; j < Tk; j++) {
          if (!p.visible(b, i, j)) continue;
          let dot = 0;
          for (let d = 0; d < Dk; d++) dot += q[at * Dk + d] * k[(kv + j) * Dk + d];
          s[j] = p.scale * dot;
        }
        const r = row(s, (j) => v.subarray((kv + j) * Dv, (kv + j + 1) * Dv), Dv);
        o.set(r.o, at * Dv);
        lse[at] = r.lse;
      }
    }
  }
  return { o, lse, path };
}

const twoPaths = (p) => forward(p, p.k_len <= 64 ? "short" : "long");

export const paths = declare({ name: "js-two-paths", features: FEATURES, paths: [SHORT, LONG] }, twoPaths);
export const longUndeclaredBf16 = declare({ name: "js-long-undeclared-bf16", features: FEATURES,
  paths: [SHORT, new Path("long", { k_len: [65, null] })] }, twoPaths);
// Exact at Tk = 65, but not by the path the declaration names.
export const shortPast64 = declare({ name: "js-short-past-64", features: FEATURES, paths: [SHORT, LONG] },
  (p) => forward(p, p.k_len <= 65 ? "short" : "long"));
