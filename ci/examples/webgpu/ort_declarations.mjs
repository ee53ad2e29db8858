// What ONNX Runtime Web's WebGPU kernels declare: ci/examples/onnxruntime's operators (the same
// models as on the CPU builds) on a runtime whose sessions run in the browser, each declared with
// what its WGSL programs were found to do. The name carries the adapter (identity()).
import { declare, Unsupported } from "../../../js/attest-kernel/index.js";
import { multiHeadAttention } from "../onnxruntime/operators.mjs";
import { groupQueryAttentionKernels } from "../onnxruntime/gqa.mjs";
import { groupQueryAttentionDecode } from "../onnxruntime/gqa_decode.mjs";

// "head_size must be a multiple of 8", as on the CPU
const HEAD_DIMS = Array.from({ length: 32 }, (_, i) => 8 * (i + 1));

export function ortWebgpuKernels(rt, prefix, identity) {
  const gqa = groupQueryAttentionKernels(rt, prefix);
  const gqaPrompt = declare({
    name: identity(`${prefix}-gqa-prompt`),
    features: ["causal", "gqa", "window", "softcap", "sinks"],
    contract: { inputs_finite: true, self_attention_only: true, causal_required: true, dk_equals_dv: true, head_dims: HEAD_DIMS },
  }, gqa.gqaPromptUnbiased);

  const gqaDecode = declare({
    name: identity(`${prefix}-gqa-decode`),
    features: ["causal", "gqa", "window", "softcap", "sinks"],
    contract: { inputs_finite: true, decode_only: true, causal_required: true, dk_equals_dv: true, head_dims: HEAD_DIMS },
    decode: groupQueryAttentionDecode(rt, prefix).declaration.decode,
  }, () => { throw new Unsupported("decode sessions only: the prompt path is gqaPrompt"); });

  const mha = declare({
    name: identity(`${prefix}-mha`),
    features: ["causal", "key_padding", "bias"],
    contract: { inputs_finite: true },
  }, multiHeadAttention(rt));
  return { gqaPrompt, gqaDecode, mha };
}
