"""A plausible wrong answer to the clamp exercise in Numba (docs/first-kernels/exercises.md): the
bounds of the case the author tried, [-1, 1], typed in instead of lo and hi.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def clamp(x, y, lo, hi):
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        y[j] = min(max(x[j], -1.0), 1.0)
# --8<-- [end:mistake]
