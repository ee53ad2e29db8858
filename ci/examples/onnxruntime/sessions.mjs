// ONNX Runtime sessions for one-node models, built in JavaScript and cached by their key (shapes
// and attributes): attest sends many problems of few shapes. One runtime per ONNX Runtime build:
// onnxruntime-node (the native CPU library) or onnxruntime-web (the same kernels built to wasm).
import { singleNodeModel } from "./onnx_writer.mjs";

const LIMIT = 64; // sessions kept per runtime; the oldest goes first

/** { name, sessionFor(spec), tensor(type, data, dims) } over `ort` (either package's module), each
 * session created with `options` (one thread, no graph rewrites: the operator as it runs). */
export function runtime(name, ort, options) {
  const cache = new Map();
  return {
    name,
    async sessionFor(spec) {
      const key = JSON.stringify(spec);
      let session = cache.get(key);
      if (!session) {
        session = ort.InferenceSession.create(singleNodeModel(spec), { ...options, graphOptimizationLevel: "disabled",
          logSeverityLevel: 3 }); // errors only
        cache.set(key, session);
        if (cache.size > LIMIT) cache.delete(cache.keys().next().value);
      }
      return session;
    },
    tensor: (type, data, dims) => new ort.Tensor(type, data, dims),
  };
}
