"""Solution to the SAXPY exercise (docs/first-kernels/exercises.md).
Check it: python -m course.exercise saxpy --solution [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:solution]
@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:  # the last block overhangs: its extra threads do nothing
        out[i] = a * x[i] + y[i]
# --8<-- [end:solution]
