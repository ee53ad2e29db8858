// com.microsoft GroupQueryAttention (causal, no past), head size 8: query 0's only visible key gets
// a -inf attention_bias, so query 0 sees no key. With one token (the path ORT takes for a single
// new token) its output is NaN; with two or more it is 0: one situation, two empty-row policies.
import { runNode, show } from "./common.mjs";

const D = 8;
for (const T of [1, 2, 3]) {
  const ones = new Float32Array(T * D).fill(1);
  const bias = new Float32Array(T * T);
  bias[0] = -Infinity; // query 0, key 0
  const out = await runNode({ opType: "GroupQueryAttention", domain: "com.microsoft", outputShape: [1, T, D],
    attributes: { num_heads: 1, kv_num_heads: 1 }, outputs: ["present_key", "present_value"],
    inputs: { query: ["float32", ones, [1, T, D]], key: ["float32", ones, [1, T, D]], value: ["float32", ones, [1, T, D]],
      past_key: null, past_value: null, seqlens_k: ["int32", Int32Array.of(T - 1), [1]],
      total_sequence_length: ["int32", Int32Array.of(T), []], cos_cache: null, sin_cache: null, position_ids: null,
      attention_bias: ["float32", bias, [1, 1, T, T]] } });
  console.log(`${T} token(s): query 0's output`, show(out.slice(0, 1)));
}
