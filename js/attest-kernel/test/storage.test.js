import { test } from "node:test";
import assert from "node:assert/strict";
import { f16ToF32, f32ToF16, bf16ToF32, f32ToBf16, toFloat32, fromNumbers } from "../storage.js";

test("f16: exact values, rounding to nearest even, subnormals, overflow", () => {
  assert.equal(f32ToF16(1), 0x3c00);
  assert.equal(f32ToF16(-2), 0xc000);
  assert.equal(f32ToF16(65504), 0x7bff);
  assert.equal(f32ToF16(65520), 0x7c00); // halfway to the next binade: rounds to infinity
  assert.equal(f32ToF16(1 + 2 ** -11), 0x3c00); // a tie: to even
  assert.equal(f32ToF16(1 + 3 * 2 ** -11), 0x3c02); // a tie: to even, upwards
  assert.equal(f32ToF16(2 ** -24), 0x0001);
  assert.equal(f32ToF16(2 ** -26), 0x0000);
  assert.ok(Number.isNaN(f16ToF32(f32ToF16(NaN))));
  for (let h = 0; h < 0x7c00; h += 37) assert.equal(f32ToF16(f16ToF32(h)), h);
});

test("bf16: the top half of f32, rounded to nearest even", () => {
  assert.equal(f32ToBf16(1), 0x3f80);
  assert.equal(bf16ToF32(0x3f80), 1);
  assert.equal(f32ToBf16(1 + 2 ** -8), 0x3f80); // a tie: to even
  assert.equal(f32ToBf16(1 + 3 * 2 ** -8), 0x3f82);
  assert.ok(Number.isNaN(bf16ToF32(f32ToBf16(NaN))));
});

test("arrays convert by format", () => {
  const bits = fromNumbers([1, 0.5, -3], "f16");
  assert.ok(bits instanceof Uint16Array);
  assert.deepEqual(Array.from(toFloat32(bits, "f16")), [1, 0.5, -3]);
  assert.ok(fromNumbers([1, 2], "f32") instanceof Float32Array);
  assert.throws(() => toFloat32(bits, "q8"), /not a 16-bit or f32 format/);
});
