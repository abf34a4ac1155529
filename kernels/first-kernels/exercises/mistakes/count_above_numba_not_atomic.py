"""A plausible wrong answer to the counting exercise in Numba (docs/first-kernels/exercises.md): a
plain read-modify-write of the counter. On a GPU, threads that run it at once lose updates; on the
simulator the checker's counter refuses any write not made by cuda.atomic.add.
"""
# course: compile-only
from numba import cuda


# --8<-- [start:mistake]
@cuda.jit
def count_above(x, t, count):
    i = cuda.grid(1)
    if i < x.size and x[i] > t:
        count[0] += 1
# --8<-- [end:mistake]
