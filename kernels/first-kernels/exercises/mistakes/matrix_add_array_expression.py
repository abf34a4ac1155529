"""A plausible wrong answer to the 2D-grid exercise (docs/first-kernels/exercises.md): a NumPy array
expression inside the kernel, right on Numba's simulator (every thread adds everything), not a kernel
on a GPU. The checker must reject it.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def matrix_add(a, b, out):
    out[:, :] = a[:, :] + b[:, :]
# --8<-- [end:mistake]
