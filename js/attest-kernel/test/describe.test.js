// describe.js: the descriptor as attest reads it, decoded by the interface table's rows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { decodeDescriptor } from "../descriptor.js";
import { declaration } from "../declaration.js";
import { encodeDescriptor } from "../messages.js";
import { Path } from "../paths.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DESCRIBE = path.join(HERE, "..", "describe.js");

test("decodeDescriptor reads back every section the encoder wrote", () => {
  const d = decodeDescriptor(encodeDescriptor(declaration({ name: "k", features: ["causal", "lse"],
    precision: { p: "bf16", weight_sum: "f32" }, contract: { k_len: [1, 64], value_dims: [32] },
    paths: [new Path("short", { k_len: [1, 64], key_tile: 16, required: ["causal"] })],
    decode: () => null, cache_policy: "window", cache_recent: 8 }), 2));
  assert.deepEqual(d.capabilities, ["causal", "lse", "decode"]);
  assert.deepEqual([d["precision.p"], d["precision.weight_sum"], d["contract.k_len.max"]], ["bf16", "f32", 64]);
  assert.equal(d.declared_paths[0].path, "short");
  assert.deepEqual([d.declared_paths[0].k_len, d.declared_paths[0].required], [[1, 64], ["causal"]]);
  assert.deepEqual([d.cache_policy, d.cache_recent, d.value_dims, d.declared_key_tiles], ["window", 8, [32], [16]]);
  // Without a 2.4 or 2.7 section the reading stops after 2.3's field, as attest's does.
  const short = decodeDescriptor(encodeDescriptor(declaration({ name: "k" }), 2));
  assert.ok("contract.deterministic_backward" in short && !("cache_policy" in short));
});

test("describe prints each field; a kernel that cannot be loaded is one line, exit 2", () => {
  const run = spawnSync(process.execPath, [DESCRIBE, path.join(HERE, "..", "examples", "serving.mjs") + ":serving"],
    { encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^name: "js-serving"$/m);
  assert.match(run.stdout, /^capabilities: \["causal","gqa","lse","decode"\]$/m);
  assert.match(run.stdout, /^page_tokens: 16$/m);
  const bad = spawnSync(process.execPath, [DESCRIBE, path.join(HERE, "kernels.mjs") + ":undeclared"], { encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /^cannot describe .*has no declaration: wrap it in declare\(\{\.\.\.\}, fn\)\n$/);
});
