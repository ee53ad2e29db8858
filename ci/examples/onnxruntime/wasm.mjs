// onnxruntime-web's wasm execution provider in Node: the same operators compiled to WebAssembly
// (what transformers.js runs), one thread, no proxy worker.
import * as web from "onnxruntime-web";
import { runtime } from "./sessions.mjs";

const ort = web.default ?? web;
ort.env.wasm.numThreads = 1;
ort.env.wasm.proxy = false;

export const wasm = runtime("wasm", ort, { executionProviders: ["wasm"] });
