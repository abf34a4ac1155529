"""Exercise (docs/attention/exercises.md): one query row of attention with a mask, in Triton: the
scores s = q . k * scale over the N keys, masked keys removed (-inf), softmax, then the weighted sum of
the value rows. A query whose every key is masked (padding, an empty window) gets zeros, as
FlashAttention does, never NaN (torch.softmax gives NaN there).

Check it (on a GPU, or on the CPU with Triton's interpreter):
    python -m course.exercise masked_attention_row [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:stub]
@triton.jit
def attention_row_kernel(q_ptr, k_ptr, v_ptr, keep_ptr, out_ptr, N, D, scale,
                         BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(axis=0)     # one program per query; q and out are rows x D, K and V are N x D
    n = tl.arange(0, BLOCK_N)       # BLOCK_N, BLOCK_D: the next powers of two >= N, D
    d = tl.arange(0, BLOCK_D)
    tile_mask = (n[:, None] < N) & (d[None, :] < D)
    q = tl.load(q_ptr + row * D + d, mask=d < D, other=0.0)
    k = tl.load(k_ptr + n[:, None] * D + d[None, :], mask=tile_mask, other=0.0)
    v = tl.load(v_ptr + n[:, None] * D + d[None, :], mask=tile_mask, other=0.0)
    keep = tl.load(keep_ptr + row * N + n, mask=n < N, other=0) != 0  # keep is rows x N int8: 1 = attend
    # TODO (about 8 lines):
    #  1. s = tl.sum(k * q[None, :], axis=1) * scale; a key not kept (or past N) gets -inf;
    #  2. subtract the row's maximum before exp (scores near 200 overflow exp otherwise), but when
    #     every key is masked the maximum is -inf: use 0 as the base there;
    #  3. p = exp(s - base), l = sum of p, o = tl.sum(p[:, None] * v, axis=0);
    #  4. store o / l, or zeros where l == 0 (every key masked).
# --8<-- [end:stub]
