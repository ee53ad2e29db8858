"""PyTorch 1.13's CPU attention, served to attest as it ships (Debian 12's python3-torch).

    attest certify --kernel-cmd "python3 -m attest_kernel serve python/examples/torch_attention.py:FUNCTION"

Every FUNCTION below calls one torch entry point and declares what that entry point supports:

  mha_forward*      torch.nn.functional.multi_head_attention_forward as pure attention: identity in/out
                    projections (exact: x*1 + 0 + ... is x), attn_mask (bool, or float = an additive bias)
                    and key_padding_mask, need_weights=False.
  mha_module_fast*  torch.nn.MultiheadAttention(batch_first=True).eval() under no_grad, with the
                    conditions of its fast path met; the kernel checks torch._native_multi_head_attention
                    really ran and names the path it served.
  native_mha        torch._native_multi_head_attention (the fast path's op) called directly with
                    distinct q, k, v: the same C++ kernel, fed what the module cannot pass it.
  sdpa*             torch._C._nn._scaled_dot_product_attention, 1.13's private scaled-dot-product
                    attention (torch.nn.functional._scaled_dot_product_attention): bool attn_mask,
                    is_causal (top-left, so used when q_offset == 0), a float mask (undocumented).

What every one of them shares (read from torch 1.13's source and checked on this build):
  - the scale is hard-coded, q / sqrt(head_dim) before the q.k product: default_scale_only;
  - a row that sees no key gives NaN (softmax of all -inf): empty_rows="nan"; no LSE is returned;
  - no GQA (one K/V head per query head); multi_head_attention_forward and the fast path need Dv == Dk.
Each function has a variant declaring inputs_finite (*_finite) beside the honest one, to see what
else holds once NaN / inf inputs are ruled out. What attest found (ci/results/torch_certificates/):
the additive -inf masks let a masked key's NaN / inf K (and, with finite inputs, a masked score that
overflows to +inf) turn the row into NaN; the fast path's masked_softmax ignores masked scores but
its P.V matmul still multiplies 0 by a masked V row's NaN / inf; a float attn_mask with a float
key_padding_mask drops the padding; bf16 bmm accumulates in bf16 and flushes bf16 subnormals.
"""
import contextlib
import os

import numpy as np

# torch 1.13's oneDNN runs AMX tiles on a CPU that has them (Sapphire Rapids) without asking Linux
# for them first (arch_prctl ARCH_REQ_XCOMP_PERM), and the kernel process dies of SIGILL. Capped at
# AVX512-BF16 it runs the GEMMs the recorded certificates were measured with.
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
import torch  # noqa: E402  (after the ISA cap, which oneDNN reads when first used)
import torch.nn.functional as F  # noqa: E402

from attest_kernel import Contract, Declaration, Precision, declare  # noqa: E402

torch.set_num_threads(1)  # attest runs the checks; one thread keeps the kernel's rounding order fixed

# bf16 storage as torch 1.13 computes it on CPU: each bmm rounds its result to bf16, so the scores
# are materialised in bf16 and P (softmax's output) is bf16; the small-matrix and matrix-vector bmm
# kernels accumulate in bf16 itself (measured: P.V over 1024 keys into one column is off by 1.4 where
# an f32 accumulator is off by 0.01), so the accumulator is declared bf16; the softmax sums in f32.
# attest's "scores" field models q.k *accumulated* in bf16: where torch's GEMM accumulates in f32 and
# rounds the score once (and q * 1/sqrt(Dk) once, to bf16, before the product), "bf16" is coarser.
BF16 = Precision.stored("bf16", scores="bf16", p="bf16", accumulator="bf16", weight_sum="f32")
# What a user would expect of a bf16 kernel: f32 accumulation (kept to show what attest finds).
BF16_F32_ACCUMULATOR = Precision.stored("bf16", scores="bf16", p="bf16", accumulator="f32")

MASKS = ["causal", "key_padding", "explicit_mask"]


# --- helpers ---------------------------------------------------------------------------------------

def _tensors(p):
    """q [B][H][Tq][Dk], k, v as torch tensors of their storage type."""
    return p.torch("q"), p.torch("k"), p.torch("v")


def _allowed(p, key_padding=True):
    """[B][Tq][Tk] bool, True where the key is visible: causal (bottom-right, q_offset), the explicit
    mask, and (key_padding=True) the key padding. None when everything is visible."""
    B, Tq, Tk = p.batch, p.q_len, p.k_len
    allowed = np.ones((B, Tq, Tk), dtype=bool)
    if p.causal:
        allowed &= (p.k_positions()[None, :] <= p.q_positions()[:, None])[None]
    if p.explicit_mask is not None:
        allowed &= p.explicit_mask.astype(bool)
    if key_padding and p.kv_valid is not None:
        allowed &= np.arange(Tk)[None, None, :] < np.asarray(p.kv_valid)[:, None, None]
    return None if allowed.all() else torch.from_numpy(allowed)


def _padding(p):
    """key_padding_mask [B][Tk] bool, True = ignore the key (torch's convention), or None."""
    if p.kv_valid is None:
        return None
    return torch.from_numpy(np.arange(p.k_len)[None, :] >= np.asarray(p.kv_valid)[:, None])


def _bias(p, dtype):
    """The additive score term [B or 1][H or 1][Tq][Tk] (float, -inf masks), or None."""
    if p.bias is None:
        return None
    bias = p.torch("bias").to(dtype)
    return bias.reshape(p.batch if p.bias_per_batch else 1, p.heads if p.bias_per_head else 1, p.q_len, p.k_len)


def _float_mask(allowed, bias, shape, dtype):
    """Float attn_mask of `shape` [B][H][Tq][Tk]: the bias, -inf where not allowed; None if neither."""
    if allowed is None and bias is None:
        return None
    mask = torch.zeros(shape, dtype=dtype)
    if bias is not None:
        mask = mask + bias
    if allowed is not None:
        mask = mask.masked_fill(~allowed[:, None], float("-inf"))
    return mask


def _eye(n, dtype):
    return torch.eye(n).to(dtype)  # torch.eye has no bf16 kernel on CPU in 1.13


# --- a. torch.nn.functional.multi_head_attention_forward -------------------------------------------

def _mha_forward(p, float_mask=False, float_padding=None):
    """Identity projections, no biases: q, k and v reach the attention unchanged and the output
    projection returns it unchanged (each is x*1 plus exact zeros), (L, N, E) layout.
    Bool masks: N = B, num_heads = H, E = H * Dk (torch splits and merges the heads).
    float_mask: attn_mask float (the bias, -inf for causal / explicit) instead of bool, and the heads
    passed as batch entries (N = B * H, num_heads = 1, E = Dk): a per-head bias can empty one head's
    row, whose NaN the identity out-projection would carry into the other heads' outputs of that
    token (0 * NaN); torch reshapes to (N * num_heads, L, Dk) inside anyway.
    float_padding: key_padding_mask float (-inf where padded) instead of bool (default: as attn_mask)."""
    q, k, v = _tensors(p)
    B, H, Tq, Tk, D = p.batch, p.heads, p.q_len, p.k_len, p.head_dim
    dtype = q.dtype
    N, heads = (B * H, 1) if float_mask else (B, H)
    E = heads * D

    def layout(t):  # [B][H][T][D] -> (T, N, E)
        return t.permute(2, 0, 1, 3).reshape(t.shape[2], N, E)

    query, key, value = layout(q), layout(k), layout(v)
    allowed = _allowed(p, key_padding=False)
    padding = _padding(p)
    if float_mask:
        # attn_mask float (N * num_heads = B * H, L, S), added to the scores.
        mask = _float_mask(allowed, _bias(p, dtype), (B, H, Tq, Tk), dtype)
        attn_mask = None if mask is None else mask.expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
        if padding is not None:
            padding = padding[:, None].expand(B, H, Tk).reshape(B * H, Tk)
    else:
        # attn_mask bool (N * num_heads = B * H, L, S), True = not allowed (torch's convention).
        attn_mask = None if allowed is None else (~allowed)[:, None].expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
    if padding is not None and (float_mask if float_padding is None else float_padding):
        # key_padding_mask float (N, S): "directly added" (torch's docstring): -inf where padded.
        padding = torch.zeros(padding.shape, dtype=dtype).masked_fill(padding, float("-inf"))
    eye = _eye(E, dtype)
    out, _ = F.multi_head_attention_forward(
        query, key, value, E, heads, in_proj_weight=None, in_proj_bias=None, bias_k=None, bias_v=None,
        add_zero_attn=False, dropout_p=0.0, out_proj_weight=eye, out_proj_bias=None, training=False,
        key_padding_mask=padding, need_weights=False, attn_mask=attn_mask, use_separate_proj_weight=True,
        q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye)
    return out.reshape(Tq, B, H, D).permute(1, 2, 0, 3)  # [B][H][Tq][Dv]


_MHA = Contract(dk_equals_dv=True, default_scale_only=True)
_MHA_FINITE = Contract(dk_equals_dv=True, default_scale_only=True, inputs_finite=True)


@declare(Declaration(name="torch1.13-F.mha_forward-boolmask", features=MASKS, empty_rows="nan", contract=_MHA))
def mha_forward(p):
    return _mha_forward(p)


@declare(Declaration(name="torch1.13-F.mha_forward-boolmask-finite", features=MASKS, empty_rows="nan",
                     contract=_MHA_FINITE))
def mha_forward_finite(p):
    return _mha_forward(p)


@declare(Declaration(name="torch1.13-F.mha_forward-floatmask", features=MASKS + ["bias"], empty_rows="nan",
                     contract=_MHA))
def mha_forward_float_mask(p):
    return _mha_forward(p, float_mask=True)


# Float attn_mask with a *bool* key_padding_mask (torch merges them with masked_fill, which needs a
# bool mask: see README), finite inputs: what else holds for the float (bias) path.
@declare(Declaration(name="torch1.13-F.mha_forward-floatmask-boolpad-finite", features=MASKS + ["bias"],
                     empty_rows="nan", contract=_MHA_FINITE))
def mha_forward_float_mask_bool_padding_finite(p):
    return _mha_forward(p, float_mask=True, float_padding=False)


@declare(Declaration(name="torch1.13-F.mha_forward-boolmask-bf16", features=MASKS, empty_rows="nan",
                     precision=BF16, contract=_MHA))
def mha_forward_bf16(p):
    return _mha_forward(p)


@declare(Declaration(name="torch1.13-F.mha_forward-boolmask-bf16-finite", features=MASKS, empty_rows="nan",
                     precision=BF16, contract=_MHA_FINITE))
def mha_forward_bf16_finite(p):
    return _mha_forward(p)


# --- b. torch.nn.MultiheadAttention's fast path ------------------------------------------------------

class _FastPathSpy:
    """Wraps torch._native_multi_head_attention (the module looks it up at call time) and counts calls."""

    def __init__(self):
        self.calls = 0
        self.native = torch._native_multi_head_attention

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.native(*args, **kwargs)

    @contextlib.contextmanager
    def watching(self):
        torch._native_multi_head_attention = self
        try:
            yield
        finally:
            torch._native_multi_head_attention = self.native


_SPY = _FastPathSpy()
_MODULES = {}


def _module(heads, embed, dtype):
    """nn.MultiheadAttention(embed, heads, batch_first=True), eval, zero biases (bias=False crashes the
    fast path in 1.13: it passes in_proj_bias=None to an op that needs a tensor), and the projections
    set by _fast_path. Cached per shape."""
    key = (heads, embed, dtype)
    if key not in _MODULES:
        module = torch.nn.MultiheadAttention(embed, heads, batch_first=True, bias=True).eval().to(dtype)
        for parameter in module.parameters():
            parameter.requires_grad_(False)
        _MODULES[key] = module
    return _MODULES[key]


def _fast_path(p):
    """The module's fast path runs only for self-attention with one tensor (query is key is value), an
    even head count and no attn_mask (key_padding_mask only). attest's q, k and v are three arrays, so
    the token t of x carries all three: x[b, t] = [q_t | k_t | v_t | 0 pad], width E' = H' * Dk with
    H' = 3H (+1 if odd) heads; the in-projection selects q_t, k_t, v_t into heads 0..H-1 (the other
    heads see zeros and are dropped), the out-projection is the identity. Exact for finite inputs; a
    NaN or inf anywhere in x[b, t] reaches every projection of token t (0 * NaN), so these kernels
    declare inputs_finite: a poisoned key is a poisoned query for this module anyway."""
    q, k, v = _tensors(p)
    B, H, T, D = p.batch, p.heads, p.q_len, p.head_dim
    dtype, HD = q.dtype, H * D
    heads = 3 * H + (3 * H) % 2
    E = heads * D
    module = _module(heads, E, dtype)
    select = torch.zeros(3 * E, E, dtype=dtype)
    for part in range(3):  # q, k, v rows of in_proj_weight pick their third of x
        select[part * E + torch.arange(HD), part * HD + torch.arange(HD)] = 1
    module.in_proj_weight.copy_(select)
    module.in_proj_bias.zero_()
    module.out_proj.weight.copy_(_eye(E, dtype))
    module.out_proj.bias.zero_()
    x = torch.zeros(B, T, E, dtype=dtype)
    for part, t in enumerate((q, k, v)):
        x[:, :, part * HD:(part + 1) * HD] = t.permute(0, 2, 1, 3).reshape(B, T, HD)
    calls = _SPY.calls
    with _SPY.watching():
        out, _ = module(x, x, x, key_padding_mask=_padding(p), need_weights=False)
    if _SPY.calls != calls + 1:
        raise RuntimeError("torch._native_multi_head_attention did not run: the module took its slow path")
    o = out[:, :, :HD].reshape(B, T, H, D).permute(0, 2, 1, 3)
    return o, None, "native-fast-path"


_FAST = Contract(dk_equals_dv=True, default_scale_only=True, self_attention_only=True, inputs_finite=True)


@declare(Declaration(name="torch1.13-nn.MultiheadAttention-fast-path", features=["key_padding"],
                     empty_rows="nan", contract=_FAST))
def mha_module_fast(p):
    return _fast_path(p)


@declare(Declaration(name="torch1.13-nn.MultiheadAttention-fast-path-bf16", features=["key_padding"],
                     empty_rows="nan", precision=BF16, contract=_FAST))
def mha_module_fast_bf16(p):
    return _fast_path(p)


def _native(p):
    """torch._native_multi_head_attention(query, key, value, ...) itself, q, k, v distinct: identity
    in-projection [I; I; I] with zero bias, identity out-projection, key padding as mask type 1."""
    q, k, v = _tensors(p)
    B, H, Tq, D = p.batch, p.heads, p.q_len, p.head_dim
    dtype, E = q.dtype, H * D
    eye = _eye(E, dtype)
    query, key, value = (t.permute(0, 2, 1, 3).reshape(B, t.shape[2], E) for t in (q, k, v))
    padding = _padding(p)
    out, _ = torch._native_multi_head_attention(
        query, key, value, E, H, torch.cat([eye, eye, eye]), torch.zeros(3 * E, dtype=dtype), eye,
        torch.zeros(E, dtype=dtype), padding, False, True, None if padding is None else 1)
    return out.reshape(B, Tq, H, D).permute(0, 2, 1, 3), None, "native-mha"


# The op checks query, key and value have one shape: Tq == Tk (self-attention shapes).
_NATIVE = Contract(dk_equals_dv=True, default_scale_only=True, self_attention_only=True)
_NATIVE_FINITE = Contract(dk_equals_dv=True, default_scale_only=True, self_attention_only=True, inputs_finite=True)


@declare(Declaration(name="torch1.13-native_multi_head_attention", features=["key_padding"], empty_rows="nan",
                     contract=_NATIVE))
def native_mha(p):
    return _native(p)


@declare(Declaration(name="torch1.13-native_multi_head_attention-finite", features=["key_padding"],
                     empty_rows="nan", contract=_NATIVE_FINITE))
def native_mha_finite(p):
    return _native(p)


# --- c. torch 1.13's scaled-dot-product attention (private) ----------------------------------------

def _sdpa(p, float_mask=False):
    """torch._C._nn._scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, need_attn_weights,
    is_causal) on [B][H][T][D]. is_causal is top-left (query i sees j <= i): used when it is the only
    mask and q_offset == 0; otherwise the bool attn_mask (True = take part) carries every mask term.
    float_mask: a float attn_mask (added to the scores; the docstring says bool only, the math path
    adds a float one) carrying the bias and -inf where masked."""
    q, k, v = _tensors(p)
    B, H, Tq, Tk = p.batch, p.heads, p.q_len, p.k_len
    sdpa = torch._C._nn._scaled_dot_product_attention
    if float_mask:
        mask = _float_mask(_allowed(p), _bias(p, q.dtype), (B, H, Tq, Tk), q.dtype)
        o, _ = sdpa(q, k, v, None if mask is None else mask.expand(B, H, Tq, Tk).contiguous(), 0.0, False, False)
        return o, None, "attn_mask"
    only_causal = p.causal and p.q_offset == 0 and p.explicit_mask is None and p.kv_valid is None
    if only_causal:
        o, _ = sdpa(q, k, v, None, 0.0, False, True)
        return o, None, "is_causal"
    allowed = _allowed(p)  # None: no mask term
    mask = None if allowed is None else allowed[:, None].expand(B, H, Tq, Tk).contiguous()
    o, _ = sdpa(q, k, v, mask, 0.0, False, False)
    return o, None, "attn_mask"


_SDPA = Contract(default_scale_only=True)
_SDPA_FINITE = Contract(default_scale_only=True, inputs_finite=True)


@declare(Declaration(name="torch1.13-_scaled_dot_product_attention", features=MASKS, empty_rows="nan",
                     contract=_SDPA))
def sdpa(p):
    return _sdpa(p)


@declare(Declaration(name="torch1.13-_scaled_dot_product_attention-finite", features=MASKS, empty_rows="nan",
                     contract=_SDPA_FINITE))
def sdpa_finite(p):
    return _sdpa(p)


@declare(Declaration(name="torch1.13-_sdpa-floatmask-finite", features=MASKS + ["bias"], empty_rows="nan",
                     contract=_SDPA_FINITE))
def sdpa_float_mask_finite(p):
    return _sdpa(p, float_mask=True)


@declare(Declaration(name="torch1.13-_scaled_dot_product_attention-bf16", features=MASKS, empty_rows="nan",
                     precision=BF16, contract=_SDPA))
def sdpa_bf16(p):
    return _sdpa(p)


@declare(Declaration(name="torch1.13-_scaled_dot_product_attention-bf16-finite", features=MASKS,
                     empty_rows="nan", precision=BF16, contract=_SDPA_FINITE))
def sdpa_bf16_finite(p):
    return _sdpa(p)


@declare(Declaration(name="torch1.13-_sdpa-bf16-f32acc-finite", features=MASKS, empty_rows="nan",
                     precision=BF16_F32_ACCUMULATOR, contract=_SDPA_FINITE))
def sdpa_bf16_f32_accumulator_finite(p):
    return _sdpa(p)
