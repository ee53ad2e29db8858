// com.microsoft MultiHeadAttention on ONNX Runtime Web's JSEP WebGPU kernels (the default
// onnxruntime-web entry) and on its native WebGPU EP: two tokens, head size 4, query 0 scores key 0
// at 0 and key 1 at 2 * scale; V is the one-hot e_j, so the output row is the weights:
// softmax(0, 2 * scale), i.e. 0.3775 0.6225 for scale 0.25, 0.0474 0.9526 for 1.5 (0.2689 0.7311 for
// the default 1/sqrt(4), 0.1192 0.8808 for 1). With unidirectional = 1 query 0 sees key 0 only: 1 0.
import { openPage, float, show } from "./common.mjs";
import { FLOAT } from "../../../examples/onnxruntime/onnx_writer.mjs";

const T = 2;
const D = 4;
const q = new Float32Array(T * D);
const k = new Float32Array(T * D);
const v = new Float32Array(T * D);
q[0] = 2;
k[D] = 1; // key 1: score 2 * scale with query 0
v[0] = 1;
v[D + 1] = 1;
const t = (name) => ({ name, type: FLOAT, shape: [1, T, D] });
for (const [label, bundle] of [["JSEP (onnxruntime-web)", "ort.bundle.min.mjs"], ["native (onnxruntime-web/webgpu)", "ort.webgpu.bundle.min.mjs"]]) {
  const page = await openPage({ bundle });
  for (const attributes of [{ scale: float(0.25) }, { scale: float(1.5) }, { unidirectional: 1 }]) {
    const { output } = await page.run({
      node: { opType: "MultiHeadAttention", domain: "com.microsoft", inputs: ["query", "key", "value"], outputs: ["output"],
        attributes: { num_heads: 1, ...attributes } },
      inputs: [t("query"), t("key"), t("value")], outputs: [t("output")], opsets: { "": 23, "com.microsoft": 1 } },
    { query: ["float32", q, [1, T, D]], key: ["float32", k, [1, T, D]], value: ["float32", v, [1, T, D]] });
    const which = attributes.scale ? `scale = ${attributes.scale.float}:     ` : "unidirectional = 1:";
    console.log(`${label}, ${which} query 0's weights ${show(output.slice(0, 2))}`);
  }
  await page.close();
}
