import { test } from "node:test";
import assert from "node:assert/strict";
import { Reader, Writer, ProtocolError, TYPES, encodeFrame, splitFrames, parseHeader, frameHeader } from "../wire.js";
import { decodeProblem } from "../messages.js";
import { Problem } from "../problem.js";
import { declaration } from "../declaration.js";
import { attention } from "../examples/reference.mjs";
import { forwardPayload } from "./helpers.js";

// impl/PROTOCOL.md's worked example (softcap and sinks), byte for byte.
const WORKED_EXAMPLE = `01000000 02000000 01000000 02000000 02000000 01000000 01000000 00000000 0000f03f
  00000000 00000000 00000000 03000000 00000000 00000000 00000000 00000000 00000000 00000000 0088c340
  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 04000000 00000000 01010000
  00000000 00000040 00000000 00000000 00000000 00000000 01000000 01000000 02000000 00000000 00000000
  0000803f 10000000 00000000 00004040 0000003f 000080bf 00000040 08000000 00000000 00000040 000080bf
  08000000 00000000 0000803f 000000c0`;

test("the frame types are the table's", () => {
  assert.equal(TYPES.HELLO, 1);
  assert.equal(TYPES.FORWARD_RESULT, 4);
  assert.equal(TYPES.DECODE_PAGED_RESULT, 21);
});

test("scalars, strings and arrays round-trip", () => {
  const payload = new Writer().u32(7).i32(-3).u64(2n ** 40n).i64(-5).f64(0.25).str("päth")
    .array([1.5, -2], Float32Array).array([4, 5, 6], Int32Array).finish();
  const r = new Reader(payload);
  assert.deepEqual([r.u32(), r.i32(), r.u64(), r.i64(), r.f64(), r.str()], [7, -3, 2n ** 40n, -5, 0.25, "päth"]);
  assert.deepEqual(Array.from(r.array(Float32Array)), [1.5, -2]);
  assert.deepEqual(Array.from(r.array(Int32Array)), [4, 5, 6]);
  r.expectEnd();
});

test("a short payload or an overlong array is a protocol error", () => {
  assert.throws(() => new Reader(Buffer.from([1, 2])).u32(), ProtocolError);
  const lying = new Writer().u64(1000).finish();
  assert.throws(() => new Reader(lying).array(Float32Array), /longer than its message/);
});

test("frames: header, split, bad magic and unknown type", () => {
  const data = Buffer.concat([encodeFrame(TYPES.BYE), encodeFrame(TYPES.HELLO, new Writer().u32(3).finish())]);
  const frames = splitFrames(data);
  assert.deepEqual(frames.map((f) => f.type), [TYPES.BYE, TYPES.HELLO]);
  const bad = frameHeader(1, 0);
  bad[0] = 0;
  assert.throws(() => parseHeader(bad), /bad frame magic/);
  assert.throws(() => parseHeader(frameHeader(99, 0)), /unknown message type 99/);
  assert.throws(() => splitFrames(data.subarray(0, 20)), /trailing bytes/);
});

test("PROTOCOL.md's worked example decodes and the reference answers its values", () => {
  const payload = Buffer.from(WORKED_EXAMPLE.replace(/\s+/g, ""), "hex");
  assert.equal(payload.length, 228);
  const d = declaration({ name: "t", features: ["explicit_mask", "softcap", "sinks", "gqa", "lse"] });
  const r = new Reader(payload);
  const p = new Problem(decodeProblem(r, d.precision), d);
  r.expectEnd();
  assert.equal(p.softcap, 2);
  assert.deepEqual(Array.from(p.sinks), [0, 1]);
  const { o, lse } = attention(p);
  const near = (a, b) => assert.ok(Math.abs(a - b) < 1e-6, `${a} vs ${b}`);
  [0.824195, 0, -0.883734, 0].forEach((x, i) => near(o[i], x));
  [2.137703, 0, 1.696759, 1].forEach((x, i) => near(lse[i], x));
});

test("a problem whose arrays disagree with its shape is refused", () => {
  const payload = forwardPayload({ batch: 1, heads: 1, kv_heads: 1, q_len: 2, k_len: 2, head_dim: 2, value_dim: 2,
    q: [1, 2, 3], k: [1, 2, 3, 4], v: [1, 2, 3, 4] });
  const d = declaration({ name: "t" });
  assert.throws(() => decodeProblem(new Reader(payload), d.precision), /array q does not match the shape/);
});
