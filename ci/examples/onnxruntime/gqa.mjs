// com.microsoft GroupQueryAttention's prompt path (no past) as attest kernels. The operator is causal
// by construction and takes Q [B][Tq][H*Dk], K and V [B][Tk][Hkv*D], the sequence lengths as
// seqlens_k (length - 1 per batch entry) and total_sequence_length; present_key and present_value
// are required outputs (the KV cache it would keep). seqlens_k is also its key padding: a batch of
// right-padded sequences of different lengths, each query seeing the keys before its entry's length.
import { declare } from "../../../js/attest-kernel/index.js";
import { FLOAT, INT32, float } from "./onnx_writer.mjs";
import { swapHeadsAndTokens } from "./layout.mjs";
import { input, pathName, TENSOR_TYPES } from "./operators.mjs";

/** seqlens_k: each entry's length - 1 (attest's kv_valid, T without key padding). ONNX Runtime refuses
 * a sequence of no token ("seqlens_k[b] = -1 is out of range"): such an entry runs as one token and
 * the wrapper gives its rows, which see no key, the declared empty-row output 0. */
const seqlensK = (p) => Int32Array.from({ length: p.batch }, (_, b) => Math.max((p.kv_valid?.[b] ?? p.q_len) - 1, 0));

const groupQueryAttention = (rt, storage = "f32") => async (p) => {
  const { elem, name: type } = TENSOR_TYPES[storage];
  if (storage !== "f32" && (p.bias || p.sinks)) throw new Error("the float16 wrapper serves no bias and no sinks (as declared)");
  const { batch: B, heads: H, kv_heads: Hkv, q_len: T, head_dim: D, value_dim: Dv } = p;
  const inputs = [input("query", elem, [B, T, H * D]), input("key", elem, [B, T, Hkv * D]), input("value", elem, [B, T, Hkv * Dv]),
    input("seqlens_k", INT32, [B]), input("total_sequence_length", INT32, [])];
  const feeds = {
    query: rt.tensor(type, swapHeadsAndTokens(p.q, B, H, T, D), [B, T, H * D]),
    key: rt.tensor(type, swapHeadsAndTokens(p.k, B, Hkv, T, D), [B, T, Hkv * D]),
    value: rt.tensor(type, swapHeadsAndTokens(p.v, B, Hkv, T, Dv), [B, T, Hkv * Dv]),
    seqlens_k: rt.tensor("int32", seqlensK(p), [B]),
    total_sequence_length: rt.tensor("int32", Int32Array.of(T), []),
  };
  const names = ["query", "key", "value", "", "", "seqlens_k", "total_sequence_length"];
  const optional = [["cos_cache", null], ["sin_cache", null], ["position_ids", null], ["attention_bias", p.bias], ["head_sink", p.sinks]];
  const last = optional.findLastIndex(([, value]) => value);
  for (const [index, [name, value]] of optional.entries()) {
    if (index > last) break;
    names.push(value ? name : "");
    if (!value) continue;
    const shape = name === "head_sink" ? [H] : [p.bias_per_batch ? B : 1, p.bias_per_head ? H : 1, T, T];
    inputs.push(input(name, FLOAT, shape));
    feeds[name] = rt.tensor("float32", Float32Array.from(value), shape);
  }
  const attributes = { num_heads: H, kv_num_heads: Hkv, scale: float(p.scale) };
  if (p.softcap) attributes.softcap = float(p.softcap);
  if (p.window) attributes.local_window_size = p.window;
  const session = await rt.sessionFor({
    node: { opType: "GroupQueryAttention", domain: "com.microsoft", inputs: names, outputs: ["output", "present_key", "present_value"],
      attributes },
    inputs, outputs: [input("output", elem, [B, T, H * Dv]), input("present_key", elem, [B, Hkv, T, D]),
      input("present_value", elem, [B, Hkv, T, Dv])],
    opsets: { "": 23, "com.microsoft": 1 } });
  const { output } = await session.run(feeds);
  const o = swapHeadsAndTokens(output.data, B, T, H, Dv);
  for (let b = 0; b < B; b++) if (p.kv_valid?.[b] === 0) o.fill(0, b * H * T * Dv, (b + 1) * H * T * Dv);
  return { o, path: pathName(rt, storage === "f32" ? "gqa-prompt" : `gqa-prompt-${storage}`) };
};

const CONTRACT = { inputs_finite: true, self_attention_only: true, causal_required: true, dk_equals_dv: true,
  head_dims: Array.from({ length: 32 }, (_, i) => 8 * (i + 1)) }; // "head_size must be a multiple of 8"

/** GroupQueryAttention's prompt path on runtime `rt`, declared with and without its bias. */
export function groupQueryAttentionKernels(rt, prefix) {
  // local_window_size = attest's window (it keeps keys with i - j < local_window_size); head_sink is
  // attest's sinks. A row whose every key a -inf bias hides outputs 0 for two or more tokens.
  const gqaPrompt = declare({
    name: `${prefix}-gqa-prompt-f32`,
    features: ["causal", "gqa", "window", "softcap", "sinks", "bias"],
    contract: CONTRACT,
  }, groupQueryAttention(rt));

  // Without the bias no row is ever empty (causal self-attention, window >= 1).
  const gqaPromptUnbiased = declare({
    name: `${prefix}-gqa-prompt-f32-unbiased`,
    features: ["causal", "gqa", "window", "softcap", "sinks"],
    contract: CONTRACT,
  }, groupQueryAttention(rt));

  // seqlens_k per batch entry (different lengths in one batch, right-padded): a query at or past its
  // entry's length sees the keys before it, as attest's key_padding (and window) say.
  const gqaPromptPadded = declare({
    name: `${prefix}-gqa-prompt-f32-padded`,
    features: ["causal", "gqa", "window", "softcap", "sinks", "key_padding"],
    contract: CONTRACT,
  }, groupQueryAttention(rt));

  // The same without softcap and sinks: with either, ONNX Runtime gives a query past its entry's
  // length the keys of the entry's last query instead (its window then differs from the query's own).
  const gqaPromptPaddedPlain = declare({
    name: `${prefix}-gqa-prompt-f32-padded-plain`,
    features: ["causal", "gqa", "window", "key_padding"],
    contract: CONTRACT,
  }, groupQueryAttention(rt));

  // float16 Q, K, V and O (bit patterns both ways), no bias and no sinks (ONNX wants them float16
  // too, and attest's f32 values would be rounded on the way); the arithmetic declared f32.
  const gqaPromptF16 = declare({
    name: `${prefix}-gqa-prompt-f16`,
    features: ["causal", "gqa", "window", "softcap"],
    precision: { q: "f16", k: "f16", v: "f16", o: "f16" },
    contract: CONTRACT,
  }, groupQueryAttention(rt, "f16"));
  return { gqaPrompt, gqaPromptUnbiased, gqaPromptPadded, gqaPromptPaddedPlain, gqaPromptF16 };
}
