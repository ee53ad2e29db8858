"""Problem.visible() against docs/design.md#problem-semantics, key by key."""
import itertools

import numpy as np
import pytest

from attest_kernel import Declaration, Problem, apply_rope

DECLARATION = Declaration(name="k", features=["causal", "window", "chunk", "lookahead", "key_padding", "query_padding",
                                              "segments", "explicit_mask", "bias"])


def problem(**fields):
    base = dict(batch=2, heads=2, kv_heads=1, q_len=5, k_len=7, head_dim=2, value_dim=2, scale=1.0, q_offset=2,
                causal=False, window=0, chunk=0, lookahead=0, rope=False, rope_base=10000.0, kv_valid=None,
                q_valid=None, q_segment=None, k_segment=None, explicit_mask=None, softcap=0.0, alibi_slopes=None,
                bias=None, bias_per_batch=True, bias_per_head=True, sinks=None, q=None, k=None, v=None)
    base.update(fields)
    return Problem(base, DECLARATION)


def brute_force(p, b, i, j):
    qpos = p.q_offset + i
    return ((not p.causal or j <= qpos) and (not p.window or qpos - j < p.window)
            and (not p.chunk or qpos // p.chunk == j // p.chunk) and (not p.lookahead or j - qpos < p.lookahead)
            and (p.kv_valid is None or j < p.kv_valid[b]) and (p.q_valid is None or i < p.q_valid[b])
            and (p.q_segment is None or p.q_segment[b][i] == p.k_segment[b][j])
            and (p.explicit_mask is None or p.explicit_mask[b][i][j]))


@pytest.mark.parametrize("terms", [
    dict(),
    dict(causal=True),
    dict(causal=True, q_offset=-3),  # queries before the first key
    dict(window=2, causal=True),
    dict(chunk=3, q_offset=-4),  # floor division of negative positions
    dict(lookahead=2),
    dict(kv_valid=np.array([3, 7]), q_valid=np.array([5, 1])),
    dict(q_segment=np.array([[0, 0, 1, 1, 2]] * 2), k_segment=np.array([[0, 1, 1, 2, 2, 2, 3]] * 2)),
    dict(explicit_mask=np.random.default_rng(1).random((2, 5, 7)) < 0.5, causal=True, window=3),
])
def test_visible_matches_the_definition(terms):
    p = problem(**terms)
    mask = p.visible()
    assert mask.shape == (2, 5, 7) and mask.dtype == bool
    for b, i, j in itertools.product(range(2), range(5), range(7)):
        assert mask[b, i, j] == brute_force(p, b, i, j), (b, i, j)


def test_visible_with_bias_masks_minus_infinity():
    bias = np.zeros((1, 2, 5, 7), np.float32)
    bias[0, 1, 0, 3] = -np.inf
    p = problem(bias=bias, bias_per_batch=False, causal=True)
    mask = p.visible(bias=True)
    assert mask.shape == (2, 2, 5, 7)
    assert mask[0, 0, 0, 2] and not mask[0, 1, 0, 3] and not mask[1, 1, 0, 3] and mask[0, 0, 4, 3]
    np.testing.assert_array_equal(mask[:, 0], p.visible())


def test_rope_rotates_pairs():
    x = np.array([[[1.0, 0.0, 1.0, 0.0]]], np.float64)  # [1][T=1][D=4]
    out = apply_rope(x, np.array([1]), 10000.0)
    np.testing.assert_allclose(out[0, 0], [np.cos(1), np.sin(1), np.cos(0.01), np.sin(0.01)])
    assert apply_rope(np.ones((1, 3), np.float32), np.array([0]), 10.0).dtype == np.float32  # odd width: last stays
