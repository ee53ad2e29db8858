// The wasm build's kernels (kernels_wasm.mjs) declaring what they do with subnormals: onnxruntime-web
// flushes softmax weights and results below 2^-126 to zero (finding 6 of
// ci/results/onnxruntime_certificates/README.md), which ABI 2.9's precision.flush_subnormals allows.
// Apart from kernels_wasm.mjs so that its committed certificates (wasm/) keep their declarations.
// Serve one with: node js/attest-kernel/serve.js ci/examples/onnxruntime/kernels_wasm_flushing.mjs:EXPORT
import { declarations } from "./declarations.mjs";
import { wasm } from "./wasm.mjs";

const kernels = declarations(wasm, "onnxruntime-wasm-flushing");
for (const kernel of Object.values(kernels)) kernel.declaration.precision.flush_subnormals = true;

export const { mha, attention, mhaSelf, attentionSelf, attentionUnmasked, attentionF16, gqaPrompt, gqaPromptUnbiased,
  gqaPromptPadded, gqaPromptPaddedPlain, gqaPromptF16, gqaDecode, mhaDecode } = kernels;
