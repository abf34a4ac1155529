"""Solution to the clamp exercise in Numba (docs/first-kernels/exercises.md).
Check it: python -m course.exercise clamp_numba --solution [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:solution]
@cuda.jit
def clamp(x, y, lo, hi):
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):  # a grid-stride loop: any n, any grid
        y[j] = min(max(x[j], lo), hi)
# --8<-- [end:solution]
