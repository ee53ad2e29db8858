// GroupQueryAttention's decode path over a ragged batch: each batch entry has its own length,
// given to ONNX Runtime as seqlens_k[b] = lengths[b] + n - 1 with past_key / past_value padded to
// the longest (what a server batching sequences of different lengths does). attest owns the cache
// as block tables (ABI 2.4): a page holds PAGE_TOKENS tokens, K then V, each [Hkv][PAGE_TOKENS][D]
// float32 (ONNX Runtime's BNSH, a page at a time). Each call gathers the past from the pages, runs
// the operator, and writes back what ONNX Runtime put in present_key / present_value for the new
// tokens.
import { declare, Unsupported } from "../../../js/attest-kernel/index.js";
import { gqaCall, gqaSession } from "./gqa_decode.mjs";
import { pathName } from "./operators.mjs";

const PAGE_TOKENS = 16;

/** Float offset of (K or V, kv head g, position t of sequence b) in the pool. */
function at(step, c, b, which, g, t) {
  const [page, slot] = step.slot(b, t);
  const D = c.head_dim;
  return page * (step.pageBytes / 4) + ((which * c.kv_heads + g) * PAGE_TOKENS + slot) * D;
}

/** [entries][Hkv][L][D] of the first lengths[e] tokens of sequences `entries` (zeros past them). */
function gather(step, c, entries, which, L) {
  const { kv_heads: Hkv, head_dim: D } = c;
  const pool = step.float32(), out = new Float32Array(entries.length * Hkv * L * D);
  entries.forEach((b, e) => {
    for (let g = 0; g < Hkv; g++) {
      for (let t = 0; t < step.lengths[b]; t++) {
        const from = at(step, c, b, which, g, t);
        out.set(pool.subarray(from, from + D), ((e * Hkv + g) * L + t) * D);
      }
    }
  });
  return out;
}

/** One ONNX Runtime call for the sequences `entries`, each appending n tokens; writes their new
 * tokens' present rows into the pages and o into `o` (per sequence). padded: give every entry the
 * longest past in seqlens_k, its zero padding taken for keys (a wrapper wrong on purpose). */
async function callFor(rt, c, step, entries, n, o, padded) {
  const { heads: H, kv_heads: Hkv, head_dim: D } = c;
  const stack = (name) => {
    const parts = entries.map((b) => step.sequence(b)[name]);
    const out = new Float32Array(parts.reduce((sum, x) => sum + x.length, 0));
    parts.reduce((offset, x) => (out.set(x, offset), offset + x.length), 0);
    return out;
  };
  const lengths = entries.map((b) => step.lengths[b]);
  const L = Math.max(...lengths);
  const past = L ? { k: gather(step, c, entries, 0, L), v: gather(step, c, entries, 1, L), length: L,
    lengths: padded ? lengths.map(() => L) : lengths } : null;
  const result = await gqaCall(rt, c, entries.length, stack("q"), stack("k"), stack("v"), n, past);
  const pool = step.float32(), P = result.present.length;
  entries.forEach((b, e) => {
    o[b] = result.o.subarray(e * H * n * D, (e + 1) * H * n * D);
    for (const [which, present] of [[0, result.present.k], [1, result.present.v]]) {
      for (let g = 0; g < Hkv; g++) {
        for (let t = lengths[e]; t < lengths[e] + n; t++) {
          const from = ((e * Hkv + g) * P + t) * D;
          pool.set(present.subarray(from, from + D), at(step, c, b, which, g, t));
        }
      }
    }
  });
}

/** One block-table call: the sequences appending one token in one batched call (ragged seqlens_k);
 * a sequence appending more alone (ONNX Runtime takes several new tokens on a past for B = 1 only). */
const decodePaged = (rt, padded) => async (c, step) => {
  const o = new Array(c.batch).fill(null);
  const single = [], several = [];
  for (let b = 0; b < c.batch; b++) (step.counts[b] === 1 ? single : step.counts[b] > 1 ? several : []).push(b);
  if (single.length) await callFor(rt, c, step, single, 1, o, padded);
  for (const b of several) await callFor(rt, c, step, [b], step.counts[b], o);
  return { o, lse: null, path: pathName(rt, several.length ? "gqa-ragged-per-entry" : "gqa-ragged") };
};

function pageBytes(c) {
  if (c.head_dim !== c.value_dim) throw new Unsupported("Dk = Dv only");
  return 2 * c.kv_heads * PAGE_TOKENS * c.head_dim * 4;
}

/** GroupQueryAttention's decode path with a length per batch entry, over attest's block tables
 * (and, for attest's other decode checks, the same operator in decode sessions). padded: the
 * wrapper that passes the longest length for every entry, wrong on purpose. */
export function groupQueryAttentionRagged(rt, prefix, padded = false) {
  return declare({
    name: `${prefix}-gqa-ragged${padded ? "-padded" : ""}-f32`,
    features: ["causal", "gqa", "window", "softcap", "sinks"],
    contract: { inputs_finite: true, decode_only: true, causal_required: true, dk_equals_dv: true,
      head_dims: Array.from({ length: 32 }, (_, i) => 8 * (i + 1)) },
    decode: gqaSession(rt),
    page_tokens: PAGE_TOKENS, page_bytes: pageBytes, decode_paged: decodePaged(rt, padded),
  }, () => { throw new Unsupported("decode only: the prompt path is gqaPrompt"); });
}
