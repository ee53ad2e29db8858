// What the reproductions share, without attest: headless Chromium on SwiftShader (playwright-core
// from ci/examples/webgpu), onnxruntime-web 1.30 from ci/examples/onnxruntime, a one-node ONNX model
// written by ci/examples/onnxruntime/onnx_writer.mjs and run on the WebGPU EP, CPU fallback disabled.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { singleNodeModel, FLOAT, INT32, float } from "../../../examples/onnxruntime/onnx_writer.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXAMPLES = path.join(HERE, "../../../examples");
const playwright = createRequire(path.join(EXAMPLES, "webgpu/package.json"))("playwright-core");
export { float };

/** Chromium with one page at an http origin serving ci/examples (the ORT bundle's wasm is fetched). */
export async function openPage({ hideSubgroups = false, bundle = "ort.webgpu.bundle.min.mjs" } = {}) {
  const server = http.createServer((req, res) => {
    const file = path.join(EXAMPLES, path.normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)));
    if (!file.startsWith(EXAMPLES) || !fs.existsSync(file) || !fs.statSync(file).isFile()) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": file.endsWith(".wasm") ? "application/wasm" : "text/javascript" });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const browser = await playwright.chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
    args: ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] });
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/webgpu/package.json`);
  await page.evaluate(async ([url, hide]) => {
    if (hide) { // ORT's device without the subgroups features
      const requestDevice = GPUAdapter.prototype.requestDevice;
      GPUAdapter.prototype.requestDevice = function (d = {}) {
        return requestDevice.call(this, { ...d, requiredFeatures: [...(d.requiredFeatures ?? [])].filter((f) => !f.startsWith("subgroup")) });
      };
    }
    window.ort = await import(url);
    window.ort.env.wasm.numThreads = 1;
  }, [`/onnxruntime/node_modules/onnxruntime-web/dist/${bundle}`, hideSubgroups]);
  const info = await page.evaluate(async () => {
    const a = await navigator.gpu.requestAdapter();
    return `${a.info.vendor} ${a.info.architecture}, subgroups of ${a.info.subgroupMinSize} to ${a.info.subgroupMaxSize}`;
  });
  return { info, close: async () => { await browser.close(); server.close(); },
    /** Runs a one-node model (`spec` as singleNodeModel takes it) on `feeds` {name: [type, array, dims]}; the outputs' data. */
    run: (spec, feeds) => page.evaluate(async ([model, inputs]) => {
      const ort = window.ort;
      const session = await ort.InferenceSession.create(new Uint8Array(model), { executionProviders: ["webgpu"],
        graphOptimizationLevel: "disabled", extra: { session: { disable_cpu_ep_fallback: "1" } } });
      const tensors = Object.fromEntries(Object.entries(inputs).map(([n, [type, data, dims]]) =>
        [n, new ort.Tensor(type, type === "int32" ? Int32Array.from(data) : Float32Array.from(data), dims)]));
      const out = await session.run(tensors);
      return Object.fromEntries(Object.entries(out).map(([n, t]) => [n, Array.from(t.data)]));
    }, [[...singleNodeModel(spec)], Object.fromEntries(Object.entries(feeds).map(([n, [t, d, s]]) => [n, [t, Array.from(d), s]]))]) };
}

/** GroupQueryAttention, prompt (no past): Q, K, V [1][T][H*D], one KV head per head. */
export function gqaPrompt(page, { T, D, H = 1, q, k, v, attributes = {} }) {
  const t = (name, dims) => ({ name, type: FLOAT, shape: dims });
  return page.run({
    node: { opType: "GroupQueryAttention", domain: "com.microsoft", inputs: ["query", "key", "value", "", "", "seqlens_k", "total_sequence_length"],
      outputs: ["output", "present_key", "present_value"], attributes: { num_heads: H, kv_num_heads: H, ...attributes } },
    inputs: [t("query", [1, T, H * D]), t("key", [1, T, H * D]), t("value", [1, T, H * D]),
      { name: "seqlens_k", type: INT32, shape: [1] }, { name: "total_sequence_length", type: INT32, shape: [] }],
    outputs: [t("output", [1, T, H * D]), t("present_key", [1, H, T, D]), t("present_value", [1, H, T, D])],
    opsets: { "": 23, "com.microsoft": 1 } },
  { query: ["float32", q, [1, T, H * D]], key: ["float32", k, [1, T, H * D]], value: ["float32", v, [1, T, H * D]],
    seqlens_k: ["int32", [T - 1], [1]], total_sequence_length: ["int32", [T], []] });
}

export const show = (values) => Array.from(values, (x) => x.toFixed(4)).join(" ");
