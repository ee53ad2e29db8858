// Test helpers: attest's side of a FORWARD payload, built field by field as impl/PROTOCOL.md lists it,
// and serve.js run on a list of request frames.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Writer, splitFrames } from "../wire.js";

const SERVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "serve.js");

/** A FORWARD payload from shape, q/k/v (numbers, stored f32; or a Uint8Array: bytes already in their
 * storage format) and optional mask terms and modifiers. */
export function forwardPayload(f) {
  const w = new Writer();
  for (const x of [f.batch, f.heads, f.kv_heads, f.q_len, f.k_len, f.head_dim, f.value_dim]) w.i32(x);
  w.f64(f.scale ?? 1).i64(f.q_offset ?? f.k_len - f.q_len).i32(f.causal ? 1 : 0);
  w.array([f.window ?? 0, f.chunk ?? 0, f.lookahead ?? 0], Int32Array).i32(0).f64(10000);
  for (const name of ["kv_valid", "q_valid", "q_segment", "k_segment"]) w.array(f[name] ?? null, Int32Array);
  w.array(f.explicit_mask ?? null, Uint8Array).f64(f.softcap ?? 0).array(f.alibi_slopes ?? null, Float32Array);
  w.array(f.bias ?? null, Float32Array).i32(1).i32(1).array(f.sinks ?? null, Float32Array);
  for (const name of ["q", "k", "v"]) w.bytes(f[name] instanceof Uint8Array ? f[name] : Float32Array.from(f[name]));
  return w.finish();
}

/** Runs serve.js on `spec` with the requests on descriptor 3; {code, frames, stderr}. */
export function serve(spec, requests) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVE, spec], {
      stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"], env: { ...process.env, ATTEST_PROTOCOL_FDS: "3,4" } });
    const out = [];
    let stderr = "";
    child.stdio[4].on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => { stderr += d; });
    child.stdio[3].end(Buffer.concat(requests));
    child.on("close", (code) => resolve({ code, frames: splitFrames(Buffer.concat(out)), stderr }));
  });
}
