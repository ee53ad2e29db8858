// Runs flash.wgsl.mjs's shader on a GPUDevice for one attest problem: packs the problem's scalars
// into the uniform Params and its optional arrays into two storage buffers, dispatches one
// workgroup per BR query rows of each (batch, head) and reads O and LSE back.
import { BR, D_MAX } from "./flash.wgsl.mjs";

const USAGE = { storage: 0x80, copySrc: 0x04, copyDst: 0x08, uniform: 0x40, mapRead: 0x01 }; // GPUBufferUsage
const pipelines = new WeakMap(); // device -> Map(source -> pipeline): each WGSL compiles once

class UnsupportedProblem extends Error { get name() { return "Unsupported"; } }

/** The compute pipeline of `source`, compiled on first use; a WGSL error throws with its line. */
async function pipeline(device, source) {
  if (!pipelines.has(device)) pipelines.set(device, new Map());
  const cache = pipelines.get(device);
  if (!cache.has(source)) {
    const module = device.createShaderModule({ code: source });
    const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
    if (errors.length) throw new Error(`WGSL: ${errors.map((m) => `line ${m.lineNum}: ${m.message}`).join("; ")}`);
    cache.set(source, device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } }));
  }
  return cache.get(source);
}

function buffer(device, data, usage) {
  const size = Math.max(16, Math.ceil(data.byteLength / 4) * 4);
  const gpu = device.createBuffer({ size, usage: usage | USAGE.copyDst });
  device.queue.writeBuffer(gpu, 0, data.buffer, data.byteOffset, data.byteLength);
  return gpu;
}

/** The optional arrays appended to one flat array; the offset of each (-1: absent). */
function pack(arrays, Type) {
  const at = arrays.map(() => -1);
  let length = 0;
  arrays.forEach((a, n) => { if (a) { at[n] = length; length += a.length; } });
  const flat = new Type(Math.max(length, 1));
  arrays.forEach((a, n) => { if (a) flat.set(a, at[n]); });
  return { flat, at };
}

export async function runFlash(device, source, p) {
  if (p.head_dim > D_MAX || p.value_dim > D_MAX) throw new UnsupportedProblem(`head widths above ${D_MAX}`);
  const ints = pack([p.kv_valid, p.q_valid, p.q_segment, p.k_segment], Int32Array);
  const floats = pack([p.sinks, p.alibi_slopes], Float32Array);
  const params = new ArrayBuffer(80);
  const u = new Uint32Array(params);
  const i = new Int32Array(params);
  const f = new Float32Array(params);
  u.set([p.batch, p.heads, p.kv_heads, p.q_len, p.k_len, p.head_dim, p.value_dim], 0);
  i[7] = p.q_offset;
  u.set([p.causal ? 1 : 0, p.window, p.chunk, p.lookahead], 8);
  i.set([...ints.at, ...floats.at], 12);
  f[18] = p.scale;
  f[19] = p.softcap;
  const oLength = p.batch * p.heads * p.q_len * p.value_dim;
  const outBytes = (oLength + p.batch * p.heads * p.q_len) * 4;
  const buffers = [buffer(device, new Uint8Array(params), USAGE.uniform),
    ...[p.q, p.k, p.v, ints.flat, floats.flat].map((a) => buffer(device, a, USAGE.storage))];
  const out = device.createBuffer({ size: outBytes, usage: USAGE.storage | USAGE.copySrc });
  const readback = device.createBuffer({ size: outBytes, usage: USAGE.mapRead | USAGE.copyDst });
  const compute = await pipeline(device, source);
  const bindGroup = device.createBindGroup({ layout: compute.getBindGroupLayout(0),
    entries: [...buffers, out].map((b, binding) => ({ binding, resource: { buffer: b } })) });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(compute);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(Math.ceil(p.q_len / BR), p.batch * p.heads);
  pass.end();
  encoder.copyBufferToBuffer(out, 0, readback, 0, outBytes);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(1 /* GPUMapMode.READ */);
  const result = new Float32Array(readback.getMappedRange().slice(0));
  readback.unmap();
  for (const b of [...buffers, out, readback]) b.destroy();
  return { o: result.subarray(0, oLength), lse: result.subarray(oLength) };
}
