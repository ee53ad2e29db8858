// Merging partial attention states in JavaScript (ABI 2.6): the float64 log-sum-exp merge of
// split-KV and cascade attention beside the reference forward, and the same merge weighting by
// exp(lse) in float32 without subtracting the largest lse first (past lse 88 it overflows).
import { declare } from "../index.js";
import { attention } from "./reference.mjs";

const FEATURES = ["causal", "window", "key_padding", "query_padding", "segments", "explicit_mask", "chunk", "lookahead",
  "gqa", "lse"];

// states: { parts, rows, value_dim, o [parts][rows][Dv], lse [parts][rows] }; a part that saw no key
// of a row has lse -Infinity and an o of NaN, never read.
function merge({ parts, rows, value_dim: Dv, o, lse }, subtractMax = true) {
  const out = new Float64Array(rows * Dv), outLse = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let i = 0; i < parts; i++) m = Math.max(m, lse[i * rows + r]);
    if (m === -Infinity) { // no part saw a key: o 0, lse -inf
      outLse[r] = -Infinity;
      continue;
    }
    const shift = subtractMax ? m : 0;
    let sum = 0;
    for (let i = 0; i < parts; i++) {
      const l = lse[i * rows + r];
      if (l === -Infinity) continue;
      const w = subtractMax ? Math.exp(l - shift) : Math.fround(Math.exp(Math.fround(l)));
      sum += w;
      for (let c = 0; c < Dv; c++) out[r * Dv + c] += w * o[(i * rows + r) * Dv + c];
    }
    for (let c = 0; c < Dv; c++) out[r * Dv + c] /= sum;
    outLse[r] = shift + Math.log(sum);
  }
  return { o: out, lse: outLse, path: subtractMax ? "float64" : "no-max" };
}

export const merging = declare({ name: "js-merge", features: FEATURES, merge }, attention);
export const mergeWithoutMax = declare({ name: "js-merge-without-max", features: FEATURES,
  merge: (states) => merge(states, false) }, attention);
