"""A plausible wrong answer to the masked vector-addition exercise (docs/triton/exercises.md): the mask
bound hard-coded to the length of the case the author tried, not n.
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:mistake]
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < 1000
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)
# --8<-- [end:mistake]
