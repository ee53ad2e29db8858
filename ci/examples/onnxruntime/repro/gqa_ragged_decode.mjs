// com.microsoft GroupQueryAttention's decode path over a ragged batch: three sequences holding 5, 0
// and 2 tokens (past_key / past_value padded to 5 with zeros) each append one token. Q = K = 0, so a
// sequence's output is the mean of the values it attends: past token t holds t + 1, the new one 6.
// With seqlens_k[b] = sequence b's past length (its total - 1) ONNX Runtime is exact; with the padded
// length for every entry (a wrapper's mistake attest's block-table checks rarely draw) it reads the
// padding as keys.
import { runNode, show } from "./common.mjs";

const [B, L, D] = [3, 5, 8];
const lengths = [5, 0, 2];
const past = new Float32Array(B * L * D);
lengths.forEach((length, b) => { for (let t = 0; t < length; t++) past.fill(t + 1, (b * L + t) * D, (b * L + t + 1) * D); });
const zeros = new Float32Array(B * D);
const run = async (seqlens) => (await runNode({ opType: "GroupQueryAttention", domain: "com.microsoft",
  outputShape: [B, 1, D], attributes: { num_heads: 1, kv_num_heads: 1 }, outputs: ["present_key", "present_value"],
  inputs: { query: ["float32", zeros, [B, 1, D]], key: ["float32", zeros, [B, 1, D]],
    value: ["float32", new Float32Array(B * D).fill(6), [B, 1, D]], past_key: ["float32", new Float32Array(B * L * D), [B, 1, L, D]],
    past_value: ["float32", past, [B, 1, L, D]], seqlens_k: ["int32", Int32Array.from(seqlens), [B]],
    total_sequence_length: ["int32", Int32Array.of(L + 1), []] } })).filter((_, i) => i % D === 0);
console.log("seqlens_k = [5, 0, 2] (each entry's own):", show(await run(lengths)));
console.log("seqlens_k = [5, 5, 5] (the padded length):", show(await run([L, L, L])));
console.log("(exact, each sequence over its own tokens: 3.5000 6.0000 3.0000)");
