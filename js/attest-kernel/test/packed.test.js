// ABI 2.8's packed layout: the declaration's packed function, and FORWARD_PACKED through serve.js
// with a payload written field by field as impl/PROTOCOL.md lists packed_problem.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { declaration, DeclarationError } from "../declaration.js";
import { CAPABILITIES } from "../interface.js";
import { STATUS } from "../server.js";
import { Reader, TYPES, Writer, encodeFrame } from "../wire.js";
import { serve } from "./helpers.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PACKED = path.join(HERE, "..", "examples", "packed.mjs");
const hello = encodeFrame(TYPES.HELLO, new Writer().u32(3).finish());

test("packed: a function setting the capability bit, float32 storage only", () => {
  const d = declaration({ name: "k", packed: () => null });
  assert.equal(d.capabilities, (1 << CAPABILITIES.packed[0]) >>> 0);
  assert.throws(() => declaration({ name: "k", features: ["packed"] }), /give packed: function/);
  assert.throws(() => declaration({ name: "k", packed: () => null, precision: { k: "bf16" } }),
    (e) => e instanceof DeclarationError && /^packed: a packed call is float32/.test(e.message));
});

/** A FORWARD_PACKED frame: H = Hkv = 1, Dk = Dv = 1, scale 1, causal with q_offset `offset`. */
function packedFrame(cuQ, cuK, q, k, v, { offset = 0, causal = true } = {}) {
  const w = new Writer();
  for (const x of [cuQ.length - 1, 1, 1, 1, 1, 4, 4]) w.i32(x); // batch, heads, kv_heads, Dk, Dv, max_seqlen_q, max_seqlen_k
  w.f64(1).i64(offset).i32(causal ? 1 : 0).i32(0).i32(0).i32(0).i32(0).f64(10000).f64(0); // window, chunk, lookahead, rope
  w.array(null, Float32Array).array(null, Float32Array).array(cuQ, Int32Array).array(cuK, Int32Array);
  w.array(q, Float32Array).array(k, Float32Array).array(v, Float32Array).i32(1);
  return encodeFrame(TYPES.FORWARD_PACKED, w.finish());
}

function packedResult(frame) {
  const r = new Reader(frame.payload);
  const out = { status: r.i32(), error: r.str(), path: r.str(), fault: r.str(), o: Array.from(r.array(Float32Array)),
    lse: Array.from(r.array(Float32Array)) };
  r.expectEnd();
  return out;
}

// Sequence 0: one query (position 1) over two keys, v = [1, 3], scores 0; sequence 1: two queries
// (positions 1 and 2) over its one key, v = 5.
const frame = packedFrame([0, 1, 3], [0, 2, 3], [0, 0, 0], [0, 0, 0], [1, 3, 5], { offset: 1 });

test("FORWARD_PACKED: each sequence attends its own keys, o [total_q][H][Dv], lse [H][total_q]", async () => {
  const run = await serve(`${PACKED}:packed`, [hello, frame]);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.frames.map((f) => f.type), [TYPES.DESCRIPTOR, TYPES.FORWARD_PACKED_RESULT]);
  const result = packedResult(run.frames[1]);
  assert.deepEqual([result.status, result.error, result.path], [STATUS.ok, "", "packed"]);
  assert.deepEqual(result.o, [2, 5, 5]); // query 0 at position 1 sees v 1 and 3; both of sequence 1's see only v 5
  assert.ok(Math.abs(result.lse[0] - Math.log(2)) < 1e-6 && result.lse[1] === 0 && result.lse[2] === 0, String(result.lse));
});

test("packed_int64: declared with packed, its function gets BigInt64Array offsets (ABI 2.10)", async () => {
  const d = declaration({ name: "k", packed: () => null, packed_int64: true });
  assert.equal(d.capabilities, ((1 << CAPABILITIES.packed[0]) | (1 << CAPABILITIES.packed_int64[0])) >>> 0);
  assert.throws(() => declaration({ name: "k", packed_int64: true }), /packed_int64: int64 offsets belong/);
  assert.throws(() => declaration({ name: "k", features: ["packed_int64"] }), /give packed_int64: true/);
  const result = packedResult((await serve(`${PACKED}:packedInt64`, [hello, frame])).frames[1]);
  assert.deepEqual([result.status, result.error, result.path, result.o], [STATUS.ok, "", "packed-int64", [2, 5, 5]]);
});

test("a packed kernel reading every sequence's keys from the start of k is wrong", async () => {
  const result = packedResult((await serve(`${PACKED}:packedSharedKeys`, [hello, frame])).frames[1]);
  assert.deepEqual(result.o, [2, 1, 1]);
});

test("FORWARD_PACKED: cu_seqlens that do not cover q is an ERROR", async () => {
  const run = await serve(`${PACKED}:packed`, [hello, packedFrame([0, 1, 4], [0, 2, 3], [0, 0, 0], [0, 0, 0], [1, 3, 5])]);
  assert.equal(run.code, 2);
  assert.match(new Reader(run.frames[1].payload).str(), /packed q, k or v does not match cu_seqlens/);
});
