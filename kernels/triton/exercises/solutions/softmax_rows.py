"""Solution to the masked softmax exercise (docs/triton/exercises.md).
Check it: python -m course.exercise softmax_rows --solution [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:solution]
@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=float("-inf"))
    m = tl.max(x, axis=0)
    base = tl.where(m == float("-inf"), 0.0, m)  # a fully masked row: exp(-inf - 0) = 0, no NaN
    e = tl.exp(x - base)
    d = tl.sum(e, axis=0)
    inv = tl.where(d == 0.0, 0.0, 1.0 / d)  # d == 0 only for a fully masked row: zeros
    tl.store(out_ptr + row * cols + offsets, e * inv, mask=mask)
# --8<-- [end:solution]
