// ONNX Attention (opset 23), one batch entry and one head, Tq = Tk = T, D = 64, no mask: the native
// build runs every T; the wasm build throws "Integer overflow" (SafeInt) from T = 4096 on.
import { runNode, web } from "./common.mjs";

for (const T of [2048, 4096]) {
  const x = new Float32Array(T * 64).fill(0.01);
  const inputs = { Q: ["float32", x, [1, 1, T, 64]], K: ["float32", x, [1, 1, T, 64]], V: ["float32", x, [1, 1, T, 64]] };
  for (const [name, ort] of [["onnxruntime-node", undefined], ["onnxruntime-web wasm", web]]) {
    try {
      const out = await runNode({ opType: "Attention", outputShape: [1, 1, T, 64], inputs, ort });
      console.log(`T = ${T}, ${name}: O[0] = ${out[0].toFixed(4)}`);
    } catch (e) {
      console.log(`T = ${T}, ${name}: ${String(e.message ?? e).includes("Integer overflow") ? "error: Integer overflow" : e}`);
    }
  }
}
