// ONNX Runtime's attention operators as functions of an attest problem, run on a runtime
// (sessions.mjs: onnxruntime-node or onnxruntime-web); kernels.mjs and kernels_wasm.mjs declare them.
import { FLOAT, FLOAT16, BOOL, INT32, float } from "./onnx_writer.mjs";
import { keyPaddingMask, servedMask, swapHeadsAndTokens } from "./layout.mjs";

export const input = (name, type, shape) => ({ name, type, shape });

/** An attest storage format as ONNX sees it: the element type and the tensor type name. float16
 * tensors carry the bit patterns attest sends (Uint16Array), and return them. */
export const TENSOR_TYPES = { f32: { elem: FLOAT, name: "float32" }, f16: { elem: FLOAT16, name: "float16" } };

/** "ort-mha" on the native build (the committed certificates' path names), "ort-wasm-mha" on wasm. */
export const pathName = (rt, operator) => (rt.name === "native" ? `ort-${operator}` : `ort-${rt.name}-${operator}`);

/** Q and the scale attribute: ONNX Runtime refuses a scale <= 0 (Attention) or reads 0 as "the
 * default" (MultiHeadAttention), so such a scale is folded into Q and the operator gets 1. */
function scaled(p) {
  if (p.scale > 0) return { q: p.q, scale: p.scale };
  return { q: p.q.map((x) => x * p.scale), scale: 1 };
}

/** com.microsoft MultiHeadAttention: Q, K, V as [B][T][H*D]; `unidirectional` is its causal flag,
 * key_padding_mask its key padding ([B][Tk] int32), attention_bias [B|1][H|1][Tq][Tk] its bias.
 * Masked keys get mask_filter_value (-10000 by default) added, not -inf: declared inputs_finite. */
export const multiHeadAttention = (rt) => async (p) => {
  const { batch: B, heads: H, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const { q, scale } = scaled(p);
  const inputs = [input("query", FLOAT, [B, Tq, H * Dk]), input("key", FLOAT, [B, Tk, H * Dk]), input("value", FLOAT, [B, Tk, H * Dv])];
  const feeds = {
    query: rt.tensor("float32", swapHeadsAndTokens(q, B, H, Tq, Dk), [B, Tq, H * Dk]),
    key: rt.tensor("float32", swapHeadsAndTokens(p.k, B, H, Tk, Dk), [B, Tk, H * Dk]),
    value: rt.tensor("float32", swapHeadsAndTokens(p.v, B, H, Tk, Dv), [B, Tk, H * Dv]),
  };
  const names = ["query", "key", "value", ""];
  if (p.kv_valid) {
    inputs.push(input("key_padding_mask", INT32, [B, Tk]));
    feeds.key_padding_mask = rt.tensor("int32", keyPaddingMask(p), [B, Tk]);
  }
  names.push(p.kv_valid ? "key_padding_mask" : "");
  if (p.bias) {
    const shape = [p.bias_per_batch ? B : 1, p.bias_per_head ? H : 1, Tq, Tk];
    inputs.push(input("attention_bias", FLOAT, shape));
    feeds.attention_bias = rt.tensor("float32", p.bias, shape);
  }
  names.push(p.bias ? "attention_bias" : "");
  while (names.at(-1) === "") names.pop();
  const session = await rt.sessionFor({
    node: { opType: "MultiHeadAttention", domain: "com.microsoft", inputs: names, outputs: ["output"],
      attributes: { num_heads: H, scale: float(scale), unidirectional: p.causal ? 1 : 0 } },
    inputs, outputs: [input("output", FLOAT, [B, Tq, H * Dv])], opsets: { "": 23, "com.microsoft": 1 } });
  const { output } = await session.run(feeds);
  return { o: swapHeadsAndTokens(output.data, B, Tq, H, Dv), path: pathName(rt, "mha") };
};

/** ONNX Attention (opset 23): Q [B][H][Tq][Dk], K and V [B][Hkv][Tk][D] (attest's layouts), is_causal,
 * softcap; attn_mask bool [B][1][Tq][Tk] for an explicit mask or key padding, or float (the bias, with
 * -inf where those mask) when the problem has a bias. */
export const onnxAttention = (rt, storage = "f32") => async (p) => {
  const { elem, name: type } = TENSOR_TYPES[storage];
  if (storage !== "f32" && (p.bias || p.explicit_mask || p.kv_valid || p.scale <= 0)) {
    throw new Error("the float16 wrapper serves no mask, no bias and a positive scale (as declared)");
  }
  const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = p;
  const { q, scale } = scaled(p);
  const inputs = [input("Q", elem, [B, H, Tq, Dk]), input("K", elem, [B, Hkv, Tk, Dk]), input("V", elem, [B, Hkv, Tk, Dv])];
  const feeds = { Q: rt.tensor(type, q, [B, H, Tq, Dk]), K: rt.tensor(type, p.k, [B, Hkv, Tk, Dk]),
    V: rt.tensor(type, p.v, [B, Hkv, Tk, Dv]) };
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
      feeds.attn_mask = rt.tensor("float32", full, [B, Hb, Tq, Tk]);
    } else {
      inputs.push(input("attn_mask", FLOAT, [Bb, Hb, Tq, Tk]));
      feeds.attn_mask = rt.tensor("float32", values, [Bb, Hb, Tq, Tk]);
    }
    names.push("attn_mask");
  } else if (masked) {
    inputs.push(input("attn_mask", BOOL, [B, 1, Tq, Tk]));
    feeds.attn_mask = rt.tensor("bool", servedMask(p), [B, 1, Tq, Tk]);
    names.push("attn_mask");
  }
  const attributes = { is_causal: p.causal ? 1 : 0, scale: float(scale) };
  if (p.softcap) attributes.softcap = float(p.softcap);
  const session = await rt.sessionFor({
    node: { opType: "Attention", domain: "", inputs: names, outputs: ["Y"], attributes },
    inputs, outputs: [input("Y", elem, [B, H, Tq, Dv])], opsets: { "": 23 } });
  const { Y } = await session.run(feeds);
  return { o: Y.data, path: pathName(rt, storage === "f32" ? "attention" : `attention-${storage}`) };
};

