"""A plausible wrong answer to the counting exercise in Numba (docs/first-kernels/exercises.md):
`>=` for "greater than", which counts the elements equal to t too.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def count_above(x, t, count):
    i = cuda.grid(1)
    if i < x.size and x[i] >= t:
        cuda.atomic.add(count, 0, 1)
# --8<-- [end:mistake]
