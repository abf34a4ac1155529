"""Exercise (docs/triton/exercises.md): the loop over K of a tiled matmul in Triton. Each program
computes a BLOCK_M x BLOCK_N tile of C = A B; you write the loop that walks A's and B's tiles along K.

Check it (on a GPU, or on the CPU with Triton's interpreter):
    python -m course.exercise matmul_tiles [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:stub]
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # this tile's rows of C
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # and columns
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # TODO (about 6 lines): for k0 in range(0, K, BLOCK_K):
    #  1. load the A tile at rows rm, columns k0 + rk: pointers a_ptr + rm[:, None] * stride_am
    #     + (k0 + rk)[None, :] * stride_ak, masked to rows < M and columns < K, other=0.0;
    #  2. load the B tile at rows k0 + rk, columns rn the same way (masked to < K and < N);
    #  3. acc += tl.dot(a, b).
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
# --8<-- [end:stub]
