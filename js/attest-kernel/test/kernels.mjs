// Kernels that misbehave on purpose, for serve.test.js.
import { declare, Unsupported } from "../index.js";

export const throws = declare({ name: "js-throws", features: ["lse"] }, (p) => {
  throw new RangeError(`the kernel broke on purpose at Tq=${p.q_len}`);
});
export const shortO = declare({ name: "js-short-o" }, () => ({ o: [0] }));
export const unsupported = declare({ name: "js-unsupported" }, (p) => {
  throw new Unsupported(`no Dk=${p.head_dim} here`);
});
export function undeclared() { return null; }
export const rejects = declare({ name: "js-rejects" }, async (p) => {
  await new Promise((resolve) => setTimeout(resolve, 1));
  throw new Error(`async kernel failed at Tk=${p.k_len}`);
});
// A backward whose gradients are recognisable constants: the test checks their sizes and order.
export const constantGradients = declare({ name: "js-constant-gradients",
  backward: (p, grad) => ({ dq: new Float32Array(p.q.length).fill(1), dk: new Float32Array(p.k.length).fill(2),
    dv: new Float32Array(p.v.length).fill(grad.threads), path: "constant" }) }, () => null);
// A block-table decoder answering one o for a batch of two: a status naming the batch.
export const pagedOneOutput = declare({ name: "js-paged-one-output", decode: () => ({ step() {} }), page_tokens: 16,
  page_bytes: () => 128, decode_paged: () => ({ o: [Float32Array.of(0)], lse: [Float32Array.of(0)] }) }, () => null);
// An explicit cache whose sessions always name positions 0 and 1 (too many for a first query).
export const explicitCache = declare({ name: "js-explicit-cache", cache_policy: "explicit",
  decode: () => ({ step: (q, k, v, wantLse, n) => ({ o: new Float32Array(n) }), retained: () => [0, 1] }) }, () => null);
// A q8_head decoder answering each step with the V values it read (H = Hkv): the test checks them.
export const echoQ8Head = declare({ name: "js-echo-q8-head", precision: { k: "q8_head", v: "q8_head" },
  decode: () => ({ step: (q, k, v) => ({ o: v.float32(), path: `${k.format} ${k.codes.length}` }) }) }, () => null);
