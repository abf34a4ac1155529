"""Exercise (docs/first-kernels/exercises.md): add two rows x cols matrices with a 2D grid, in
Numba's CUDA dialect. The checker launches blocks of 16 x 8 threads (x: 16 columns, y: 8 rows) and
enough of them to cover the matrix; neither side is a multiple of the block's.

Check it (on a GPU, or on the CPU with Numba's simulator):
    python -m course.exercise matrix_add [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:stub]
@cuda.jit
def matrix_add(a, b, out):
    rows, cols = out.shape
    # TODO: this thread's column comes from the x components (blockIdx.x, blockDim.x, threadIdx.x),
    # its row from the y components; write out[row, col] = a[row, col] + b[row, col] if both are inside.
# --8<-- [end:stub]
