#!/usr/bin/env node
// Serves a declared kernel to attest:  node js/attest-kernel/serve.js MODULE.mjs:EXPORT
// (attest certify --kernel-cmd "node js/attest-kernel/serve.js my_kernel.mjs:attention").
// A kernel that cannot be loaded or declared is reported to attest as an ERROR (attest exits 2).
import { loadKernel } from "./load.js";
import { Server, openChannel } from "./server.js";

const args = process.argv.slice(2);
if (args.length !== 1 || args[0].startsWith("-")) {
  console.error("usage: node serve.js MODULE.mjs:EXPORT  (a kernel made with declare({...}, fn))");
  process.exit(2);
}
let channel;
try {
  channel = openChannel();
} catch (e) {
  console.error(`attest-kernel: ${e.message}`);
  process.exit(2);
}
let kernel = null;
let loadError = null;
try {
  kernel = await loadKernel(args[0]);
} catch (e) {
  loadError = `cannot serve ${args[0]}: ${e.message}`;
}
process.exitCode = await new Server(kernel, kernel?.declaration ?? null, channel, loadError).run();
