// com.microsoft GroupQueryAttention on ONNX Runtime Web's native WebGPU EP with softcap = 1: two
// tokens, query 1 scores key 0 at 4 and key 1 at 0, so with the softcap its weights are
// softmax(tanh(4), tanh(0)) = 0.7309, 0.2691, without it softmax(4, 0) = 0.9820, 0.0180. V is the
// one-hot e_j, so the output row is the weights. The WebGPU EP gives the uncapped ones; the CPU
// EP (onnxruntime-node) the capped ones.
import { openPage, gqaPrompt, float, show } from "./common.mjs";

const T = 2;
const D = 8;
const q = new Float32Array(T * D);
const k = new Float32Array(T * D);
const v = new Float32Array(T * D);
q[D] = 2; // query 1
k[0] = 2; // key 0: score 2 * 2 * scale 1 = 4
v[0] = 1;
v[D + 1] = 1;
const page = await openPage();
for (const softcap of [0, 1]) {
  const attributes = { scale: float(1), ...(softcap ? { softcap: float(softcap) } : {}) };
  const { output } = await gqaPrompt(page, { T, D, q, k, v, attributes });
  console.log(`softcap ${softcap}: query 1's weights ${show(output.slice(D, D + 2))}`);
}
console.log(`(with softcap 1: ${show([Math.exp(Math.tanh(4)) / (Math.exp(Math.tanh(4)) + 1), 1 / (Math.exp(Math.tanh(4)) + 1)])})`);
await page.close();
