"""A plausible wrong answer to the masked vector-addition exercise (docs/triton/exercises.md): no mask,
so the last program reads and writes past n.
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:mistake]
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))
# --8<-- [end:mistake]
