// com.microsoft MultiHeadAttention with unidirectional = 1, no past, and more keys than queries:
// every query but the last is top-left aligned (query 0 sees only key 0) while the last sees every
// key (bottom-right): the rows follow neither alignment. Q = 0 and V one-hot: each row is the visible keys' uniform weights.
import { runNode, show } from "./common.mjs";

const [S, L] = [2, 4];
const v = new Float32Array(L * L).map((_, n) => (n % (L + 1) === 0 ? 1 : 0));
const out = await runNode({ opType: "MultiHeadAttention", domain: "com.microsoft",
  attributes: { num_heads: 1, unidirectional: 1 }, outputShape: [1, S, L],
  inputs: { query: ["float32", new Float32Array(S * L), [1, S, L]], key: ["float32", new Float32Array(L * L), [1, L, L]],
    value: ["float32", v, [1, L, L]] } });
console.log("query 0:", show(out.slice(0, L)), " (top-left 1 0 0 0; bottom-right 0.3333 0.3333 0.3333 0)");
console.log("query 1:", show(out.slice(L)), " (top-left 0.5 0.5 0 0; bottom-right 0.25 0.25 0.25 0.25)");
