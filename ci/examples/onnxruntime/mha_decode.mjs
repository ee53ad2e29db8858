// com.microsoft MultiHeadAttention's decode path: past_key and past_value hold the tokens so far
// ([B][H][L][D]), the new tokens come as query, key and value [B][n][H*D], and present_key /
// present_value ([B][H][L+n][D]) become the next step's past. With a past, `unidirectional` lets
// new token i see the keys j <= L + i (bottom-right, as decoding does). One attest decode session
// is one such cache; its first step has no past.
import { declare, Unsupported } from "../../../js/attest-kernel/index.js";
import { FLOAT, float } from "./onnx_writer.mjs";
import { swapHeadsAndTokens } from "./layout.mjs";
import { input, pathName } from "./operators.mjs";

/** One MultiHeadAttention call: `n` new tokens on top of `past` ({k, v, length} or null); returns
 * { o [B][H][n][Dv], present {k, v, length} }. A scale <= 0 is folded into Q (0 reads as "default"). */
async function mhaCall(rt, c, q, k, v, n, past) {
  const { batch: B, heads: H, head_dim: Dk, value_dim: Dv } = c;
  const scale = c.scale > 0 ? c.scale : 1;
  const held = past ? past.length : 0;
  const inputs = [input("query", FLOAT, [B, n, H * Dk]), input("key", FLOAT, [B, n, H * Dk]), input("value", FLOAT, [B, n, H * Dv])];
  const feeds = {
    query: rt.tensor("float32", swapHeadsAndTokens(c.scale > 0 ? q : q.map((x) => x * c.scale), B, H, n, Dk), [B, n, H * Dk]),
    key: rt.tensor("float32", swapHeadsAndTokens(k, B, H, n, Dk), [B, n, H * Dk]),
    value: rt.tensor("float32", swapHeadsAndTokens(v, B, H, n, Dv), [B, n, H * Dv]),
  };
  const names = ["query", "key", "value", "", "", ""];
  if (past) {
    names.push("past_key", "past_value");
    inputs.push(input("past_key", FLOAT, [B, H, held, Dk]), input("past_value", FLOAT, [B, H, held, Dv]));
    feeds.past_key = rt.tensor("float32", past.k, [B, H, held, Dk]);
    feeds.past_value = rt.tensor("float32", past.v, [B, H, held, Dv]);
  }
  while (names.at(-1) === "") names.pop();
  const session = await rt.sessionFor({
    node: { opType: "MultiHeadAttention", domain: "com.microsoft", inputs: names,
      outputs: ["output", "present_key", "present_value"], attributes: { num_heads: H, scale: float(scale), unidirectional: 1 } },
    inputs, outputs: [input("output", FLOAT, [B, n, H * Dv]), input("present_key", FLOAT, [B, H, "present", Dk]),
      input("present_value", FLOAT, [B, H, "present", Dv])],
    opsets: { "": 23, "com.microsoft": 1 } });
  const { output, present_key: presentKey, present_value: presentValue } = await session.run(feeds);
  return { o: swapHeadsAndTokens(output.data, B, n, H, Dv), present: { k: presentKey.data, v: presentValue.data, length: held + n } };
}

/** A decode session over runtime `rt` for the configuration `c` (DECODE_OPEN). */
const mhaSession = (rt) => (c) => {
  let past = null; // the cache ONNX Runtime returned last, [B][H][length][D]
  return {
    async step(q, k, v, wantLse, n) {
      const { o, present } = await mhaCall(rt, c, q, k, v, n, past);
      past = present;
      return { o, lse: null, path: pathName(rt, "mha-decode") };
    },
  };
};

/** MultiHeadAttention's decode path on runtime `rt`: decode sessions only (its calls without a past
 * are mha and mhaSelf), causal by construction; with a past it wants Dv = Dk ("Input 'past_value'
 * dimension 3 should be same as head_size"). */
export function multiHeadAttentionDecode(rt, prefix) {
  return declare({
    name: `${prefix}-mha-decode-f32`,
    features: ["causal"],
    contract: { inputs_finite: true, decode_only: true, causal_required: true, dk_equals_dv: true },
    decode: mhaSession(rt),
  }, () => { throw new Unsupported("decode sessions only: the calls without a past are mha and mhaSelf"); });
}
