"""Solution to the masked vector-addition exercise (docs/triton/exercises.md).
Check it: python -m course.exercise add_masked --solution [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:solution]
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # the last program's lanes past n neither read nor write
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)
# --8<-- [end:solution]
