"""A plausible wrong answer to the masked softmax exercise (docs/triton/exercises.md): exp(x) without
the row's maximum subtracted. Masked rows give zeros, but rows of large scores overflow (inf / inf =
NaN) and rows of scores far below zero underflow to zeros.
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:mistake]
@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=float("-inf"))
    e = tl.exp(x)
    d = tl.sum(e, axis=0)
    inv = tl.where(d == 0.0, 0.0, 1.0 / d)
    tl.store(out_ptr + row * cols + offsets, e * inv, mask=mask)
# --8<-- [end:mistake]
