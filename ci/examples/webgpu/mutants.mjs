// Three WGSL mutants of flash.mjs's kernel, each one edit of flash.wgsl.mjs, each NOT CERTIFIED:
//   lastTileSkipped   the key loop stops before a last, partial key tile (Tk % 16 keys ignored)
//   maxNotRescaled    O and l are not rescaled when the running max grows
//   maskedVTimesZero  masked keys are weighted 0 instead of skipped: 0 x a poisoned V is NaN
import { flashKernel } from "./flash.mjs";

export const lastTileSkipped = flashKernel("wgsl-last-tile", [
  ["let key_tiles = (p.k_len + BC - 1u) / BC;", "let key_tiles = p.k_len / BC;"]]);

export const maxNotRescaled = flashKernel("wgsl-no-rescale", [["let alpha = exp_shifted(m - m_new, 0);", "let alpha = 1.0;"]]);

export const maskedVTimesZero = flashKernel("wgsl-masked-v", [
  ["        if (s > HIDDEN) {\n          let x = s - m_new;", "        {\n          let x = s - m_new; // a hidden key: weight 0"]]);
