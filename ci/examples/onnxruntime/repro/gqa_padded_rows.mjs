// com.microsoft GroupQueryAttention's prompt path, one sequence of length 3 padded to 6 tokens
// (seqlens_k = 2), local_window_size 1, V = I (so an output row is its weights). Query 3, past the
// length, sees no key in its window (key 3 only, a padding key): 0 without softcap and head_sink;
// with either it gets the last valid query's key (key 2) instead.
import { runNode, show } from "./common.mjs";
import { float } from "../onnx_writer.mjs";

const D = 8;
const T = 6;
const zeros = new Float32Array(T * D);
const identity = new Float32Array(T * D);
for (let j = 0; j < T; j++) identity[j * D + j] = 1;
const variants = { "neither:       ": {}, "softcap 5:     ": { softcap: 5 }, "head_sink -1e3:": { sink: -1000 } };
for (const [label, { softcap, sink }] of Object.entries(variants)) {
  const out = await runNode({ opType: "GroupQueryAttention", domain: "com.microsoft", outputShape: [1, T, D],
    attributes: { num_heads: 1, kv_num_heads: 1, local_window_size: 1, ...(softcap ? { softcap: float(softcap) } : {}) },
    outputs: ["present_key", "present_value"],
    inputs: { query: ["float32", zeros, [1, T, D]], key: ["float32", zeros, [1, T, D]], value: ["float32", identity, [1, T, D]],
      past_key: null, past_value: null, seqlens_k: ["int32", Int32Array.of(2), [1]],
      total_sequence_length: ["int32", Int32Array.of(T), []], cos_cache: null, sin_cache: null, position_ids: null,
      attention_bias: null, head_sink: sink ? ["float32", Float32Array.of(sink), [1]] : null } });
  console.log(`${label} query 3's weights`, show(out.slice(3 * D, 3 * D + T)));
}
console.log("(query 3 sees no key: 0 0 0 0 0 0)");
