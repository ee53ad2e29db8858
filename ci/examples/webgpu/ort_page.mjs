// The page's side of ort_browser.mjs: one onnxruntime-web build loaded in the page, its sessions by
// id, tensors crossing page.evaluate as {type, dims, base64}. Sessions run on the WebGPU execution
// provider with the CPU fallback disabled: a node WebGPU does not take is an error, not CPU output.
let ort = null;
let provider = null;
const sessions = new Map();
let nextId = 1;

const ARRAYS = { float32: Float32Array, int32: Int32Array, bool: Uint8Array, float16: Uint16Array };

function bytesOf(base64) {
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function base64Of(view) {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** Loads the build at `url` (ort.webgpu.bundle.min.mjs: the native WebGPU EP; ort.bundle.min.mjs: JSEP). */
export async function load(url, executionProvider, hideSubgroups = false) {
  if (hideSubgroups) { // the device ORT asks for gets no subgroups: its WGSL takes the paths without them
    const requestDevice = GPUAdapter.prototype.requestDevice;
    GPUAdapter.prototype.requestDevice = function (descriptor = {}) {
      const requiredFeatures = [...(descriptor.requiredFeatures ?? [])].filter((f) => !f.startsWith("subgroup"));
      return requestDevice.call(this, { ...descriptor, requiredFeatures });
    };
  }
  const module = await import(url);
  ort = module.default ?? module;
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = "error";
  provider = executionProvider;
  return ort.env.versions?.web ?? "";
}

export async function create(modelBase64) {
  const session = await ort.InferenceSession.create(bytesOf(modelBase64), {
    executionProviders: [provider], graphOptimizationLevel: "disabled", logSeverityLevel: 3,
    extra: { session: { disable_cpu_ep_fallback: "1" } } });
  const id = nextId++;
  sessions.set(id, session);
  return id;
}

export async function run(id, feeds) {
  const inputs = {};
  for (const [name, t] of Object.entries(feeds)) {
    const bytes = bytesOf(t.base64);
    inputs[name] = new ort.Tensor(t.type, new ARRAYS[t.type](bytes.buffer), t.dims);
  }
  const results = await sessions.get(id).run(inputs);
  const outputs = {};
  for (const [name, tensor] of Object.entries(results)) {
    outputs[name] = { type: tensor.type, dims: [...tensor.dims], base64: base64Of(tensor.data) };
    tensor.dispose?.();
  }
  return outputs;
}

export async function release(id) {
  await sessions.get(id)?.release();
  sessions.delete(id);
}
