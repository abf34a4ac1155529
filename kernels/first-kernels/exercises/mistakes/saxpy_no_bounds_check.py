"""A plausible wrong answer to the SAXPY exercise (docs/first-kernels/exercises.md): no bounds check,
so the last block's extra threads write past the end of out (on a GPU, silently).
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    out[i] = a * x[i] + y[i]
# --8<-- [end:mistake]
