// ONNX Runtime Web 1.30's native WebGPU execution provider (onnxruntime-web/webgpu: WGSL programs
// written in C++, compiled to wasm) as attest kernels, in headless Chromium's WebGPU:
//   attest certify --kernel-cmd "node js/attest-kernel/serve.js ci/examples/webgpu/ort_webgpu.mjs:gqaPrompt"
// The operators and their models are ci/examples/onnxruntime's; what each declares here is what
// the WebGPU programs were found to do (ci/results/webgpu_certificates/README.md).
import { openOrtPage } from "./ort_browser.mjs";
import { ortWebgpuKernels } from "./ort_declarations.mjs";

const browser = await openOrtPage("ort.webgpu.bundle.min.mjs", "webgpu");
export const { gqaPrompt, gqaPromptSoftcap, gqaDecode, mhaSelf } = ortWebgpuKernels(browser.runtime("webgpu"), "ortgpu", browser.identity);
