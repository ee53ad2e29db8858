// ABI 2.4's serving caches: the declaration's cache fields, the descriptor's 2.4 section, and
// PAGE_BYTES, DECODE_PAGED (a ragged batch over block tables) and DECODE_RETAINED through serve.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { declaration, DeclarationError } from "../declaration.js";
import { decodePagedStep, encodeDescriptor } from "../messages.js";
import { CACHE_POLICIES, LAYOUTS } from "../interface.js";
import { FIELDS, PagedStep } from "../paged.js";
import { STATUS } from "../server.js";
import { Reader, TYPES, Writer, encodeFrame } from "../wire.js";
import { serve } from "./helpers.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVING = path.join(HERE, "..", "examples", "serving.mjs");
const KERNELS = path.join(HERE, "kernels.mjs");
const hello = encodeFrame(TYPES.HELLO, new Writer().u32(3).finish());
const decoder = { decode: () => ({ step() {} }) };

test("cache fields: each bad one is named", () => {
  const cases = [
    [{ cache_policy: "lru" }, /cache_policy: "lru" is not one of full, window/],
    [{ cache_policy: "window" }, /cache_recent: cache_policy "window" needs cache_recent >= 1/],
    [{ cache_policy: "sinks_recent", cache_recent: 4 }, /cache_sinks: 0: at least 1/],
    [{ cache_recent: 4 }, /cache_recent: 4 with cache_policy "full"/],
    [{ page_tokens: 16, page_bytes: () => 64 }, /page_tokens: block tables need page_bytes: and decode_paged:/],
    [{ page_bytes: () => 64, decode_paged: () => null }, /page_bytes and decode_paged need page_tokens >= 1/],
    [{ page_tokens: 16, page_bytes: 64, decode_paged: () => null }, /page_bytes: is not a function/],
  ];
  for (const [fields, message] of cases) {
    assert.throws(() => declaration({ name: "k", ...decoder, ...fields }), (e) => e instanceof DeclarationError && message.test(e.message));
  }
  assert.throws(() => declaration({ name: "k", cache_policy: "window", cache_recent: 4 }), /belong to a decoder/);
});

test("the descriptor's 2.4 section carries the policy, sinks, recent, retained and page tokens", () => {
  const tail = (fields) => {
    const bytes = encodeDescriptor(declaration({ name: "k", ...decoder, ...fields }), 2);
    const r = new Reader(bytes.subarray(bytes.length - 20));
    return Array.from({ length: 5 }, () => r.i32());
  };
  assert.deepEqual(tail({ cache_policy: "sinks_recent", cache_sinks: 4, cache_recent: 60 }),
    [CACHE_POLICIES.sinks_recent[0], 4, 60, 0, 0]);
  assert.deepEqual(tail({ cache_policy: "explicit" }), [CACHE_POLICIES.explicit[0], 0, 0, 1, 0]);
  assert.deepEqual(tail({ page_tokens: 16, page_bytes: () => 1, decode_paged: () => null }), [0, 0, 0, 0, 16]);
  // A full cache without pages writes no 2.4 section: the descriptor ends with 2.3's field.
  const plain = encodeDescriptor(declaration({ name: "k", ...decoder }), 2);
  const longer = encodeDescriptor(declaration({ name: "k", ...decoder, cache_policy: "explicit" }), 2);
  assert.equal(longer.length - plain.length, 20);
});

/** A decode configuration with its (empty) scale arrays, as PAGE_BYTES and DECODE_PAGED carry it. */
const config = ({ batch, heads, kv_heads: kvHeads, head_dim: Dk, value_dim: Dv }) => new Writer().i32(batch).i32(heads)
  .i32(kvHeads).i32(Dk).i32(Dv).f64(1).array([0, 0, 0], Int32Array).i32(0).f64(10000).f64(0)
  .array(null, Float32Array).array(null, Float32Array).array(null, Float32Array).array(null, Float32Array).finish();

/** A DECODE_PAGED payload: sequence b holds lengths[b] tokens and appends counts[b] (q, k, v per sequence). */
function paged(c, pool, tableWidth, tables, lengths, counts, q, k, v, pageBytes) {
  const step = new Writer().i64(pageBytes).bytes(pool).i32(tableWidth).array(tables, Int32Array)
    .array(lengths.map(BigInt), BigInt64Array).array(counts, Int32Array).i32(1)
    .bytes(Float32Array.from(q)).bytes(Float32Array.from(k)).bytes(Float32Array.from(v)).finish();
  return encodeFrame(TYPES.DECODE_PAGED, Buffer.concat([config(c), step]));
}

function pagedResult(frame) {
  const r = new Reader(frame.payload);
  const out = { status: r.i32(), error: r.str(), path: r.str(), fault: r.str() };
  out.pool = new Float32Array(r.array(Uint8Array).buffer);
  out.o = Array.from(new Float32Array(r.array(Uint8Array).buffer));
  out.lse = Array.from(r.array(Float32Array));
  r.expectEnd();
  return out;
}

// B = 2, H = Hkv = 1, Dk = Dv = 1, 16 tokens a page, one page each: slot floats [k, v] per token.
const c1 = { batch: 2, heads: 1, kv_heads: 1, head_dim: 1, value_dim: 1 };
const PAGE = 16 * 2 * 4;

test("PAGE_BYTES answers the kernel's page size; DECODE_PAGED serves a ragged batch", async () => {
  // Sequence 0 (page 1) holds 2 tokens, k = [0, 0], v = [1, 3], and appends one (k 0, v 5): o = 3.
  // Sequence 1 (page 0) holds 1 token (k 0, v 7) and appends none.
  const pool = new Float32Array(2 * PAGE / 4);
  pool.set([0, 1, 0, 3], PAGE / 4);
  pool.set([0, 7], 0);
  const run = await serve(`${SERVING}:serving`, [hello, encodeFrame(TYPES.PAGE_BYTES, config(c1)),
    paged(c1, pool, 1, [1, 0], [2, 1], [1, 0], [1], [0], [5], PAGE)]);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.frames.map((f) => f.type), [TYPES.DESCRIPTOR, TYPES.PAGE_BYTES_RESULT, TYPES.DECODE_PAGED_RESULT]);
  const r = new Reader(run.frames[1].payload);
  assert.deepEqual([r.i32(), r.str(), r.i64()], [STATUS.ok, "", PAGE]);
  const result = pagedResult(run.frames[2]);
  assert.deepEqual([result.status, result.error, result.path], [STATUS.ok, "", "paged"]);
  assert.deepEqual(result.o, [3]); // the mean of 1, 3 and 5: only sequence 0 appended
  assert.ok(Math.abs(result.lse[0] - Math.log(3)) < 1e-6);
  assert.deepEqual(Array.from(result.pool.subarray(PAGE / 4, PAGE / 4 + 6)), [0, 1, 0, 3, 0, 5]); // its slot 2 written
  assert.deepEqual(Array.from(result.pool.subarray(0, 2)), [0, 7]);
});

test("a decoder reading every sequence at the first one's length gets a ragged batch wrong", async () => {
  // Both sequences append a token: sequence 1 holds 1 token (v 7), sequence 0 holds 2 (v 1, 3).
  const pool = new Float32Array(2 * PAGE / 4);
  pool.set([0, 1, 0, 3], 0);
  pool.set([0, 7], PAGE / 4);
  const frame = paged(c1, pool, 1, [0, 1], [2, 1], [1, 1], [1, 1], [0, 0], [5, 9], PAGE);
  const right = pagedResult((await serve(`${SERVING}:serving`, [hello, frame])).frames[1]);
  assert.deepEqual(right.o, [3, 8]);
  const wrong = pagedResult((await serve(`${SERVING}:servingSharedLength`, [hello, frame])).frames[1]);
  assert.notDeepEqual(wrong.o, right.o);
});

test("DECODE_PAGED: a wrong page size is an ERROR; outputs for the wrong batch a status", async () => {
  const pool = new Float32Array(2 * PAGE / 4);
  const bad = await serve(`${SERVING}:serving`, [hello, paged(c1, pool, 1, [0, 1], [0, 0], [1, 1], [1, 1], [0, 0], [5, 9], PAGE / 2)]);
  assert.equal(bad.code, 2);
  assert.match(new Reader(bad.frames[1].payload).str(), /pages of 64 bytes; the kernel's are 128/);
  const outside = await serve(`${SERVING}:serving`, [hello, paged(c1, pool, 1, [0, 2], [0, 0], [1, 1], [1, 1], [0, 0], [5, 9], PAGE)]);
  assert.match(new Reader(outside.frames[1].payload).str(), /sequence 1's table names a page outside the pool/);
  const one = await serve(`${KERNELS}:pagedOneOutput`, [hello, paged(c1, pool, 1, [0, 1], [0, 0], [1, 1], [1, 1], [0, 0], [5, 9], PAGE)]);
  const result = pagedResult(one.frames[1]);
  assert.equal(result.status, STATUS.internal_error);
  assert.match(result.error, /o or lse for other than the batch's 2 sequences/);
});

test("DECODE_RETAINED: the session's retained(b, t), checked against what the query could attend", async () => {
  const open = new Writer().i32(1).i32(1).i32(1).i32(1).i32(1).f64(1).array([0, 0, 0], Int32Array).i32(0).f64(10000)
    .f64(0).array(null, Float32Array).array(null, Float32Array).finish();
  const step = new Writer().u64(1).i32(2).i32(0).bytes(new Float32Array(2)).bytes(new Float32Array(2))
    .bytes(new Float32Array(2)).finish();
  const retained = (t) => encodeFrame(TYPES.DECODE_RETAINED, new Writer().u64(1).i32(0).i32(t).finish());
  const run = await serve(`${KERNELS}:explicitCache`, [hello, encodeFrame(TYPES.DECODE_OPEN, open),
    encodeFrame(TYPES.DECODE_STEP, step), retained(0), retained(1)]);
  assert.equal(run.code, 0, run.stderr);
  const read = (frame) => {
    const r = new Reader(frame.payload);
    return [r.i32(), r.str(), Array.from(r.array(BigInt64Array), Number)];
  };
  // The kernel always names [0, 1]: for t = 0 two positions where one (position 0) is possible.
  const [status, error] = read(run.frames[3]);
  assert.equal(status, STATUS.internal_error);
  assert.match(error, /retained\(0, 0\) returned 2 positions \(capacity 1\)/);
  assert.deepEqual(read(run.frames[4]), [STATUS.ok, "", [0, 1]]);
});

// The table's paged_step layout drives the reader: a field the table adds (or a type without a
// reader) fails here until paged.js and messages.js know it.
const WRITE = { i64: (w, x) => w.i64(x), i32: (w, x) => w.i32(x), u8_array: (w, x) => w.bytes(x),
  i32_array: (w, x) => w.array(x, Int32Array), i64_array: (w, x) => w.array(x, BigInt64Array) };
const STEP = { page_bytes: 4, pool: new Uint8Array(8), table_width: 1, tables: Int32Array.of(1, 0),
  lengths: BigInt64Array.of(0n, 0n), counts: Int32Array.of(1, 0), want_lse: 1, q: new Float32Array(1),
  k: new Float32Array(1), v: new Float32Array(1), extra: 7 };
const stepPayload = (layout) => {
  const w = new Writer();
  for (const [type, name] of layout) WRITE[type](w, STEP[name]);
  return w.finish();
};

test("the paged step is read by the table's paged_step layout, each of its fields known to paged.js", () => {
  assert.deepEqual(Object.keys(FIELDS), LAYOUTS.paged_step.map((row) => row[1]));
  const fields = decodePagedStep(new Reader(stepPayload(LAYOUTS.paged_step)));
  const step = new PagedStep(fields, { ...c1, k_scales: null, v_scales: null }, 4, { q: "f32", k: "f32", v: "f32" });
  assert.deepEqual([step.pageBytes, Array.from(step.tables), step.lengths, Array.from(step.counts), step.wantLse],
    [4, [1, 0], [0, 0], [1, 0], true]);
  assert.deepEqual(step.slot(0, 0), [1, 0]);
  const layout = LAYOUTS.paged_step, length = layout.length;
  try {
    layout.push(["i32", "extra", [2, 10]]);
    const more = decodePagedStep(new Reader(stepPayload(layout)));
    assert.equal(more.extra, 7);
    assert.throws(() => new PagedStep(more, { ...c1, k_scales: null, v_scales: null }, 4, { q: "f32", k: "f32", v: "f32" }),
      /paged step: the table's field extra is not read by paged.js/);
    layout[layout.length - 1] = ["f16_array", "extra", [2, 10]];
    assert.throws(() => decodePagedStep(new Reader(stepPayload(layout.slice(0, -1)))), /paged step: field extra of type f16_array has no reader here/);
  } finally {
    layout.splice(length);
  }
});
