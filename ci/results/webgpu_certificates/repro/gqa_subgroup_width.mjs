// com.microsoft GroupQueryAttention on ONNX Runtime Web's native WebGPU EP, prompt of 32 tokens
// (from 32 on, its flash-attention program): Q = K = 0, so every visible key weighs the same, and
// V[j] = the one-hot e_j, so query i's output is its row of weights: 1/(i+1) for j <= i. On
// SwiftShader (subgroups of 4) the weights come out uneven, every fourth key over-weighted; on a
// device without the subgroups feature the same model gives the uniform row.
import { openPage, gqaPrompt, show } from "./common.mjs";

const T = 32;
const D = 32;
const v = new Float32Array(T * D);
for (let j = 0; j < T; j++) v[j * D + j] = 1;
for (const hideSubgroups of [false, true]) {
  const page = await openPage({ hideSubgroups });
  const { output } = await gqaPrompt(page, { T, D, q: new Float32Array(T * D), k: new Float32Array(T * D), v });
  console.log(`${hideSubgroups ? "device without subgroups" : `${page.info}`}:`);
  console.log(`  query 7's weights of keys 0-7: ${show(output.slice(7 * D, 7 * D + 8))}  (expected 0.1250 each)`);
  await page.close();
}
