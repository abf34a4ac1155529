"""Solution to the 2D-grid exercise (docs/first-kernels/exercises.md).
Check it: python -m course.exercise matrix_add --solution [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:solution]
@cuda.jit
def matrix_add(a, b, out):
    rows, cols = out.shape
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # x: consecutive threads, consecutive columns
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < rows and col < cols:  # the grid overhangs on both axes
        out[row, col] = a[row, col] + b[row, col]
# --8<-- [end:solution]
