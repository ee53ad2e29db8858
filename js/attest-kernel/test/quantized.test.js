// Quantized K/V (quantized.js): bytes built by hand from each format's definition decode to the
// values it defines (the vectors of python/tests/test_quantized_formats.py); a FORWARD and a decode
// step carry them to a kernel as codes and scales; a kernel reading the wrong block gets O wrong.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { declaration, DeclarationError } from "../declaration.js";
import { encodeDescriptor } from "../messages.js";
import { FORMATS } from "../interface.js";
import { PagedStep } from "../paged.js";
import { QUANTIZED, TABLE_QUANTIZED, decode, rowBytes, storedSize } from "../quantized.js";
import { STATUS } from "../server.js";
import { Reader, TYPES, Writer, encodeFrame } from "../wire.js";
import { forwardPayload, serve } from "./helpers.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXAMPLE = path.join(HERE, "..", "examples", "quantized.mjs");
const KERNELS = path.join(HERE, "kernels.mjs");
const hello = encodeFrame(TYPES.HELLO, new Writer().u32(3).finish());
const HALF = [0x00, 0x38]; // f16 0.5, little endian
const QUARTER = [0x00, 0x34]; // f16 0.25
const values = (raw, format, shape, scales = null) => Array.from(decode(Uint8Array.from(raw), format, shape, scales).float32());

test("every quantized format of the interface table is one quantized.js decodes", () => {
  assert.deepEqual([...TABLE_QUANTIZED].sort(), [...QUANTIZED].sort());
});

test("q8: groups of 32, each with its scale", () => {
  const codes = [...Array.from({ length: 32 }, (_, i) => i - 16), 127, -127, 3]; // a group of 32, then one of 3
  const raw = [...HALF, ...codes.slice(0, 32).map((c) => c & 0xff), ...QUARTER, ...codes.slice(32).map((c) => c & 0xff)];
  assert.deepEqual(values(raw, "q8", [1, 35]), [...codes.slice(0, 32).map((c) => 0.5 * c), ...codes.slice(32).map((c) => 0.25 * c)]);
  const rows = decode(Uint8Array.from(raw), "q8", [1, 35]);
  assert.deepEqual([rows.groups, Array.from(rows.scales), rows.codes[0], rows.codes[33]], [2, [0.5, 0.25], -16, -127]);
  assert.equal(rowBytes("q8", 35), raw.length);
});

test("q4 and q4_0: two codes a byte offset by 8, neighbours or halves", () => {
  // codes -8, 7, 0, 1, -1 in a 5-wide row: bytes (0+8)|(7+8)<<4, (0+8)|(1+8)<<4, (-1+8)
  assert.deepEqual(values([...HALF, 0x00 | 0xf0, 0x08 | 0x90, 0x07], "q4", [1, 5]), [-4, 3.5, 0, 0.5, -0.5]);
  // attest's q4 scale is the group's signed largest over -8, so it may be negative: its sign is kept
  assert.deepEqual(values([0x00, 0xb8, 0x00 | 0xf0, 0x08 | 0x90, 0x07], "q4", [1, 5]), [4, -3.5, -0, -0.5, 0.5]);
  const codes = Array.from({ length: 32 }, (_, j) => (j % 16) - 8);
  const raw = [...HALF, ...Array.from({ length: 16 }, (_, j) => (codes[j] + 8) | ((codes[j + 16] + 8) << 4))];
  assert.deepEqual(values(raw, "q4_0", [1, 32]), codes.map((c) => 0.5 * c));
  // a group of 5 pairs j with j + 3: codes -8, 7, 0, 1, -1
  assert.deepEqual(values([...HALF, 0x00 | 0x90, 0x0f | 0x70, 0x08 | 0x80], "q4_0", [1, 5]), [-4, 3.5, 0, 0.5, -0.5]);
});

test("q8_token: one scale a row; q8_head: one a head in a problem, none in a step", () => {
  const got = values([...HALF, ...Array(40).fill(2), ...QUARTER, ...Array(40).fill(0xfe)], "q8_token", [2, 40]);
  assert.deepEqual(got, [...Array(40).fill(1), ...Array(40).fill(-0.5)]);
  assert.deepEqual(values([...HALF, 1, 2, 3, 4], "q8_head", [1, 2, 2]), [0.5, 1, 1.5, 2]);
  assert.deepEqual(values([1, 2, 3, 4], "q8_head", [1, 2, 2], [0.25]), [0.25, 0.5, 0.75, 1]);
  assert.equal(storedSize("q8_head", [3, 2, 2]), 3 * 6);
  assert.equal(storedSize("q8_head", [3, 2, 2], true), 12);
  // a paged sequence appending no token: its kv heads' scales, no codes
  assert.deepEqual([storedSize("q8_head", [3, 0, 2], true), decode(new Uint8Array(0), "q8_head", [3, 0, 2], [1, 2, 3]).scales.length], [0, 3]);
});

test("fp8 bit patterns, NaNs included", () => {
  const cases = [["e4m3", 0x38, 1], ["e4m3", 0x7e, 448], ["e4m3", 0x01, 2 ** -9], ["e4m3", 0xc0, -2], ["e5m2", 0x3c, 1],
    ["e5m2", 0x7b, 57344], ["e5m2", 0x01, 2 ** -16], ["e5m2", 0x7c, Infinity]];
  for (const [format, bits, value] of cases) assert.equal(values([bits], format, [1, 1])[0], value, `${format} ${bits}`);
  for (const [format, bits] of [["e4m3", 0x7f], ["e4m3", 0xff], ["e5m2", 0x7d], ["e5m2", 0xff]]) {
    assert.ok(Number.isNaN(values([bits], format, [1, 1])[0]), `${format} ${bits}`);
  }
});

test("a wrong size is refused by name", () => {
  assert.throws(() => values([0, 0, 0, 0], "q4", [1, 5]), /q4 data of 4 bytes, expected 5/);
});

test("a declaration stores K and V quantized, never Q or O; the descriptor carries their codes", () => {
  const d = declaration({ name: "k", precision: { k: "q8", v: "q4_0", q_entry: "q8" } });
  assert.deepEqual([d.precision.k, d.precision.v, d.precision.q_entry], ["q8", "q4_0", "q8"]);
  for (const field of ["q", "o", "k_entry"]) {
    assert.throws(() => declaration({ name: "k", precision: { [field]: "q8" } }),
      (e) => e instanceof DeclarationError && e.message.startsWith(`precision.${field}: "q8" is not a number format here`));
  }
  const r = new Reader(encodeDescriptor(d, 2));
  r.u32(); r.str(); r.u32(); r.i32();
  assert.deepEqual([r.i32(), r.i32(), r.i32()], [FORMATS.f32[0], FORMATS.q8[0], FORMATS.q4_0[0]]);
});

/** A q8 row of `width` values: each group [scale bits, codes]. */
const q8Row = (...groups) => groups.flatMap(([scale, codes]) => [...scale, ...codes.map((c) => c & 0xff)]);

// Dk = 33 (a group of 32 and one of 1): key 0 reads 1 in its last value (scale 0.25, code 4), key 1
// reads 0; q picks the last value, so the scores are 1 and 0; V (Dv = 1) reads 1 and 3.
const problem = { batch: 1, heads: 1, kv_heads: 1, q_len: 1, k_len: 2, head_dim: 33, value_dim: 1,
  q: [...Array(32).fill(0), 1],
  k: Uint8Array.from([...q8Row([HALF, Array(32).fill(0)], [QUARTER, [4]]), ...q8Row([HALF, Array(32).fill(0)], [QUARTER, [0]])]),
  v: Uint8Array.from([...q8Row([HALF, [2]]), ...q8Row([HALF, [6]])]) };

async function forwardO(spec) {
  const run = await serve(spec, [hello, encodeFrame(TYPES.FORWARD, forwardPayload(problem))]);
  assert.equal(run.code, 0, run.stderr);
  const r = new Reader(run.frames[1].payload);
  assert.deepEqual([r.i32(), r.str()], [STATUS.ok, ""]);
  r.str(); r.str();
  return new Float32Array(r.array(Uint8Array).buffer)[0];
}

test("FORWARD: q8 K and V reach the kernel as codes and scales; the wrong block gets O wrong", async () => {
  const right = (Math.E * 1 + 3) / (Math.E + 1);
  assert.ok(Math.abs((await forwardO(`${EXAMPLE}:q8`)) - right) < 1e-6);
  const wrong = (Math.E ** 2 * 1 + 3) / (Math.E ** 2 + 1); // key 0's last value scaled by 0.5: score 2
  assert.ok(Math.abs((await forwardO(`${EXAMPLE}:q8FirstScale`)) - wrong) < 1e-6);
});

/** A DECODE_OPEN for B = 2, H = Hkv = 1, Dk = Dv = 2, with q8_head scales [B][Hkv] for K and V. */
const open = (kScales, vScales) => new Writer().i32(2).i32(1).i32(1).i32(2).i32(2).f64(1).array([0, 0, 0], Int32Array).i32(0)
  .f64(10000).f64(0).array(null, Float32Array).array(null, Float32Array).array(kScales, Float32Array)
  .array(vScales, Float32Array).finish();

test("a decode step's q8_head rows are codes alone, scaled by the session's static scales", async () => {
  const step = new Writer().u64(1).i32(1).i32(0).bytes(new Float32Array(4)).bytes(Uint8Array.of(1, 2, 3, 4))
    .bytes(Uint8Array.of(1, 2, 0xff, 4)).finish();
  const run = await serve(`${KERNELS}:echoQ8Head`, [hello, encodeFrame(TYPES.DECODE_OPEN, open([1, 1], [0.5, 0.25])),
    encodeFrame(TYPES.DECODE_STEP, step)]);
  assert.equal(run.code, 0, run.stderr);
  const r = new Reader(run.frames[2].payload);
  assert.deepEqual([r.i32(), r.str(), r.str()], [STATUS.ok, "", "q8_head 4"]);
  assert.deepEqual(Array.from(new Float32Array(r.array(Uint8Array).buffer)), [0.5, 1, -0.25, 1]);
  const unscaled = await serve(`${KERNELS}:echoQ8Head`, [hello, encodeFrame(TYPES.DECODE_OPEN, open(null, null)),
    encodeFrame(TYPES.DECODE_STEP, step)]);
  assert.equal(unscaled.code, 2);
  assert.match(new Reader(unscaled.frames[2].payload).str(), /q8_head session opened without its static scales/);
});

test("a paged step hands sequence b its quantized rows, q8_head with b's scales", () => {
  const config = { batch: 2, heads: 1, kv_heads: 1, head_dim: 2, value_dim: 2, k_scales: Float32Array.of(1, 2),
    v_scales: Float32Array.of(0.5, 0.25) };
  const fields = { page_bytes: 4, pool: new Uint8Array(8), table_width: 1, tables: Int32Array.of(0, 1),
    lengths: BigInt64Array.of(0n, 0n), counts: Int32Array.of(1, 1), want_lse: false, q: new Uint8Array(16),
    k: Uint8Array.of(1, 2, 3, 4), v: Uint8Array.of(2, 2, 4, 4) };
  const step = new PagedStep(fields, config, 1, { q: "f32", k: "q8_head", v: "q8_head" });
  assert.deepEqual(Array.from(step.sequence(1).k.float32()), [6, 8]);
  assert.deepEqual(Array.from(step.sequence(0).v.float32()), [1, 1]);
  assert.throws(() => new PagedStep({ ...fields, k: Uint8Array.of(1, 2, 3) }, config, 1, { q: "f32", k: "q8_head", v: "q8_head" }),
    /paged step: k does not match the counts/);
});
