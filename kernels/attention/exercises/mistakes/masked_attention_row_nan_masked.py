"""A plausible wrong answer to the masked attention-row exercise (docs/attention/exercises.md):
the textbook softmax, exp(s - max) and o / l: a query whose every key is masked gets -inf - (-inf) =
NaN.
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:mistake]
@triton.jit
def attention_row_kernel(q_ptr, k_ptr, v_ptr, keep_ptr, out_ptr, N, D, scale,
                         BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(axis=0)
    n = tl.arange(0, BLOCK_N)
    d = tl.arange(0, BLOCK_D)
    tile_mask = (n[:, None] < N) & (d[None, :] < D)
    q = tl.load(q_ptr + row * D + d, mask=d < D, other=0.0)
    k = tl.load(k_ptr + n[:, None] * D + d[None, :], mask=tile_mask, other=0.0)
    v = tl.load(v_ptr + n[:, None] * D + d[None, :], mask=tile_mask, other=0.0)
    keep = tl.load(keep_ptr + row * N + n, mask=n < N, other=0) != 0
    s = tl.sum(k * q[None, :], axis=1) * scale
    s = tl.where(keep, s, float("-inf"))
    m = tl.max(s, axis=0)
    p = tl.exp(s - m)
    l = tl.sum(p, axis=0)
    o = tl.sum(p[:, None] * v, axis=0)
    tl.store(out_ptr + row * D + d, o / l, mask=d < D)
