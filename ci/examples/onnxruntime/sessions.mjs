// ONNX Runtime sessions for one-node models, built in JavaScript and cached by their key (shapes
// and attributes): attest sends many problems of few shapes.
import ort from "onnxruntime-node";
import { singleNodeModel } from "./onnx_writer.mjs";

const cache = new Map();
const LIMIT = 64; // sessions kept; the oldest goes first

/** The session of `spec` (singleNodeModel's argument), created once per distinct spec. */
export async function sessionFor(spec) {
  const key = JSON.stringify(spec);
  let session = cache.get(key);
  if (!session) {
    session = ort.InferenceSession.create(singleNodeModel(spec), { intraOpNumThreads: 1, interOpNumThreads: 1,
      graphOptimizationLevel: "disabled" });
    cache.set(key, session);
    if (cache.size > LIMIT) cache.delete(cache.keys().next().value);
  }
  return session;
}

export const tensor = (type, data, dims) => new ort.Tensor(type, data, dims);
