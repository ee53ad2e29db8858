// The page's side of the browser kernel host: one WebGPU device shared by every call, the kernel
// module, and each FORWARD crossing page.evaluate as base64 typed arrays (see transfer.js).
// A kernel's exception is returned as {thrown}; a lost device as {lost}, which ends the host.
let device = null;
let kernel = null;
let lost = null;
const gpuErrors = [];

function fromBase64(text, Type) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return new Type(bytes.buffer);
}

function toBase64(values) {
  const floats = values instanceof Float32Array ? values : Float32Array.from(values);
  const bytes = new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function decodeProblem(encoded) {
  const problem = {};
  for (const [name, value] of Object.entries(encoded)) {
    problem[name] = value && typeof value === "object" && "base64" in value ? fromBase64(value.base64, globalThis[value.type]) : value;
  }
  return problem;
}

async function open(moduleUrl, exportName) {
  if (!navigator.gpu) return { noAdapter: "the page has no navigator.gpu (WebGPU is not enabled in this browser)" };
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return { noAdapter: "navigator.gpu.requestAdapter() found no WebGPU adapter" };
  device = await adapter.requestDevice({ requiredLimits: { maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize } });
  device.lost.then((info) => { lost = `WebGPU device lost (${info.reason ?? "unknown"}): ${info.message}`; });
  device.addEventListener("uncapturederror", (event) => gpuErrors.push(event.error.message));
  const info = adapter.info;
  const opened = { adapter: { vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description,
    fallback: info.isFallbackAdapter ?? adapter.isFallbackAdapter ?? false, subgroupMinSize: info.subgroupMinSize,
    subgroupMaxSize: info.subgroupMaxSize }, features: [...adapter.features].sort() };
  if (moduleUrl === null) return opened;
  try {
    kernel = (await import(moduleUrl))[exportName];
  } catch (e) {
    return { ...opened, error: `the page cannot import the module: ${e.message}` };
  }
  if (typeof kernel?.forward !== "function") return { ...opened, error: `the module exports no ${JSON.stringify(exportName)} with forward(problem, device)` };
  return opened;
}

async function forward(encoded) {
  if (lost) return { lost };
  let result;
  try {
    result = await kernel.forward(decodeProblem(encoded), device);
  } catch (e) {
    return lost ? { lost } : { thrown: { name: e?.name ?? "Error", message: e?.message ?? String(e), stack: e?.stack ?? "" } };
  }
  if (lost) return { lost };
  if (gpuErrors.length) return { thrown: { name: "GPUError", message: gpuErrors.splice(0).join("; "), stack: "" } };
  if (result == null || typeof result !== "object" || result.o == null) return { thrown: { name: "TypeError", message: "forward returned no {o, lse, path}", stack: "" } };
  return { o: toBase64(result.o), lse: result.lse == null ? null : toBase64(result.lse), path: result.path ?? "" };
}

window.attestHost = { open, forward };
