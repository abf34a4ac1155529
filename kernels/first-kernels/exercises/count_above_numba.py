"""Exercise (docs/first-kernels/exercises.md): count the elements of x greater than t, one thread per
element, every thread adding to the same counter, in Numba's CUDA dialect: the twin of count_above.cu
that runs without a GPU.

Check it (on a GPU, or on the CPU with Numba's simulator):
    python -m course.exercise count_above_numba [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:stub]
@cuda.jit
def count_above(x, t, count):
    i = cuda.grid(1)  # the checker launches ceil(n / 64) blocks of 64 threads
    # TODO (2 lines): if element i exists and is greater than t (strictly), add 1 to count[0], safely.
    # `count[0] += 1` runs, and loses counts when threads collide.
# --8<-- [end:stub]
