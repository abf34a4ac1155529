"""Solution to the row-maximum exercise in Numba (docs/memory-model/exercises.md).
Check it: python -m course.exercise row_max_numba --solution [--sim]
"""
# course: compile-only
import math

from numba import cuda, float32

THREADS = 32


# --8<-- [start:solution]
@cuda.jit
def row_max(x, out):
    partial = cuda.shared.array(THREADS, float32)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    m = -math.inf  # the identity of max: a row of negative numbers, or of -inf, keeps its own maximum
    for c in range(t, x.shape[1], THREADS):
        m = max(m, x[r, c])
    partial[t] = m
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            partial[t] = max(partial[t], partial[t + stride])
        cuda.syncthreads()  # outside the if: every thread of the block must reach it
        stride //= 2
    if t == 0:
        out[r] = partial[0]
# --8<-- [end:solution]
