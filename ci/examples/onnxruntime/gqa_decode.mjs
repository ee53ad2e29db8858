// com.microsoft GroupQueryAttention's decode path: past_key and past_value hold the tokens so far
// ([B][Hkv][L][D]), the new tokens come as query [B][n][H*D] and key/value [B][n][Hkv*D], seqlens_k
// is L + n - 1 and present_key/present_value ([B][Hkv][L+n][D]) become the next step's past. One
// attest decode session is one such cache; its first step has no past (the prompt path).
import { declare, Unsupported } from "../../../js/attest-kernel/index.js";
import { FLOAT, INT32, float } from "./onnx_writer.mjs";
import { swapHeadsAndTokens } from "./layout.mjs";
import { input, pathName } from "./operators.mjs";

/** One GroupQueryAttention call: `n` new tokens of `B` batch entries on top of `past` ({k, v, length}
 * or null; with `lengths`, entry b's past is its first lengths[b] of `length` tokens, a ragged batch:
 * seqlens_k[b] = lengths[b] + n - 1); returns { o [B][H][n][D], present {k, v, length} }. */
export async function gqaCall(rt, c, B, q, k, v, n, past) {
  const { heads: H, kv_heads: Hkv, head_dim: D } = c;
  const held = past ? past.length : 0;
  const total = held + n;
  const inputs = [input("query", FLOAT, [B, n, H * D]), input("key", FLOAT, [B, n, Hkv * D]), input("value", FLOAT, [B, n, Hkv * D])];
  const feeds = {
    query: rt.tensor("float32", swapHeadsAndTokens(q, B, H, n, D), [B, n, H * D]),
    key: rt.tensor("float32", swapHeadsAndTokens(k, B, Hkv, n, D), [B, n, Hkv * D]),
    value: rt.tensor("float32", swapHeadsAndTokens(v, B, Hkv, n, D), [B, n, Hkv * D]),
    seqlens_k: rt.tensor("int32", past?.lengths ? Int32Array.from(past.lengths, (l) => l + n - 1)
      : new Int32Array(B).fill(total - 1), [B]),
    total_sequence_length: rt.tensor("int32", Int32Array.of(total), []),
  };
  const names = ["query", "key", "value", past ? "past_key" : "", past ? "past_value" : "", "seqlens_k", "total_sequence_length"];
  if (past) {
    inputs.push(input("past_key", FLOAT, [B, Hkv, held, D]), input("past_value", FLOAT, [B, Hkv, held, D]));
    feeds.past_key = rt.tensor("float32", past.k, [B, Hkv, held, D]);
    feeds.past_value = rt.tensor("float32", past.v, [B, Hkv, held, D]);
  }
  inputs.push(input("seqlens_k", INT32, [B]), input("total_sequence_length", INT32, []));
  if (c.sinks) {
    names.push("", "", "", "", "head_sink");
    inputs.push(input("head_sink", FLOAT, [H]));
    feeds.head_sink = rt.tensor("float32", Float32Array.from(c.sinks), [H]);
  }
  const attributes = { num_heads: H, kv_num_heads: Hkv, scale: float(c.scale) };
  if (c.softcap) attributes.softcap = float(c.softcap);
  if (c.window) attributes.local_window_size = c.window;
  const session = await rt.sessionFor({
    node: { opType: "GroupQueryAttention", domain: "com.microsoft", inputs: names,
      outputs: ["output", "present_key", "present_value"], attributes },
    // The cache's length symbolic: the wasm build's shape inference refuses a declared one it sizes otherwise.
    inputs, outputs: [input("output", FLOAT, [B, n, H * D]), input("present_key", FLOAT, [B, Hkv, "present", D]),
      input("present_value", FLOAT, [B, Hkv, "present", D])],
    opsets: { "": 23, "com.microsoft": 1 } });
  const { output, present_key: presentKey, present_value: presentValue } = await session.run(feeds);
  return { o: swapHeadsAndTokens(output.data, B, n, H, D), present: { k: presentKey.data, v: presentValue.data, length: total } };
}

/** Batch entry b of x [B][...] where each entry holds `size` values. */
const entry = (x, b, size) => x.subarray(b * size, (b + 1) * size);

/** A decode session over runtime `rt` for the configuration `c` (DECODE_OPEN). ONNX Runtime refuses
 * several new tokens on top of a past for more than one batch entry ("batch_size must be 1 when
 * sequence_length > 1 and past context is given"): such a step runs one call per entry. */
export const gqaSession = (rt) => (c) => {
  const { batch: B, heads: H, kv_heads: Hkv, head_dim: D } = c;
  let past = null; // the cache ONNX Runtime returned last, [B][Hkv][length][D]
  return {
    async step(q, k, v, wantLse, n) {
      if (!past || n === 1 || B === 1) {
        const { o, present } = await gqaCall(rt, c, B, q, k, v, n, past);
        past = present;
        return { o, lse: null, path: pathName(rt, "gqa-decode") };
      }
      const o = new Float32Array(B * H * n * D);
      const length = past.length + n;
      const present = { k: new Float32Array(B * Hkv * length * D), v: new Float32Array(B * Hkv * length * D), length };
      for (let b = 0; b < B; b++) {
        const one = await gqaCall(rt, c, 1, entry(q, b, H * n * D), entry(k, b, Hkv * n * D), entry(v, b, Hkv * n * D), n,
          { k: entry(past.k, b, Hkv * past.length * D), v: entry(past.v, b, Hkv * past.length * D), length: past.length });
        o.set(one.o, b * H * n * D);
        present.k.set(one.present.k, b * Hkv * length * D);
        present.v.set(one.present.v, b * Hkv * length * D);
      }
      past = present;
      return { o, lse: null, path: pathName(rt, "gqa-decode-per-entry") };
    },
  };
};

/** GroupQueryAttention's decode path on runtime `rt`: decode sessions only (its prompt path is
 * gqaPrompt), causal by construction, Dk = Dv a multiple of 8. */
export function groupQueryAttentionDecode(rt, prefix) {
  return declare({
    name: `${prefix}-gqa-decode-f32`,
    features: ["causal", "gqa", "window", "softcap", "sinks"],
    contract: { inputs_finite: true, decode_only: true, causal_required: true, dk_equals_dv: true,
      head_dims: Array.from({ length: 32 }, (_, i) => 8 * (i + 1)) },
    decode: gqaSession(rt),
  }, () => { throw new Unsupported("decode sessions only: the prompt path is gqaPrompt"); });
}
