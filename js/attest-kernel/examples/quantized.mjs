// K and V stored in q8 (groups of 32 values, each group an f16 scale and int8 codes): the float64
// reference of reference.mjs on the values it reads back from codes and scales, in a forward call
// and in decode sessions; and a twin reading every group with its row's first scale (the wrong
// block), which attest must not certify. Serve it with
//   node js/attest-kernel/serve.js js/attest-kernel/examples/quantized.mjs:q8
import { declare } from "../index.js";
import { forward, openSession } from "./reference.mjs";

// What the storage changes is K and V's values: the mask terms and modifiers are reference.mjs's
// (certified there), so fewer features here keep the run short.
const FEATURES = ["causal", "window", "key_padding", "gqa", "lse"];

/** A kernel over K and V as `values(rows)` reads them from their QuantizedRows. */
function kernelReading(name, values) {
  const withValues = (p) => Object.assign(Object.create(p), {
    float32: (what) => (what === "k" || what === "v" ? values(p[what]) : p.float32(what)),
  });
  const decode = (c) => {
    const session = openSession(c);
    return { step: (q, k, v, wantLse, n) => session.step(q, values(k), values(v), wantLse, n) };
  };
  return declare({ name, features: FEATURES, precision: { k: "q8", v: "q8" }, decode }, (p) => forward(withValues(p)));
}

// The package's decode helper: value i of a row is its group's scale times its code, exactly.
export const q8 = kernelReading("js-q8", (rows) => rows.float32());

// By hand, the wrong block: every value of a row scaled by the row's first group's scale (right
// for Dk, Dv <= 32, where a row is one group).
export const q8FirstScale = kernelReading("js-q8-first-scale", (rows) => {
  const out = new Float32Array(rows.codes.length);
  for (let i = 0; i < out.length; i++) out[i] = rows.scales[Math.floor(i / rows.width) * rows.groups] * rows.codes[i];
  return out;
});
