"""A plausible wrong answer to the SAXPY exercise (docs/first-kernels/exercises.md): the bound
hard-coded to the size of the case the author tried, not the array's.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < 1000:
        out[i] = a * x[i] + y[i]
# --8<-- [end:mistake]
