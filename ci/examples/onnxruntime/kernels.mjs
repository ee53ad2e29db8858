// ONNX Runtime's CPU attention operators from onnxruntime-node (the native library) as attest
// kernels (float32 storage); declarations.mjs says what each declares.
// Serve one with: node js/attest-kernel/serve.js ci/examples/onnxruntime/kernels.mjs:EXPORT
import { declarations } from "./declarations.mjs";
import { native } from "./native.mjs";

export const { mha, attention, mhaSelf, attentionSelf, attentionUnmasked, attentionF16, gqaPrompt, gqaPromptUnbiased,
  gqaPromptPadded, gqaPromptPaddedPlain, gqaPromptF16, gqaDecode, mhaDecode, gqaDecodeRagged, gqaDecodeRaggedPadded } =
  declarations(native, "onnxruntime");
