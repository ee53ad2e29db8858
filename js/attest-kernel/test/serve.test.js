import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { TYPES, Writer, Reader, encodeFrame } from "../wire.js";
import { STATUS } from "../server.js";
import { forwardPayload, serve } from "./helpers.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVE = path.join(HERE, "..", "serve.js");
const EXAMPLE = path.join(HERE, "..", "examples", "reference.mjs");

const hello = encodeFrame(TYPES.HELLO, new Writer().u32(3).finish());
const small = { batch: 1, heads: 2, kv_heads: 1, q_len: 2, k_len: 3, head_dim: 2, value_dim: 1,
  q: [1, 0, 0, 1, 1, 1, 0, 0], k: [1, 0, 0, 1, 1, 1], v: [1, 2, 3] };

test("HELLO, FORWARD, BYE: a descriptor and a result whose O is a softmax average", async () => {
  const run = await serve(`${EXAMPLE}:attention`, [hello, encodeFrame(TYPES.FORWARD, forwardPayload({ ...small, causal: true })),
    encodeFrame(TYPES.BYE)]);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.frames.map((f) => f.type), [TYPES.DESCRIPTOR, TYPES.FORWARD_RESULT]);
  const r = new Reader(run.frames[1].payload);
  assert.deepEqual([r.i32(), r.str(), r.str(), r.str()], [STATUS.ok, "", "float64", ""]);
  const o = new Float32Array(r.array(Uint8Array).buffer);
  const lse = r.array(Float32Array);
  assert.equal(o.length, 4);
  assert.equal(lse.length, 4);
  // head 0, query 0 sits at position 1 (q_offset = Tk - Tq): keys 0 and 1 with scores 1 and 0.
  const e = Math.E;
  assert.ok(Math.abs(o[0] - (e * 1 + 1 * 2) / (e + 1)) < 1e-6);
  for (const x of o) assert.ok(x >= 1 && x <= 3);
});

test("decode: open, two steps, close", async () => {
  const open = new Writer().i32(1).i32(1).i32(1).i32(1).i32(1).f64(1).array([0, 0, 0], Int32Array).i32(0).f64(10000)
    .f64(0).array(null, Float32Array).array(null, Float32Array).finish();
  const step = (q, k, v) => new Writer().u64(1).i32(1).i32(1).bytes(Float32Array.of(q)).bytes(Float32Array.of(k))
    .bytes(Float32Array.of(v)).finish();
  const run = await serve(`${EXAMPLE}:attention`, [hello, encodeFrame(TYPES.DECODE_OPEN, open),
    encodeFrame(TYPES.DECODE_STEP, step(1, 0, 5)), encodeFrame(TYPES.DECODE_STEP, step(1, 2, 7)),
    encodeFrame(TYPES.DECODE_CLOSE, new Writer().u64(1).finish())]);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.frames.map((f) => f.type), [TYPES.DESCRIPTOR, TYPES.DECODE_OPENED, TYPES.DECODE_RESULT,
    TYPES.DECODE_RESULT, TYPES.CLOSED]);
  const result = (frame) => {
    const r = new Reader(frame.payload);
    const status = r.i32();
    r.str(); r.str();
    return { status, o: new Float32Array(r.array(Uint8Array).buffer)[0] };
  };
  assert.deepEqual(result(run.frames[2]), { status: STATUS.ok, o: 5 });
  const second = result(run.frames[3]);
  assert.ok(Math.abs(second.o - (5 + 7 * Math.exp(2)) / (1 + Math.exp(2))) < 1e-5, String(second.o));
});

test("a kernel that throws answers INTERNAL_ERROR with its message and keeps serving", async () => {
  const module = path.join(HERE, "kernels.mjs");
  const forward = encodeFrame(TYPES.FORWARD, forwardPayload(small));
  const run = await serve(`${module}:throws`, [hello, forward, forward]);
  assert.equal(run.code, 0);
  assert.equal(run.frames.length, 3);
  const r = new Reader(run.frames[2].payload);
  assert.equal(r.i32(), STATUS.internal_error);
  assert.match(r.str(), /broke on purpose at Tq=2/);
});

test("an async kernel is awaited; its rejection is a status", async () => {
  const run = await serve(`${path.join(HERE, "kernels.mjs")}:rejects`, [hello, encodeFrame(TYPES.FORWARD, forwardPayload(small))]);
  assert.equal(run.code, 0, run.stderr);
  const r = new Reader(run.frames[1].payload);
  assert.equal(r.i32(), STATUS.internal_error);
  assert.match(r.str(), /async kernel failed at Tk=3/);
});

test("BACKWARD: the gradients travel as dq, dk, dv in the problem's storage", async () => {
  const o = new Float32Array(4);
  const payload = Buffer.concat([forwardPayload(small), new Writer().i32(3).bytes(o).array(new Float32Array(4), Float32Array)
    .bytes(o).finish()]);
  const run = await serve(`${path.join(HERE, "kernels.mjs")}:constantGradients`, [hello, encodeFrame(TYPES.BACKWARD, payload)]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.frames[1].type, TYPES.BACKWARD_RESULT);
  const r = new Reader(run.frames[1].payload);
  assert.deepEqual([r.i32(), r.str(), r.str(), r.str()], [STATUS.ok, "", "constant", ""]);
  const floats = () => Array.from(new Float32Array(r.array(Uint8Array).buffer));
  assert.deepEqual(floats(), new Array(8).fill(1));
  assert.deepEqual(floats(), new Array(6).fill(2));
  assert.deepEqual(floats(), new Array(3).fill(3));
  assert.equal(r.array(Float32Array).length, 0);
  r.expectEnd();
});

test("a wrong output length is reported as a status naming the layout", async () => {
  const run = await serve(`${path.join(HERE, "kernels.mjs")}:shortO`, [hello, encodeFrame(TYPES.FORWARD, forwardPayload(small))]);
  const r = new Reader(run.frames[1].payload);
  assert.equal(r.i32(), STATUS.internal_error);
  assert.match(r.str(), /o has 1 values; this problem needs \[B\]\[H\]\[Tq\]\[Dv\] = 4/);
});

test("Unsupported is a status, not a crash", async () => {
  const run = await serve(`${path.join(HERE, "kernels.mjs")}:unsupported`, [hello, encodeFrame(TYPES.FORWARD, forwardPayload(small))]);
  const r = new Reader(run.frames[1].payload);
  assert.equal(r.i32(), STATUS.unsupported);
  assert.equal(r.str(), "no Dk=2 here");
});

test("a missing export, a bad declaration and another protocol version are ERROR frames, exit 2", async () => {
  for (const [spec, message] of [[`${EXAMPLE}:nothing`, /exports no function "nothing"/],
    [`${path.join(HERE, "kernels.mjs")}:undeclared`, /has no declaration: wrap it in declare/]]) {
    const run = await serve(spec, [hello]);
    assert.equal(run.code, 2);
    assert.equal(run.frames[0].type, TYPES.ERROR);
    assert.match(new Reader(run.frames[0].payload).str(), message);
  }
  const run = await serve(`${EXAMPLE}:attention`, [encodeFrame(TYPES.HELLO, new Writer().u32(2).finish())]);
  assert.equal(run.code, 2);
  assert.match(new Reader(run.frames[0].payload).str(), /protocol version 2 not supported/);
});

test("bad usage: one line and exit 2", async () => {
  const child = spawn(process.execPath, [SERVE], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  const code = await new Promise((resolve) => child.on("close", resolve));
  assert.equal(code, 2);
  assert.match(stderr, /^usage: node serve.js MODULE.mjs:EXPORT/);
});
