// Reading a descriptor back, field by field as process_protocol.hpp reads it: for the node tests
// (outside test/, which node --test runs whole).
import { encodeDescriptor } from "../messages.js";
import { Reader } from "../wire.js";

/** The reader past the 2.0 fields and the kernel's 2.1 precision. */
export function pastPrecision(d) {
  const r = new Reader(encodeDescriptor(d, 2));
  r.u32(); r.str(); r.u32(); r.i32();
  for (let i = 0; i < 7; i++) r.i32();
  r.f64();
  r.array(Int32Array);
  for (let i = 0; i < 12; i++) r.i64();
  for (let i = 0; i < 10; i++) r.i32();
  r.f64(); r.f64();
  for (let i = 0; i < 6; i++) r.i32();
  return r;
}
