"""A plausible wrong answer to the 2D-grid exercise (docs/first-kernels/exercises.md): both indices
checked against the number of columns, right only on square matrices.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def matrix_add(a, b, out):
    rows, cols = out.shape
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < cols and col < cols:
        out[row, col] = a[row, col] + b[row, col]
# --8<-- [end:mistake]
