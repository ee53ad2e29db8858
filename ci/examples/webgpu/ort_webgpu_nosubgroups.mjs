// ort_webgpu.mjs's kernels on a device without the "subgroups" feature: ONNX Runtime's WGSL then
// takes its paths without subgroup operations (ci/results/webgpu_certificates/README.md, finding 1).
//   attest certify --kernel-cmd "node js/attest-kernel/serve.js ci/examples/webgpu/ort_webgpu_nosubgroups.mjs:gqaPrompt"
import { openOrtPage } from "./ort_browser.mjs";
import { ortWebgpuKernels } from "./ort_declarations.mjs";

const browser = await openOrtPage("ort.webgpu.bundle.min.mjs", "webgpu", true);
export const { gqaPrompt, gqaPromptSoftcap, gqaDecode, mhaSelf } = ortWebgpuKernels(browser.runtime("webgpu"), "ortnosg", browser.identity);
