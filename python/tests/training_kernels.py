"""Python training kernels for attest's gradient checks: numpy forward and backward (exact, and
with a wrong dQ), and torch autograd of a torch attention."""
import numpy as np

from attest_kernel import Declaration, Unsupported, declare

FEATURES = ["causal", "window", "key_padding", "query_padding", "segments", "explicit_mask", "chunk", "lookahead",
            "gqa", "lse"]


def _inputs(p):
    """q, and k and v repeated to the query heads, float64; a key no query may see can hold NaN or
    inf (attest poisons masked keys): zero, so that 0 weights keep it out of every product."""
    q = p.float32("q").astype(np.float64)
    k, v = (np.nan_to_num(p.repeat_kv(p.float32(n)).astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
            for n in ("k", "v"))
    return q, k, v


def _probabilities(p, lse):
    """P [B][H][Tq][Tk] float64 from the scores and the given lse (0 where masked or the row is empty)."""
    q, k, _ = _inputs(p)
    s = p.scale * q @ k.swapaxes(-1, -2)
    visible = p.visible()[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        w = np.where(visible & np.isfinite(lse[..., None]), np.exp(s - lse[..., None]), 0.0)
    return w


def forward(p):
    q, k, v = _inputs(p)
    s = np.where(p.visible()[:, None], p.scale * q @ k.swapaxes(-1, -2), -np.inf)
    m = s.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(m)
    w = np.exp(s - np.where(empty, 0.0, m))
    total = w.sum(axis=-1, keepdims=True)
    o = np.where(empty, 0.0, w @ v / np.where(empty, 1.0, total))
    lse = np.where(empty, -np.inf, np.log(np.where(empty, 1.0, total)) + m)[..., 0]
    return o, lse


def gradients(p, grad, dq_factor=1.0):
    P = _probabilities(p, grad.lse.astype(np.float64))
    d_o, o = grad.d_o.astype(np.float64), grad.o.astype(np.float64)
    q, k, v = _inputs(p)
    dv = P.swapaxes(-1, -2) @ d_o
    dp = d_o @ v.swapaxes(-1, -2)
    ds = P * (dp - (d_o * o).sum(axis=-1, keepdims=True))
    dq = dq_factor * p.scale * ds @ k
    dk = p.scale * ds.swapaxes(-1, -2) @ q
    group = p.heads // p.kv_heads

    def per_kv_head(x):  # GQA: the sum over each kv head's query heads
        return x.reshape(p.batch, p.kv_heads, group, *x.shape[2:]).sum(axis=2)
    return dq, per_kv_head(dk), per_kv_head(dv)


def wrong_gradients(p, grad):
    return gradients(p, grad, dq_factor=1.01)


@declare(Declaration(name="numpy-training", features=FEATURES, backward=gradients))
def training(p):
    return forward(p)


@declare(Declaration(name="numpy-wrong-dq", features=FEATURES, backward=wrong_gradients))
def wrong_dq(p):
    return forward(p)


def gradients_to_100_keys(p, grad):
    if p.k_len > 100:
        raise Unsupported("no backward past 100 keys")  # inside its contract: a failure, not a skip
    return gradients(p, grad)


@declare(Declaration(name="numpy-backward-to-100", features=FEATURES, backward=gradients_to_100_keys))
def backward_to_100(p):
    return forward(p)


def _torch_attention(torch, p, q, k, v):
    group = p.heads // p.kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = p.scale * q @ k.transpose(-1, -2)
    visible = torch.from_numpy(np.ascontiguousarray(p.visible()[:, None]))
    s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    w = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)
    return w @ v, lse


def torch_gradients(p, grad):
    import torch
    q, k, v = (torch.from_numpy(np.nan_to_num(p.float32(n).astype(np.float64), posinf=0.0, neginf=0.0)).requires_grad_()
               for n in ("q", "k", "v"))
    o, _ = _torch_attention(torch, p, q, k, v)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), grad_outputs=torch.from_numpy(grad.d_o.astype(np.float64)))
    return dq.numpy(), dk.numpy(), dv.numpy()


@declare(Declaration(name="torch-autograd", features=FEATURES, backward=torch_gradients))
def torch_training(p):
    import torch
    with torch.no_grad():
        q, k, v = (torch.from_numpy(np.nan_to_num(p.float32(n).astype(np.float64), posinf=0.0, neginf=0.0))
                   for n in ("q", "k", "v"))
        o, lse = _torch_attention(torch, p, q, k, v)
    return o.numpy(), lse.numpy()
