// ONNX Attention (opset 23) with is_causal = 1 and more keys than queries: query i sees keys j <= i
// (the "upper left" alignment the operator's documentation gives), not j <= i + (Tk - Tq).
// Q = 0, so each output row is the uniform average of the V rows the query sees; V is one-hot.
import { runNode, show } from "./common.mjs";

const [S, L] = [2, 4];
const v = new Float32Array(L * L).map((_, n) => (n % (L + 1) === 0 ? 1 : 0));
const out = await runNode({ opType: "Attention", attributes: { is_causal: 1 }, outputShape: [1, 1, S, L],
  inputs: { Q: ["float32", new Float32Array(S * L), [1, 1, S, L]], K: ["float32", new Float32Array(L * L), [1, 1, L, L]],
    V: ["float32", v, [1, 1, L, L]] } });
console.log("query 0:", show(out.slice(0, L)), " (bottom-right alignment: 0.3333 0.3333 0.3333 0.0000)");
console.log("query 1:", show(out.slice(L)), " (bottom-right alignment: 0.2500 0.2500 0.2500 0.2500)");
