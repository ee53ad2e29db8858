// ONNX Runtime's CPU attention operators as attest kernels (float32 storage), each declared with
// what the operator documents; ci/results/onnxruntime_certificates/README.md says what attest found.
// Serve one with: node js/attest-kernel/serve.js ci/examples/onnxruntime/kernels.mjs:EXPORT
import { declare } from "../../../js/attest-kernel/index.js";
import { FLOAT, INT32, BOOL } from "./onnx_writer.mjs";
import { float } from "./onnx_writer.mjs";
import { sessionFor, tensor } from "./sessions.mjs";
import { keyPaddingMask, servedMask, swapHeadsAndTokens } from "./layout.mjs";

const input = (name, type, shape) => ({ name, type, shape });

/** Q and the scale attribute: ONNX Runtime refuses a scale <= 0 (Attention) or reads 0 as "the
 * default" (MultiHeadAttention), so such a scale is folded into Q and the operator gets 1. */
function scaled(p) {
  if (p.scale > 0) return { q: p.q, scale: p.scale };
  return { q: p.q.map((x) => x * p.scale), scale: 1 };
}

/** com.microsoft MultiHeadAttention: Q, K, V as [B][T][H*D]; `unidirectional` is its causal flag,
 * key_padding_mask its key padding ([B][Tk] int32), attention_bias [B|1][H|1][Tq][Tk] its bias.
 * Masked keys get mask_filter_value (-10000 by default) added, not -inf: declared inputs_finite. */
async function multiHeadAttention(p) {
  const { batch: B, heads: H, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const { q, scale } = scaled(p);
  const inputs = [input("query", FLOAT, [B, Tq, H * Dk]), input("key", FLOAT, [B, Tk, H * Dk]), input("value", FLOAT, [B, Tk, H * Dv])];
  const feeds = {
    query: tensor("float32", swapHeadsAndTokens(q, B, H, Tq, Dk), [B, Tq, H * Dk]),
    key: tensor("float32", swapHeadsAndTokens(p.k, B, H, Tk, Dk), [B, Tk, H * Dk]),
    value: tensor("float32", swapHeadsAndTokens(p.v, B, H, Tk, Dv), [B, Tk, H * Dv]),
  };
  const names = ["query", "key", "value", ""];
  if (p.kv_valid) {
    inputs.push(input("key_padding_mask", INT32, [B, Tk]));
    feeds.key_padding_mask = tensor("int32", keyPaddingMask(p), [B, Tk]);
  }
  names.push(p.kv_valid ? "key_padding_mask" : "");
  if (p.bias) {
    const shape = [p.bias_per_batch ? B : 1, p.bias_per_head ? H : 1, Tq, Tk];
    inputs.push(input("attention_bias", FLOAT, shape));
    feeds.attention_bias = tensor("float32", p.bias, shape);
  }
  names.push(p.bias ? "attention_bias" : "");
  while (names.at(-1) === "") names.pop();
  const session = await sessionFor({
    node: { opType: "MultiHeadAttention", domain: "com.microsoft", inputs: names, outputs: ["output"],
      attributes: { num_heads: H, scale: float(scale), unidirectional: p.causal ? 1 : 0 } },
    inputs, outputs: [input("output", FLOAT, [B, Tq, H * Dv])], opsets: { "": 23, "com.microsoft": 1 } });
  const { output } = await session.run(feeds);
  return { o: swapHeadsAndTokens(output.data, B, Tq, H, Dv), path: "ort-mha" };
}

export const mha = declare({
  name: "onnxruntime-mha-f32",
  features: ["causal", "key_padding", "bias"],
  contract: { inputs_finite: true },
}, multiHeadAttention);

/** ONNX Attention (opset 23): Q [B][H][Tq][Dk], K and V [B][Hkv][Tk][D] (attest's layouts), is_causal,
 * softcap; attn_mask bool [B][1][Tq][Tk] for an explicit mask or key padding, or float (the bias, with
 * -inf where those mask) when the problem has a bias. */
async function onnxAttention(p) {
  const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const { q, scale } = scaled(p);
  const inputs = [input("Q", FLOAT, [B, H, Tq, Dk]), input("K", FLOAT, [B, Hkv, Tk, Dk]), input("V", FLOAT, [B, Hkv, Tk, Dv])];
  const feeds = { Q: tensor("float32", q, [B, H, Tq, Dk]), K: tensor("float32", p.k, [B, Hkv, Tk, Dk]),
    V: tensor("float32", p.v, [B, Hkv, Tk, Dv]) };
  const names = ["Q", "K", "V"];
  const masked = p.explicit_mask || p.kv_valid;
  if (p.bias) {
    const [Bb, Hb] = [p.bias_per_batch ? B : 1, p.bias_per_head ? H : 1];
    const values = Float32Array.from(p.bias);
    if (masked) { // a key both terms see: the bias plus -inf where the mask hides it
      const visible = servedMask(p);
      const full = new Float32Array(B * Hb * Tq * Tk);
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < Hb; h++) {
          for (let at = 0; at < Tq * Tk; at++) {
            const from = ((p.bias_per_batch ? b : 0) * Hb + h) * Tq * Tk + at;
            full[(b * Hb + h) * Tq * Tk + at] = visible[b * Tq * Tk + at] ? values[from] : -Infinity;
          }
        }
      }
      inputs.push(input("attn_mask", FLOAT, [B, Hb, Tq, Tk]));
      feeds.attn_mask = tensor("float32", full, [B, Hb, Tq, Tk]);
    } else {
      inputs.push(input("attn_mask", FLOAT, [Bb, Hb, Tq, Tk]));
      feeds.attn_mask = tensor("float32", values, [Bb, Hb, Tq, Tk]);
    }
    names.push("attn_mask");
  } else if (masked) {
    inputs.push(input("attn_mask", BOOL, [B, 1, Tq, Tk]));
    feeds.attn_mask = tensor("bool", servedMask(p), [B, 1, Tq, Tk]);
    names.push("attn_mask");
  }
  const attributes = { is_causal: p.causal ? 1 : 0, scale: float(scale) };
  if (p.softcap) attributes.softcap = float(p.softcap);
  const session = await sessionFor({
    node: { opType: "Attention", domain: "", inputs: names, outputs: ["Y"], attributes },
    inputs, outputs: [input("Y", FLOAT, [B, H, Tq, Dv])], opsets: { "": 23 } });
  const { Y } = await session.run(feeds);
  return { o: Y.data, path: "ort-attention" };
}

export const attention = declare({
  name: "onnxruntime-attention-f32",
  features: ["causal", "gqa", "explicit_mask", "key_padding", "softcap", "bias"],
  contract: { inputs_finite: true },
}, onnxAttention);

// The same operators declared around their conventions: self-attention only (Tq = Tk, q_offset 0,
// where a top-left causal mask is attest's).
// MultiHeadAttention without its bias: a -inf bias hiding every causally visible key moves the
// row's weight to the keys the causal mask hides with -10000 (or gives NaN when none is).
// Both operators score every key, then mask it: "masked_scored" is their honest input domain (a
// masked key's K keeps its score finite, its V finite), where "finite" let a masked score overflow.
export const mhaSelf = declare({
  name: "onnxruntime-mha-f32-self",
  features: ["causal"],
  contract: { inputs: "masked_scored", self_attention_only: true },
}, multiHeadAttention);

// ONNX Attention's masks exclude keys (an empty row outputs 0): its mask terms stay declared.
export const attentionSelf = declare({
  name: "onnxruntime-attention-f32-self",
  features: ["causal", "gqa", "explicit_mask", "key_padding", "softcap", "bias"],
  contract: { inputs: "masked_scored", self_attention_only: true },
}, onnxAttention);

// ONNX Attention with no mask term at all: what it certifies without reading a masked key.
export const attentionUnmasked = declare({
  name: "onnxruntime-attention-f32-unmasked",
  features: ["gqa", "softcap"],
  contract: { inputs_finite: true },
}, onnxAttention);

// com.microsoft GroupQueryAttention's prompt path (gqa.mjs).
export { gqaPrompt, gqaPromptUnbiased } from "./gqa.mjs";
