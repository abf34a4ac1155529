"""A plausible wrong answer to the clamp exercise in Numba (docs/first-kernels/exercises.md): one
element per thread, as in SAXPY. With 4 blocks of 32 threads only the first 128 elements are written.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def clamp(x, y, lo, hi):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = min(max(x[i], lo), hi)
# --8<-- [end:mistake]
