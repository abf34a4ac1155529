"""Exercise (docs/first-kernels/exercises.md): SAXPY, out = a * x + y, one thread per element, in
Numba's CUDA dialect. The checker launches ceil(n / 128) blocks of 128 threads: the last block
overhangs the arrays.

Check it (on a GPU, or on the CPU with Numba's simulator):
    python -m course.exercise saxpy [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:stub]
@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    # TODO: write out[i] = a * x[i] + y[i], but only for an i inside the arrays (i < out.size).
# --8<-- [end:stub]
