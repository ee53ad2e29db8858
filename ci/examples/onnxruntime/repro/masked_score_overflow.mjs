// Causal attention over two tokens: key 1 is hidden from query 0, yet its K row is read. Query 0's
// score against it, (-1e9)(-1e30), overflows to +inf in float32; masking a score that is already
// +inf cannot bring it back (+inf plus a finite mask is +inf; plus -inf is NaN), and query 0's row
// turns NaN. Query 0 sees key 0 only: its output should be V[0] = 0.5 whatever key 1 holds (with
// K[1] = 1 instead, it is).
import { runNode, show } from "./common.mjs";

const q = Float32Array.of(-1e9, 1);
const v = Float32Array.of(0.5, 2);
for (const hidden of [1, -1e30]) {
  const k = Float32Array.of(1e-9, hidden);
  const attention = await runNode({ opType: "Attention", attributes: { is_causal: 1 }, outputShape: [1, 1, 2, 1],
    inputs: { Q: ["float32", q, [1, 1, 2, 1]], K: ["float32", k, [1, 1, 2, 1]], V: ["float32", v, [1, 1, 2, 1]] } });
  const mha = await runNode({ opType: "MultiHeadAttention", domain: "com.microsoft", outputShape: [1, 2, 1],
    attributes: { num_heads: 1, unidirectional: 1 },
    inputs: { query: ["float32", q, [1, 2, 1]], key: ["float32", k, [1, 2, 1]], value: ["float32", v, [1, 2, 1]] } });
  console.log(`K[1] = ${hidden}: Attention O = ${show(attention)}; MultiHeadAttention O = ${show(mha)}`);
}
