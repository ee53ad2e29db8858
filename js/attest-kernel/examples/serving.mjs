// A JavaScript serving decoder (ABI 2.4): K and V kept in attest's block-table pages (16 tokens a
// page; a slot holds, per kv head, the K row then the V row, float32), ragged batches appending a
// different count to each sequence; its decode sessions keep the same rows in arrays. Float64
// arithmetic; Tk up to 128, to keep its ctest cheap (attest's long paged cases reach 1088).
// `servingSharedLength` reads every sequence at the first one's length: a decoder that gets a
// ragged batch wrong, which attest must not certify. Serve with
//   node js/attest-kernel/serve.js js/attest-kernel/examples/serving.mjs:serving
import { declare, Unsupported } from "../index.js";

const PAGE_TOKENS = 16;

function check(c) {
  if (c.rope || c.softcap || c.alibi_slopes || c.sinks || c.window || c.chunk || c.lookahead) {
    throw new Unsupported("no RoPE, mask term or score modifier (not declared)");
  }
}

/** Causal attention of one sequence: q [H][n][Dk] at positions first + t over keys(g, j) and
 * values(g, j) (kv head g, position j: rows of Dk and Dv numbers); o [H][n][Dv], lse [H][n]. */
function attend(c, q, n, first, keys, values) {
  const { heads: H, kv_heads: Hkv, head_dim: Dk, value_dim: Dv } = c;
  const o = new Float64Array(H * n * Dv), lse = new Float64Array(H * n);
  for (let h = 0; h < H; h++) {
    const g = Math.floor(h / (H / Hkv));
    for (let t = 0; t < n; t++) {
      const row = h * n + t, last = first + t;
      const s = new Float64Array(last + 1);
      let m = -Infinity;
      for (let j = 0; j <= last; j++) {
        const k = keys(g, j);
        let dot = 0;
        for (let d = 0; d < Dk; d++) dot += q[row * Dk + d] * k[d];
        s[j] = c.scale * dot;
        m = Math.max(m, s[j]);
      }
      let total = 0;
      for (let j = 0; j <= last; j++) {
        const w = Math.exp(s[j] - m), v = values(g, j);
        total += w;
        for (let d = 0; d < Dv; d++) o[row * Dv + d] += w * v[d];
      }
      for (let d = 0; d < Dv; d++) o[row * Dv + d] /= total;
      lse[row] = Math.log(total) + m;
    }
  }
  return { o, lse };
}

/** A decode session: each sequence's K and V rows as they arrive, [b][g] lists of rows. */
function openSession(c) {
  check(c);
  const { batch: B, heads: H, kv_heads: Hkv, head_dim: Dk, value_dim: Dv } = c;
  const keys = Array.from({ length: B }, () => Array.from({ length: Hkv }, () => []));
  const values = Array.from({ length: B }, () => Array.from({ length: Hkv }, () => []));
  return {
    step(q, k, v, wantLse, n) {
      const o = new Float64Array(B * H * n * Dv), lse = new Float64Array(B * H * n);
      for (let b = 0; b < B; b++) {
        for (let g = 0; g < Hkv; g++) {
          for (let t = 0; t < n; t++) {
            const at = (b * Hkv + g) * n + t;
            keys[b][g].push(k.slice(at * Dk, (at + 1) * Dk));
            values[b][g].push(v.slice(at * Dv, (at + 1) * Dv));
          }
        }
        const held = keys[b][0].length;
        const one = attend(c, q.subarray(b * H * n * Dk, (b + 1) * H * n * Dk), n, held - n, (g, j) => keys[b][g][j],
          (g, j) => values[b][g][j]);
        o.set(one.o, b * H * n * Dv);
        lse.set(one.lse, b * H * n);
      }
      return { o, lse: wantLse ? lse : null, path: "session" };
    },
  };
}

/** Floats of one slot: per kv head, the K row then the V row. */
const slotFloats = (c) => c.kv_heads * (c.head_dim + c.value_dim);

function pageBytes(c) {
  check(c);
  return PAGE_TOKENS * slotFloats(c) * 4;
}

/** Writes each sequence's new rows into its slots, then attends over the slots its table names.
 * sharedLength: read every sequence as if it held the first one's tokens (wrong on purpose). */
function decodePaged(c, step, { sharedLength = false } = {}) {
  const { kv_heads: Hkv, head_dim: Dk, value_dim: Dv } = c;
  const pool = step.float32(), width = slotFloats(c);
  const at = (b, position, g) => {
    const [page, slot] = step.slot(b, position);
    return (page * PAGE_TOKENS + slot) * width + g * (Dk + Dv);
  };
  const o = [], lse = [];
  for (let b = 0; b < c.batch; b++) {
    const { q, k, v, n } = step.sequence(b);
    const length = sharedLength ? step.lengths[0] : step.lengths[b];
    for (let g = 0; g < Hkv; g++) {
      for (let t = 0; t < n; t++) {
        const to = at(b, length + t, g);
        pool.set(k.subarray((g * n + t) * Dk, (g * n + t + 1) * Dk), to);
        pool.set(v.subarray((g * n + t) * Dv, (g * n + t + 1) * Dv), to + Dk);
      }
    }
    const one = n ? attend(c, q, n, length, (g, j) => pool.subarray(at(b, j, g), at(b, j, g) + Dk),
      (g, j) => pool.subarray(at(b, j, g) + Dk, at(b, j, g) + Dk + Dv)) : { o: null, lse: null };
    o.push(one.o);
    lse.push(one.lse);
  }
  return { o, lse: step.wantLse ? lse : null, path: "paged" };
}

const serve = (name, options) => declare({
  name, features: ["causal", "lse", "gqa"], contract: { decode_only: true, k_len: [1, 128] }, decode: openSession,
  page_tokens: PAGE_TOKENS, page_bytes: pageBytes, decode_paged: (c, step) => decodePaged(c, step, options),
}, () => { throw new Unsupported("decode only"); });

export const serving = serve("js-serving");
export const servingSharedLength = serve("js-serving-shared-length", { sharedLength: true });
