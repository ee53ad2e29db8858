// What every reproduction shares: a one-node ONNX model run once with onnxruntime-node (or, given
// `ort: web`, with onnxruntime-web's wasm build, one thread).
import native from "onnxruntime-node";
import * as webModule from "onnxruntime-web";
import { singleNodeModel } from "../onnx_writer.mjs";

export const web = webModule.default ?? webModule;
web.env.wasm.numThreads = 1;

/** Runs op (inputs {name: [type, data, dims], or null for an optional input left out, in the
 * operator's order}) and returns its first output's values; `outputs` names the outputs after it. */
export async function runNode({ opType, domain = "", attributes, inputs, outputShape, opsets, outputs = [], ort = native }) {
  const names = Object.keys(inputs).filter((name) => inputs[name]);
  const types = { float32: 1, bool: 9, int32: 6 };
  const model = singleNodeModel({
    node: { opType, domain, inputs: Object.keys(inputs).map((name) => (inputs[name] ? name : "")),
      outputs: ["out", ...outputs], attributes },
    inputs: names.map((name) => ({ name, type: types[inputs[name][0]], shape: inputs[name][2] })),
    outputs: [{ name: "out", type: 1, shape: outputShape }],
    opsets: opsets ?? { "": 23, "com.microsoft": 1 },
  });
  const session = await ort.InferenceSession.create(model);
  const feeds = Object.fromEntries(names.map((name) => [name, new ort.Tensor(...inputs[name])]));
  return Array.from((await session.run(feeds)).out.data);
}

export const show = (values) => values.map((x) => (Number.isNaN(x) ? "NaN" : x.toFixed(4))).join(" ");
