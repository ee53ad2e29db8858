// Declared paths (ABI 2.2 predicates, 2.7 key tiles, a path's own precision): checked when built and
// written in the descriptor as process_protocol.hpp reads them (examples/paths.mjs certifies them).
import { test } from "node:test";
import assert from "node:assert/strict";
import { declaration, DeclarationError, Path } from "../declaration.js";
import { encodeDescriptor } from "../messages.js";
import { pastPrecision } from "../testing/descriptor_reader.js";
import { CAPABILITIES } from "../interface.js";

function readPrecision(r) {
  const p = Array.from({ length: 7 }, () => r.i32());
  r.f64();
  return p.concat(Array.from({ length: 6 }, () => r.i32()));
}

function readPath(r) {
  const p = { name: r.str() };
  for (const name of ["batch", "heads", "q_len", "k_len", "head_dim", "value_dim"]) p[name] = [r.i64(), r.i64()];
  for (const name of ["head_dim_multiple", "value_dim_multiple", "k_len_multiple", "k_len_not_multiple"]) p[name] = r.i32();
  for (const name of ["required", "excluded"]) p[name] = r.u32();
  p.no_mask = r.i32();
  return p;
}

test("declared paths travel in order with their predicates, precisions and key tiles", () => {
  const d = declaration({ name: "paths", features: ["causal", "gqa"], paths: [
    new Path("split", { batch: [1, 1], q_len: [1, 4], k_len: [512, null], required: ["causal"], excluded: ["gqa"] }),
    new Path("rest", { head_dim_multiple: 16, k_len_multiple: 64, k_len_not_multiple: true, no_mask: true, key_tile: 64,
      precision: { p: "bf16" } }),
    ["other", { accumulator: "bf16" }]] });
  const r = pastPrecision(d);
  // ABI 2.1's list: the paths that round elsewhere, declared or not.
  assert.equal(r.u32(), 2);
  assert.equal(r.str(), "rest");
  assert.deepEqual(readPrecision(r).slice(5, 7), [1, 0]); // P bf16, accumulator f32
  assert.equal(r.str(), "other");
  assert.deepEqual(readPrecision(r).slice(5, 7), [0, 1]);
  assert.equal(r.u32(), 2); // 2.2
  const [split, rest] = [readPath(r), readPath(r)];
  assert.deepEqual([split.name, split.batch, split.k_len, split.heads], ["split", [1, 1], [512, 2 ** 40], [0, 0]]);
  assert.deepEqual([split.required, split.excluded], [1 << CAPABILITIES.causal[0], 1 << CAPABILITIES.gqa[0]]);
  assert.deepEqual([rest.head_dim_multiple, rest.k_len_multiple, rest.k_len_not_multiple, rest.no_mask, rest.required],
    [16, 64, 1, 1, 0]);
  r.i32(); // 2.3
  assert.deepEqual(Array.from({ length: 5 }, () => r.i32()), [0, 0, 0, 0, 0]); // 2.4: written for 2.7's tiles
  assert.deepEqual([Array.from(r.array(Int32Array)), r.i64(), r.i64(), r.i32()], [[], 0, 0, 0]);
  assert.deepEqual(Array.from(r.array(Int32Array)), [0, 64]); // declared_key_tiles, one per declared path
  r.expectEnd();
});

test("a path's plain fields ({name, ...}) are the Path they name", () => {
  const fields = { name: "long", k_len: [65, null], key_tile: 32, precision: { p: "bf16" } };
  const plain = encodeDescriptor(declaration({ name: "k", paths: [fields] }), 2);
  const { name, ...rest } = fields;
  assert.deepEqual(plain, encodeDescriptor(declaration({ name: "k", paths: [new Path(name, rest)] }), 2));
  assert.notDeepEqual(plain, encodeDescriptor(declaration({ name: "k", paths: [["long", { p: "bf16" }]] }), 2));
});

test("no key tile writes no 2.7 section", () => {
  const r = pastPrecision(declaration({ name: "paths", paths: [new Path("all")] }));
  assert.deepEqual([r.u32(), r.u32(), readPath(r).name, r.i32()], [0, 1, "all", 0]);
  r.expectEnd();
});

test("every bad path is refused naming it and its field", () => {
  const cases = [
    [() => new Path("x".repeat(32)), /1 to 31 printable bytes/],
    [() => new Path("p", { k_len: [9, 4] }), /path "p".k_len: min 9 is larger than max 4/],
    [() => new Path("p", { q_len: [-1, 4] }), /path "p".q_len min/],
    [() => new Path("p", { head_dim_multiple: -16 }), /path "p".head_dim_multiple/],
    [() => new Path("p", { key_tile: 5000 }), /path "p".key_tile/],
    [() => new Path("p", { k_len_multiple: 1, k_len_not_multiple: true }), /Tk % 1 != 0 takes no problem/],
    [() => new Path("p", { required: ["casual"] }), /path "p".required: unknown feature "casual"/],
    [() => new Path("p", { excluded: ["decode"] }), /path "p".excluded: unknown feature "decode"/],
    [() => new Path("p", { required: ["causal"], excluded: ["causal"] }), /causal both required and excluded/],
    [() => new Path("p", { required: ["window"], no_mask: true }), /requires a mask term and no_mask/],
    [() => new Path("p", { colour: 1 }), /path "p": unknown field "colour"/],
    [() => new Path("p", { precision: { p: "f8" } }), /path "p".precision.p: "f8"/],
    [() => declaration({ name: "k", paths: [new Path("p", { precision: { o: "bf16" } })] }), /never storage/],
    [() => declaration({ name: "k", paths: [new Path("p"), ["p", {}]] }), /path "p" declared twice/],
    [() => declaration({ name: "k", paths: [{ nom: "p" }] }), /paths\[0\]: .* is not a \[name, precision\] pair, a Path or/],
    [() => declaration({ name: "k", paths: [{ name: "p", k_len: [9, 4] }] }), /path "p".k_len: min 9 is larger/],
  ];
  for (const [make, message] of cases) assert.throws(make, (e) => e instanceof DeclarationError && message.test(e.message));
});
