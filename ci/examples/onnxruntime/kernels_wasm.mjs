// The same operators from onnxruntime-web, the wasm build (what transformers.js runs), in Node:
// the same declarations under the names "onnxruntime-wasm-*".
// Serve one with: node js/attest-kernel/serve.js ci/examples/onnxruntime/kernels_wasm.mjs:EXPORT
import { declarations } from "./declarations.mjs";
import { wasm } from "./wasm.mjs";

export const { mha, attention, mhaSelf, attentionSelf, attentionUnmasked, attentionF16, gqaPrompt, gqaPromptUnbiased,
  gqaPromptPadded, gqaPromptPaddedPlain, gqaPromptF16, gqaDecode, mhaDecode, gqaDecodeRagged, gqaDecodeRaggedPadded } =
  declarations(wasm, "onnxruntime-wasm");
