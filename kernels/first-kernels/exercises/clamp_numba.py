"""Exercise (docs/first-kernels/exercises.md): clamp every element of x into [lo, hi] with a
grid-stride loop, in Numba's CUDA dialect: the twin of clamp.cu that runs without a GPU. The checker
launches only 4 blocks of 32 threads, for thousands of elements.

Check it (on a GPU, or on the CPU with Numba's simulator):
    python -m course.exercise clamp_numba [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:stub]
@cuda.jit
def clamp(x, y, lo, hi):
    i = cuda.grid(1)  # this thread's first element
    # TODO (about 3 lines): write y[j] = min(max(x[j], lo), hi) for EVERY j < x.size, starting at i and
    # stepping by the number of threads in the whole grid, cuda.gridsize(1).
# --8<-- [end:stub]
