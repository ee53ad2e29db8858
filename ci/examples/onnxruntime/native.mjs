// onnxruntime-node's CPU execution provider, one thread.
import ort from "onnxruntime-node";
import { runtime } from "./sessions.mjs";

export const native = runtime("native", ort, { intraOpNumThreads: 1, interOpNumThreads: 1 });
