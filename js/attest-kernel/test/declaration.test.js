import { test } from "node:test";
import assert from "node:assert/strict";
import { declare, declaration, DeclarationError } from "../declaration.js";
import { encodeDescriptor } from "../messages.js";
import { Reader } from "../wire.js";
import { pastPrecision } from "../testing/descriptor_reader.js";
import { CAPABILITIES } from "../interface.js";

test("declare attaches a checked declaration with the table's capability bits", () => {
  const kernel = declare({ name: "k", features: ["causal", "lse"], decode: () => ({ step() {} }) }, () => null);
  const bits = (1 << CAPABILITIES.causal[0]) | (1 << CAPABILITIES.lse[0]) | (1 << CAPABILITIES.decode[0]);
  assert.equal(kernel.declaration.capabilities, bits);
  assert.ok(kernel.declaration.has("causal"));
});

test("one function declared twice keeps both declarations", () => {
  const fn = (p) => p;
  const narrow = declare({ name: "narrow" }, fn);
  const wide = declare({ name: "wide", features: ["causal"] }, fn);
  assert.equal(narrow.declaration.name, "narrow");
  assert.equal(wide.declaration.name, "wide");
  assert.equal(fn.declaration, undefined);
  assert.equal(wide(7), 7);
});

test("every bad field is named", () => {
  const cases = [
    [{ name: "" }, /^name:/],
    [{ name: "k", features: ["flash"] }, /features: unknown feature "flash"/],
    [{ name: "k", features: ["decode"] }, /give decode: function/],
    [{ name: "k", empty_rows: "skip" }, /empty_rows/],
    [{ name: "k", precision: { q: "f8" } }, /precision.q: "f8"/],
    [{ name: "k", contract: { q_len: [4, 2] } }, /contract.q_len: min 4 is larger than max 2/],
    [{ name: "k", contract: { causal_required: true } }, /needs the feature "causal"/],
    [{ name: "k", paths: [["p", { o: "f16" }]] }, /a path changes arithmetic, never storage/],
    [{ name: "k", colour: 1 }, /unknown field "colour"/],
    [{ name: "k", backward: () => 0, precision: { p: "bf16" } }, /backward/],
    [{ name: "k", features: ["merge"] }, /give merge: function/],
    [{ name: "k", merge: "exact" }, /merge: is not a function/],
  ];
  for (const [fields, message] of cases) assert.throws(() => declaration(fields), (e) => e instanceof DeclarationError && message.test(e.message));
  assert.throws(() => declare({ name: "k" }, 42), /not a function/);
});

test("the descriptor carries name, capabilities, precision and contract in the table's order", () => {
  const d = declaration({ name: "kernel", features: ["gqa"], precision: { q: "bf16", exp_ulps: 2 },
    contract: { head_dims: [64, 128], q_len: [1, 512] }, paths: [["fast", { q: "bf16", p: "bf16" }]] });
  const r = new Reader(encodeDescriptor(d, 2));
  assert.deepEqual([r.u32(), r.str(), r.u32(), r.i32()], [2, "kernel", 1 << CAPABILITIES.gqa[0], 0]);
  assert.deepEqual([r.i32(), r.i32(), r.i32(), r.i32(), r.i32(), r.i32(), r.i32(), r.f64()], [1, 0, 0, 0, 0, 0, 0, 2]);
  assert.deepEqual(Array.from(r.array(Int32Array)), [64, 128]);
  const ranges = Array.from({ length: 12 }, () => r.i64());
  assert.deepEqual(ranges, [0, 0, 0, 0, 0, 0, 1, 512, 0, 0, 0, 0]);
  for (let i = 0; i < 10; i++) r.i32();
  r.f64(); r.f64();
  for (let i = 0; i < 6; i++) r.i32();
  assert.equal(r.u32(), 1);
  assert.equal(r.str(), "fast");
  for (let i = 0; i < 5; i++) r.i32();
  assert.equal(r.i32(), 1); // the path's p: bf16
  r.i32(); r.f64();
  for (let i = 0; i < 6; i++) r.i32();
  assert.deepEqual([r.u32(), r.i32()], [0, 0]); // no declared paths; not deterministic
  r.expectEnd();
});

test("flushed subnormals travel in the 2.9 section, after 2.7's zeros; a path cannot declare them alone", () => {
  const d = declaration({ name: "wasm", precision: { flush_subnormals: true } });
  const r = pastPrecision(d);
  assert.deepEqual([r.u32(), r.u32(), r.i32()], [0, 0, 0]); // no paths, no declared paths; not deterministic
  assert.deepEqual(Array.from({ length: 5 }, () => r.i32()), [0, 0, 0, 0, 0]); // 2.4: a full cache
  assert.deepEqual(Array.from(r.array(Int32Array)), []); // 2.7: no value widths
  assert.deepEqual([r.i64(), r.i64(), r.i32()], [0, 0, 0]);
  assert.deepEqual(Array.from(r.array(Int32Array)), []);
  assert.equal(r.i32(), 1); // 2.9: precision.flush_subnormals
  r.expectEnd();
  assert.throws(() => declaration({ name: "k", paths: [["fast", { flush_subnormals: true }]] }),
    (e) => e instanceof DeclarationError && /flush_subnormals is the kernel's/.test(e.message));
  assert.throws(() => declaration({ name: "k", precision: { flush_subnormals: 2 } }),
    (e) => e instanceof DeclarationError && /precision.flush_subnormals/.test(e.message));
});

test("Dv's own widths and ALiBi-or-bias travel in the 2.7 section, after 2.4's zeros", () => {
  const d = declaration({ name: "ggml", features: ["alibi", "bias"],
    contract: { value_dims: [32, 64], value_dim: [16, 256], alibi_excludes_bias: true } });
  const r = pastPrecision(d);
  assert.deepEqual([r.u32(), r.u32(), r.i32()], [0, 0, 0]); // no paths, no declared paths; not deterministic
  assert.deepEqual(Array.from({ length: 5 }, () => r.i32()), [0, 0, 0, 0, 0]); // 2.4: a full cache
  assert.deepEqual(Array.from(r.array(Int32Array)), [32, 64]);
  assert.deepEqual([r.i64(), r.i64(), r.i32()], [16, 256, 1]);
  assert.deepEqual(Array.from(r.array(Int32Array)), []); // declared_key_tiles: no declared paths
  r.expectEnd();
  assert.throws(() => declaration({ name: "k", contract: { dk_equals_dv: true, value_dims: [32] } }),
    (e) => e instanceof DeclarationError && /contract.value_dims/.test(e.message));
});
