// attest's layouts ([B][H][T][D], flat) to and from the [B][T][H*D] of com.microsoft operators,
// and the masks attest's mask terms become.

/** x [B][H][T][D] -> [B][T][H][D] (and back with swapHeadsAndTokens(x, B, T, H, D)); the same
 * array type (Float32Array, or Uint16Array of float16 bit patterns). */
export function swapHeadsAndTokens(x, B, H, T, D) {
  const out = new x.constructor(x.length);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let t = 0; t < T; t++) {
        const from = ((b * H + h) * T + t) * D;
        out.set(x.subarray(from, from + D), ((b * T + t) * H + h) * D);
      }
    }
  }
  return out;
}

/** [B][Tk] int32: 1 where key j < kv_valid[b]. */
export function keyPaddingMask(p) {
  const mask = new Int32Array(p.batch * p.k_len);
  for (let b = 0; b < p.batch; b++) for (let j = 0; j < p.k_len; j++) mask[b * p.k_len + j] = j < p.kv_valid[b] ? 1 : 0;
  return mask;
}

/** [B][Tq][Tk]: whether key j is visible to query i by the explicit mask and key padding (the
 * terms a served mask carries; causal goes to the operator's own flag). */
export function servedMask(p) {
  const { batch: B, q_len: Tq, k_len: Tk } = p;
  const mask = new Uint8Array(B * Tq * Tk).fill(1);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Tq; i++) {
      for (let j = 0; j < Tk; j++) {
        const at = (b * Tq + i) * Tk + j;
        if (p.explicit_mask && !p.explicit_mask[at]) mask[at] = 0;
        if (p.kv_valid && j >= p.kv_valid[b]) mask[at] = 0;
      }
    }
  }
  return mask;
}
