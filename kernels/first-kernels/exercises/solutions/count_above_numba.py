"""Solution to the counting exercise in Numba (docs/first-kernels/exercises.md).
Check it: python -m course.exercise count_above_numba --solution [--sim]
"""
# course: compile-only
from numba import cuda


# --8<-- [start:solution]
@cuda.jit
def count_above(x, t, count):
    i = cuda.grid(1)
    if i < x.size and x[i] > t:
        cuda.atomic.add(count, 0, 1)  # an indivisible read-modify-write: no update is lost
# --8<-- [end:solution]
