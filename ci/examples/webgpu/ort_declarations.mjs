// What ONNX Runtime Web's WebGPU kernels declare: ci/examples/onnxruntime's operators (the same
// models as on the CPU builds) on a runtime whose sessions run in the browser, each declared with
// what its WGSL programs were found to do (ci/results/webgpu_certificates/README.md). The name
// carries the adapter (identity()).
import { declare, Unsupported } from "../../../js/attest-kernel/index.js";
import { multiHeadAttention } from "../onnxruntime/operators.mjs";
import { groupQueryAttentionKernels } from "../onnxruntime/gqa.mjs";
import { groupQueryAttentionDecode } from "../onnxruntime/gqa_decode.mjs";

// "head_size must be a multiple of 8", as on the CPU
const HEAD_DIMS = Array.from({ length: 32 }, (_, i) => 8 * (i + 1));
const GQA_CONTRACT = { inputs_finite: true, causal_required: true, dk_equals_dv: true, head_dims: HEAD_DIMS };
// The CPU kernels' features but softcap: the WebGPU programs ignore the softcap attribute (finding 2).
const GQA_FEATURES = ["causal", "gqa", "window", "sinks"];

export function ortWebgpuKernels(rt, prefix, identity) {
  const gqa = groupQueryAttentionKernels(rt, prefix);
  const gqaPrompt = declare({
    name: identity(`${prefix}-gqa-prompt`),
    features: GQA_FEATURES,
    contract: { ...GQA_CONTRACT, self_attention_only: true },
  }, gqa.gqaPromptUnbiased);

  // As the CPU kernel declares it, softcap included: finding 2's certificate.
  const gqaPromptSoftcap = declare({
    name: identity(`${prefix}-gqa-cap`),
    features: [...GQA_FEATURES, "softcap"],
    contract: { ...GQA_CONTRACT, self_attention_only: true },
  }, gqa.gqaPromptUnbiased);

  const gqaDecode = declare({
    name: identity(`${prefix}-gqa-decode`),
    features: GQA_FEATURES,
    contract: { ...GQA_CONTRACT, decode_only: true },
    decode: groupQueryAttentionDecode(rt, prefix).declaration.decode,
  }, () => { throw new Unsupported("decode sessions only: the prompt path is gqaPrompt"); });

  // MultiHeadAttention as ci/examples/onnxruntime's mhaSelf: causal self-attention, masked keys
  // scored. Its key_padding_mask is "not implemented for webgpu".
  const mhaSelf = declare({
    name: identity(`${prefix}-mha-self`),
    features: ["causal"],
    contract: { inputs: "masked_scored", self_attention_only: true },
  }, multiHeadAttention(rt));
  return { gqaPrompt, gqaPromptSoftcap, gqaDecode, mhaSelf };
}
