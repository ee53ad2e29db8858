"""A causal, key-padded, grouped-query attention kernel in numpy, with LSE (float32 storage).
attest certify --kernel-cmd "python3 -m attest_kernel serve python/examples/causal_gqa.py:attention" """
import numpy as np
from attest_kernel import Contract, Declaration, declare


@declare(Declaration(name="numpy-causal-gqa", features=["causal", "key_padding", "gqa", "lse"],
                     contract=Contract(q_len=(1, 2048), k_len=(1, 2048))))  # scores are materialised
def attention(p):
    q, k, v = (x.astype(np.float64) for x in (p.q, p.repeat_kv(p.k), p.repeat_kv(p.v)))
    visible = p.visible()[:, None]                                  # [B][1][Tq][Tk]
    s = np.where(visible, p.scale * q @ k.swapaxes(-1, -2), -np.inf)
    m = np.maximum(s.max(axis=-1, keepdims=True), -1e300)          # finite even on an empty row
    w = np.exp(s - m)                                               # 0 where masked
    total = w.sum(axis=-1, keepdims=True)
    o = w @ np.nan_to_num(v) / np.maximum(total, 1e-300)            # masked keys may hold NaN or inf
    return o, np.log(total[..., 0]) + m[..., 0]                     # empty row: O = 0, LSE = -inf
