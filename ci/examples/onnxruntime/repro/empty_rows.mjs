// A query that sees no key. MultiHeadAttention's key_padding_mask adds mask_filter_value (-10000 by
// default) to the masked scores instead of excluding the keys: a row whose every key is masked is
// the unmasked softmax's output, (e*2 + 4/e) / (e + 1/e) = 2.2384 here. An all -inf attention_bias
// gives NaN there; ONNX Attention gives 0 for an all-false bool mask and an all -inf float mask.
// (MultiHeadAttention's inputs are positional: its `bias` input, zeros, holds key_padding_mask's place.)
import { runNode, show } from "./common.mjs";

const [S, L, D] = [1, 2, 1];
const q = ["float32", Float32Array.of(1), [1, S, D]];
const k = ["float32", Float32Array.of(1, -1), [1, L, D]];
const v = ["float32", Float32Array.of(2, 4), [1, L, D]];
const mha = (extra) => runNode({ opType: "MultiHeadAttention", domain: "com.microsoft", attributes: { num_heads: 1 },
  outputShape: [1, S, D], inputs: { query: q, key: k, value: v, ...extra } });
console.log("MHA, key_padding_mask all 0:   ", show(await mha({ bias: ["float32", new Float32Array(3 * D), [3 * D]],
  key_padding_mask: ["int32", Int32Array.of(0, 0), [1, L]] })));
console.log("MHA, attention_bias all -inf:  ", show(await mha({ bias: ["float32", new Float32Array(3 * D), [3 * D]],
  key_padding_mask: ["int32", Int32Array.of(1, 1), [1, L]], attention_bias: ["float32", Float32Array.of(-Infinity, -Infinity), [1, 1, S, L]] })));
const attention = (mask) => runNode({ opType: "Attention", attributes: {}, outputShape: [1, 1, S, D],
  inputs: { Q: ["float32", Float32Array.of(1), [1, 1, S, D]], K: ["float32", Float32Array.of(1, -1), [1, 1, L, D]],
    V: ["float32", Float32Array.of(2, 4), [1, 1, L, D]], attn_mask: mask } });
console.log("Attention, bool mask all false:", show(await attention(["bool", Uint8Array.of(0, 0), [1, 1, S, L]])));
console.log("Attention, float mask all -inf:", show(await attention(["float32", Float32Array.of(-Infinity, -Infinity), [1, 1, S, L]])));
console.log("(attest's zero policy: 0; its nan policy: NaN)");
