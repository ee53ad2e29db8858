"""Python kernels that merge partial attention states (ABI 2.6): the exact log-sum-exp merge, and
one that reads the O of a part that saw no key (0 x NaN), as merges that weight instead of skip do."""
import numpy as np

from attest_kernel import Declaration, declare
from training_kernels import FEATURES, forward


def _merge(o, lse, skip_empty=True):
    """o [parts][rows][Dv], lse [parts][rows] -> o [rows][Dv], lse [rows], in float64; a part that
    saw no key of a row (lse -inf, its o NaN) is skipped, a row no part saw is o 0, lse -inf."""
    lse = lse.astype(np.float64)
    seen = np.isfinite(lse)
    m = np.where(seen, lse, -np.inf).max(axis=0)
    empty = ~np.isfinite(m)
    shift = np.where(empty, 0.0, m)
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.where(seen, np.exp(lse - shift), 0.0)
        total = w.sum(axis=0)
        parts_o = np.where(seen[..., None], o.astype(np.float64), 0.0) if skip_empty else o.astype(np.float64)
        weighted = (w[..., None] * parts_o).sum(axis=0)
        merged = np.where(empty[:, None], 0.0, weighted / np.where(empty, 1.0, total)[:, None])
        merged_lse = np.where(empty, -np.inf, shift + np.log(np.where(empty, 1.0, total)))
    return merged, merged_lse


def exact_merge(o, lse):
    return _merge(o, lse)


def merge_reading_empty_parts(o, lse):
    return _merge(o, lse, skip_empty=False)


def _kernel(name, merge):
    """The float64 forward of training_kernels, declared with `merge`."""
    def attention(p):
        return forward(p)
    return declare(Declaration(name=name, features=FEATURES, merge=merge))(attention)


merging = _kernel("numpy-merge", exact_merge)
merging_empty_nan = _kernel("numpy-merge-empty-nan", merge_reading_empty_parts)
