"""A plausible wrong answer to the SAXPY exercise (docs/first-kernels/exercises.md): a NumPy array
expression inside the kernel. Numba's simulator runs it on every thread and gets the right numbers;
no thread computes its own element, and the GPU does not compile it. The checker must reject it.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def saxpy(a, x, y, out):
    out[:] = a * x[:] + y[:]
# --8<-- [end:mistake]
