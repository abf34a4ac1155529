"""attention_reference.py: the float64 references of the chapter's Python programs (flash_triton.py,
flash_triton_bench.py, sdpa_torch.py), the counterpart of attention_common.cuh's: the exact
forward and backward, and the same computations rounded where a bf16 kernel rounds, which the checks
(course_tools.check_scaled) take their tolerance from.

Taught in docs/attention/triton.md. Layout (batch, heads, seq, dim), computed in float64 on the
inputs' device (the GPU in the GPU programs: the benchmark size takes seconds there), a few heads at
a time. Conventions as the CUDA programs': a masked score is -inf and contributes 0, a query row with
every key masked gives zeros, a NaN in a score propagates to its row.

# course: header
"""

import math

import torch


def round_bf16(x: torch.Tensor, truncate: bool = False) -> torch.Tensor:
    """x (float64) through fp32 to bf16 and back: to nearest even, as the GPU converts, or, with
    truncate, toward zero, as Triton's interpreter converts fp32 to bf16 (it drops the low 16 bits)."""
    f = x.float()
    if truncate:
        return (f.view(torch.int32) & -65536).view(torch.float32).double()
    return f.bfloat16().double()


def _weights(q, k, causal, kv_len, batch_of):
    """p = exp(s - rowmax) of the scaled scores of a few heads (0 where masked) and its row sums."""
    seq = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    keep = torch.ones(seq, seq, dtype=torch.bool, device=q.device)
    if causal:
        keep = keep.tril()                                  # query i sees keys 0..i
    keep = keep.expand(q.shape[0], seq, seq)
    if kv_len is not None:                                  # key padding: keys >= kv_len[b] are masked
        lengths = kv_len.to(q.device).long()[batch_of]
        keep = keep & (torch.arange(seq, device=q.device) < lengths[:, None, None])
    scores = scores.masked_fill(~keep, -math.inf)
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(row_max == -math.inf, 0.0, row_max)  # all masked: exp(-inf - 0) = 0, no NaN
    p = (scores - row_max).exp()
    return p, p.sum(dim=-1, keepdim=True)


# --8<-- [start:forward]
def forward(q, k, v, causal: bool, kv_len=None, rounding=None):
    """softmax(Q K^T / sqrt(d)) V in float64. With `rounding` (float64 -> float64, a format's
    rounding), also the output computed as the fused bf16 kernels compute it: each weight p rounded
    before P V, the row sum of the unrounded p, the output rounded. Returns (exact, rounded or None)."""
    batch, heads, seq, dim = q.shape
    q, k, v = (t.detach().double().reshape(batch * heads, seq, dim) for t in (q, k, v))
    exact = torch.empty_like(q)
    rounded = torch.empty_like(q) if rounding else None
    step = max(1, (1 << 26) // max(1, seq * seq))            # heads at a time: scores of 512 MiB at most
    for h0 in range(0, batch * heads, step):
        h = slice(h0, h0 + step)
        batch_of = torch.arange(h0, min(h0 + step, batch * heads), device=q.device) // heads
        p, total = _weights(q[h], k[h], causal, kv_len, batch_of)
        total = torch.where(total == 0, 1.0, total)            # only a fully masked row sums to 0
        exact[h] = p @ v[h] / total
        if rounding:
            rounded[h] = rounding(rounding(p) @ v[h] / total)
    shape = (batch, heads, seq, dim)
    return exact.reshape(shape), rounded.reshape(shape) if rounding else None
# --8<-- [end:forward]


# --8<-- [start:backward]
def backward(q, k, v, d_out, causal: bool, rounding):
    """The gradients dQ, dK, dV of O = softmax(Q K^T / sqrt(d)) V against dO, in float64, exact and
    as a fused bf16 backward computes them (attention_common.cuh's version 2): delta = rowsum(dO o O)
    from the rounded forward's bf16 O, P rounded before dV = P^T dO, dS = P o (dP - delta) rounded
    before dQ = scale dS K and dK = scale dS^T Q, every gradient rounded. No padding; for the small
    sizes sdpa_torch.py checks. Returns (exact, rounded): two tuples (dQ, dK, dV)."""
    batch, heads, seq, dim = q.shape
    q, k, v, d_out = (t.detach().double().reshape(batch * heads, seq, dim) for t in (q, k, v, d_out))
    scale = 1.0 / math.sqrt(dim)
    p_raw, total = _weights(q, k, causal, None, None)
    p = p_raw / total                                        # every row sees key 0: no zero sums
    out_low = rounding(rounding(p_raw) @ v / total)          # the rounded forward's output
    d_p = d_out @ v.transpose(-1, -2)

    def grads(p_in, ds, finish):
        return tuple(finish(g).reshape(batch, heads, seq, dim)
                     for g in (scale * ds @ k, scale * ds.transpose(-1, -2) @ q, p_in.transpose(-1, -2) @ d_out))

    delta = (d_out * (p @ v)).sum(-1, keepdim=True)
    exact = grads(p, p * (d_p - delta), lambda g: g)
    delta_low = (d_out * out_low).sum(-1, keepdim=True)
    low = grads(rounding(p), rounding(p * (d_p - delta_low)), rounding)
    return exact, low
# --8<-- [end:backward]
