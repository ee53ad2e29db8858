#!/usr/bin/env node
// Prints what a declared kernel tells attest:  node js/attest-kernel/describe.js MODULE.mjs:EXPORT
// Each descriptor field as attest reads it ("field: value", enumerations by name), the Python
// package's `python3 -m attest_kernel describe`. A kernel that cannot be loaded: one line, exit 2.
import { decodeDescriptor } from "./descriptor.js";
import { VERSION } from "./interface.js";
import { encodeDescriptor } from "./messages.js";
import { loadKernel } from "./load.js";

const args = process.argv.slice(2);
if (args.length !== 1 || args[0].startsWith("-")) {
  console.error("usage: node describe.js MODULE.mjs:EXPORT  (a kernel made with declare({...}, fn))");
  process.exit(2);
}
try {
  const kernel = await loadKernel(args[0]);
  const fields = decodeDescriptor(encodeDescriptor(kernel.declaration, VERSION.abi_major));
  for (const [field, value] of Object.entries(fields)) console.log(`${field}: ${JSON.stringify(value)}`);
} catch (e) {
  console.error(`cannot describe ${args[0]}: ${e.message.split("\n")[0]}`);
  process.exit(2);
}
