// attest's own WGSL attention kernel, served from headless Chromium's WebGPU:
//   node js/attest-kernel/browser.js ci/examples/webgpu/flash.mjs:flash
// Its declaration says what flash.wgsl.mjs computes: every integer mask term, padding, segments,
// GQA, LSE, softcap, ALiBi and sinks, in f32, head widths up to D_MAX.
import { D_MAX, flashWgsl } from "./flash.wgsl.mjs";
import { runFlash } from "./dispatch.mjs";

export const FLASH_DECLARATION = {
  name: "wgsl-flash",
  features: ["causal", "window", "chunk", "lookahead", "key_padding", "query_padding", "segments", "gqa", "lse",
    "softcap", "alibi", "sinks"],
  contract: { head_dim: [1, D_MAX], q_offset: [-(2 ** 30), 2 ** 30] },
};

/** A browser-host kernel computing with the WGSL that `edits` makes of flash.wgsl.mjs. */
export function flashKernel(name, edits = [], path = "tiled") {
  const source = flashWgsl(edits);
  return {
    declaration: { ...FLASH_DECLARATION, name },
    forward: async (problem, device) => ({ ...(await runFlash(device, source, problem)), path }),
  };
}

export const flash = flashKernel("wgsl-flash");
