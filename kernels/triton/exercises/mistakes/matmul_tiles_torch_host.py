"""A plausible wrong answer to the matmul tile-loop exercise (docs/triton/exercises.md): the product
computed with PyTorch in a host function, no Triton kernel. The checker must reject it (is_a_kernel).
"""
# course: compile-only


# --8<-- [start:mistake]
def matmul_kernel(a, b, c, M, N, K, *strides, BLOCK_M, BLOCK_N, BLOCK_K):
    c.copy_(a @ b)
# --8<-- [end:mistake]
