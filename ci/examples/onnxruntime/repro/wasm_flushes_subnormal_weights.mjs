// ONNX Attention (opset 23), one query and two keys whose weights are 1 and e^-90 = 8.2e-40, a
// float32 subnormal; V = [0, 1], so the output is the second key's weight. The native CPU build
// keeps it; the wasm build (onnxruntime-web) returns 0.
import { runNode, web } from "./common.mjs";

const model = (ort) => runNode({ opType: "Attention", attributes: { scale: { float: 1 } }, outputShape: [1, 1, 1, 1], ort,
  inputs: { Q: ["float32", Float32Array.of(1), [1, 1, 1, 1]], K: ["float32", Float32Array.of(0, -90), [1, 1, 2, 1]],
    V: ["float32", Float32Array.of(0, 1), [1, 1, 2, 1]] } });
const exact = Math.exp(-90) / (1 + Math.exp(-90));
console.log("exact:                ", exact.toExponential(4));
console.log("onnxruntime-node:     ", (await model(undefined))[0].toExponential(4));
console.log("onnxruntime-web wasm: ", (await model(web))[0].toExponential(4));
