// K and V stored quantized (q8: groups of 32 values, each an f16 scale and int8 codes; q8_head; any
// format through quantizedKernel): the float64 reference of reference.mjs on the values it reads
// back from codes and scales, in a forward call, in decode sessions and over attest's block-table
// pages (16 tokens a page; a slot holds, per kv head, the K row's bytes then the V row's, as they
// arrived); and a twin reading every group with its row's first scale (the wrong block), which
// attest must not certify. Tk up to 128, to keep its ctest cheap (attest's long paged cases reach
// 1088). Serve it with
//   node js/attest-kernel/serve.js js/attest-kernel/examples/quantized.mjs:q8
import { Problem, declare, quantized } from "../index.js";
import { forward, openSession } from "./reference.mjs";

// What the storage changes is K and V's values: the mask terms and modifiers are reference.mjs's
// (certified there), so fewer features here keep the run short.
const FEATURES = ["causal", "window", "key_padding", "gqa", "lse"];

const PAGE_TOKENS = 16;
/** Bytes of a K row and a V row in `format` (q8_head's: codes alone, its scales are the config's). */
const rowBytes = (c, format) => [c.head_dim, c.value_dim].map((width) => quantized.rowBytes(format, width, format !== "q8_head"));
const pageBytes = (c, format) => PAGE_TOKENS * c.kv_heads * (rowBytes(c, format)[0] + rowBytes(c, format)[1]);

/** decode_paged: writes each sequence's new K and V rows (their bytes) into its slots, then runs
 * `attend` on the problem of its new queries over every row its table names. */
function decodePaged(c, step, format, attend) {
  const [kBytes, vBytes] = rowBytes(c, format), Hkv = c.kv_heads;
  const scales = (name, b) => (format === "q8_head" ? c[`${name}_scales`].subarray(b * Hkv, (b + 1) * Hkv) : null);
  const at = (b, position, g) => {
    const [page, slot] = step.slot(b, position);
    return ((page * PAGE_TOKENS + slot) * Hkv + g) * (kBytes + vBytes);
  };
  const o = [], lse = [];
  for (let b = 0; b < c.batch; b++) {
    const { q, k, v, n } = step.sequence(b), length = step.lengths[b], total = length + n;
    for (let g = 0; g < Hkv; g++) {
      for (let t = 0; t < n; t++) {
        const row = g * n + t;
        step.pool.set(k.raw.subarray(row * kBytes, (row + 1) * kBytes), at(b, length + t, g));
        step.pool.set(v.raw.subarray(row * vBytes, (row + 1) * vBytes), at(b, length + t, g) + kBytes);
      }
    }
    if (!n) {
      o.push(null);
      lse.push(null);
      continue;
    }
    const [kRaw, vRaw] = [new Uint8Array(Hkv * total * kBytes), new Uint8Array(Hkv * total * vBytes)];
    for (let g = 0; g < Hkv; g++) {
      for (let j = 0; j < total; j++) {
        kRaw.set(step.pool.subarray(at(b, j, g), at(b, j, g) + kBytes), (g * total + j) * kBytes);
        vRaw.set(step.pool.subarray(at(b, j, g) + kBytes, at(b, j, g) + kBytes + vBytes), (g * total + j) * vBytes);
      }
    }
    const p = new Problem({ ...c, batch: 1, q_len: n, k_len: total, q_offset: length, causal: true, q,
      k: quantized.decode(kRaw, format, [1, Hkv, total, c.head_dim], scales("k", b)),
      v: quantized.decode(vRaw, format, [1, Hkv, total, c.value_dim], scales("v", b)), bias: null }, c.declaration);
    const one = attend(p);
    o.push(one.o);
    lse.push(one.lse);
  }
  return { o, lse: step.wantLse ? lse : null, path: "paged" };
}

/** A kernel over K and V stored in `format`, as `values(rows)` reads them from their QuantizedRows
 * (q8_head, whose scales come with a decode session, is a decode cache's: decode only). */
export function quantizedKernel(name, format, values) {
  const withValues = (p) => Object.assign(Object.create(p), {
    float32: (what) => (what === "k" || what === "v" ? values(p[what]) : p.float32(what)),
  });
  const decode = (c) => {
    const session = openSession(c);
    return { step: (q, k, v, wantLse, n) => session.step(q, values(k), values(v), wantLse, n) };
  };
  return declare({ name, features: FEATURES, precision: { k: format, v: format }, decode,
    contract: { k_len: [1, 128], decode_only: format === "q8_head" },
    page_tokens: PAGE_TOKENS, page_bytes: (c) => pageBytes(c, format),
    decode_paged: (c, step) => decodePaged(c, step, format, (p) => forward(withValues(p))),
  }, (p) => forward(withValues(p)));
}

// The package's decode helper: value i of a row is its group's scale times its code, exactly.
export const q8 = quantizedKernel("js-q8", "q8", (rows) => rows.float32());

// q8_head: codes alone in a decode session's rows and pages, one static scale per (sequence, kv head)
// from the session's configuration; decode only.
export const q8Head = quantizedKernel("js-q8-head", "q8_head", (rows) => rows.float32());

// By hand, the wrong block: every value of a row scaled by the row's first group's scale (right
// for Dk, Dv <= 32, where a row is one group).
export const q8FirstScale = quantizedKernel("js-q8-first-scale", "q8", (rows) => {
  const out = new Float32Array(rows.codes.length);
  for (let i = 0; i < out.length; i++) out[i] = rows.scales[Math.floor(i / rows.width) * rows.groups] * rows.codes[i];
  return out;
});
