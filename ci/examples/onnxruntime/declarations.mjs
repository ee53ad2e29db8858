// The declarations of ONNX Runtime's operators, the same on every build: each says what the operator
// documents (ci/results/onnxruntime_certificates/README.md says what attest found). `prefix` names
// the build in the kernel's name: "onnxruntime" (native) or "onnxruntime-wasm".
import { declare } from "../../../js/attest-kernel/index.js";
import { multiHeadAttention, onnxAttention } from "./operators.mjs";
import { groupQueryAttentionKernels } from "./gqa.mjs";
import { groupQueryAttentionDecode } from "./gqa_decode.mjs";
import { multiHeadAttentionDecode } from "./mha_decode.mjs";
import { groupQueryAttentionRagged } from "./gqa_ragged.mjs";

export function declarations(rt, prefix) {
  const mha = declare({
    name: `${prefix}-mha-f32`,
    features: ["causal", "key_padding", "bias"],
    contract: { inputs_finite: true },
  }, multiHeadAttention(rt));

  const attention = declare({
    name: `${prefix}-attention-f32`,
    features: ["causal", "gqa", "explicit_mask", "key_padding", "softcap", "bias"],
    contract: { inputs_finite: true },
  }, onnxAttention(rt));

  // The same operators declared around their conventions: self-attention only (Tq = Tk, q_offset 0,
  // where a top-left causal mask is attest's).
  // MultiHeadAttention without its bias: a -inf bias hiding every causally visible key moves the
  // row's weight to the keys the causal mask hides with -10000 (or gives NaN when none is).
  // Both operators score every key, then mask it: "masked_scored" is their honest input domain (a
  // masked key's K keeps its score finite, its V finite), where "finite" let a masked score overflow.
  const mhaSelf = declare({
    name: `${prefix}-mha-f32-self`,
    features: ["causal"],
    contract: { inputs: "masked_scored", self_attention_only: true },
  }, multiHeadAttention(rt));

  // ONNX Attention's masks exclude keys (an empty row outputs 0): its mask terms stay declared.
  const attentionSelf = declare({
    name: `${prefix}-attention-f32-self`,
    features: ["causal", "gqa", "explicit_mask", "key_padding", "softcap", "bias"],
    contract: { inputs: "masked_scored", self_attention_only: true },
  }, onnxAttention(rt));

  // ONNX Attention with no mask term at all: what it certifies without reading a masked key.
  const attentionUnmasked = declare({
    name: `${prefix}-attention-f32-unmasked`,
    features: ["gqa", "softcap"],
    contract: { inputs_finite: true },
  }, onnxAttention(rt));

  // ONNX Attention in float16 (Q, K, V and O as bit patterns), no mask term. Its scores are float16:
  // declared f32, attest found NaN once a logit passed 65504 and errors past the f32 bound.
  const attentionF16 = declare({
    name: `${prefix}-attention-f16-unmasked`,
    features: ["gqa", "softcap"],
    precision: { q: "f16", k: "f16", v: "f16", o: "f16", scores: "f16" },
    contract: { inputs_finite: true, default_scale_only: true },
  }, onnxAttention(rt, "f16"));

  return { mha, attention, mhaSelf, attentionSelf, attentionUnmasked, attentionF16,
    ...groupQueryAttentionKernels(rt, prefix), gqaDecode: groupQueryAttentionDecode(rt, prefix),
    mhaDecode: multiHeadAttentionDecode(rt, prefix), gqaDecodeRagged: groupQueryAttentionRagged(rt, prefix),
    gqaDecodeRaggedPadded: groupQueryAttentionRagged(rt, prefix, true) };
}
