#!/usr/bin/env python3
"""An attention kernel in numpy, served to attest by the attest_kernel package (python/).

Certify it with:  attest certify --kernel-cmd "python3 ci/examples/process_python/numpy_kernel.py"
Scores and weighted sums run in float32; exp and log in float64, rounded to float32.
Score modifiers: the additive bias (broadcast over batch and/or heads, -inf masks a key).
The protocol (frames, the declaration, errors) is the package's; this file is the kernel.
"""
import os
import sys

import numpy as np


# The checkout's python/ (a copy of this script elsewhere is run with PYTHONPATH naming it).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
from attest_kernel import Contract, Declaration, apply_rope, serve  # noqa: E402


# The contract: head widths 1..256 and lengths up to 4096 (the scores are materialized); anything
# else attest never sends. Storage and arithmetic: float32 (the default Precision).
DECLARATION = Declaration(
    name="example-numpy",
    features=["causal", "window", "key_padding", "query_padding", "segments", "explicit_mask", "gqa", "lse", "rope",
              "chunk", "bias"],
    empty_rows="zero",
    contract=Contract(head_dim=(1, 256), q_len=(1, 4096), k_len=(1, 4096)),
)


def attention(problem):
    B, H, Tq, Tk = problem.batch, problem.heads, problem.q_len, problem.k_len
    q, k, v = problem.q, problem.k, problem.v  # float32 [B][H][Tq][Dk], [B][Hkv][Tk][Dk], [B][Hkv][Tk][Dv]
    if problem.rope:
        q, k = apply_rope(q, problem.q_positions(), problem.rope_base), apply_rope(
            k, problem.k_positions(), problem.rope_base)
    k, v = problem.repeat_kv(k), problem.repeat_kv(v)  # query head h reads kv head h // (H / Hkv)

    # Causal, window, chunk, key and query padding, segments, the explicit mask: [B][Tq][Tk].
    mask = np.broadcast_to(problem.visible()[:, None, :, :], (B, H, Tq, Tk))
    bias, bias_per_batch, bias_per_head = problem.bias, problem.bias_per_batch, problem.bias_per_head
    if bias is not None:  # numpy broadcasting does the rest: a dimension of 1 serves every batch entry or head
        bias = bias.reshape(B if bias_per_batch else 1, H if bias_per_head else 1, Tq, Tk)
        # A -inf entry masks its key: decided here, before the score is read, so a NaN or inf in
        # that key's K row never meets it (-inf + NaN would be NaN, not "masked").
        mask = mask & (bias != -np.inf)

    scores = np.matmul(q, k.transpose(0, 1, 3, 2)) * np.float32(problem.scale)
    if bias is not None:
        scores = scores + bias  # the logit: scale * q.k + bias (no softcap or ALiBi declared)
    scores = np.where(mask, scores, -np.inf).astype(np.float32)
    empty = ~mask.any(axis=-1)
    row_max = np.where(empty, 0.0, scores.max(axis=-1, initial=-np.inf, where=mask))
    weights = np.where(mask, np.exp((scores - row_max[..., None]).astype(np.float64)), 0.0).astype(np.float32)
    total = weights.sum(axis=-1, dtype=np.float32)
    safe_total = np.where(empty, np.float32(1), total)
    # A matmul multiplies every V row, masked or not: 0 * NaN would leak a masked row's poison
    # (first into every row when no query of the slice saw the key; then, caught again by the
    # row-wise poisoning check, into the rows that mask a key another row sees). So each query row
    # gets its own copy of V with its masked rows zeroed.
    v_rows = np.where(mask[..., None], v[:, :, None, :, :], np.float32(0))
    o = np.einsum("bhqk,bhqkd->bhqd", weights / safe_total[..., None], v_rows).astype(np.float32)
    o[empty] = 0.0
    lse = np.where(empty, -np.inf, row_max + np.log(safe_total.astype(np.float64))).astype(np.float32)
    return o, lse, "numpy"  # the path that served the call


if __name__ == "__main__":
    sys.exit(serve(attention, DECLARATION))
