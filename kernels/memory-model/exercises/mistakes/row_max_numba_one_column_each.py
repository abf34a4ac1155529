"""A plausible wrong answer to the row-maximum exercise in Numba (docs/memory-model/exercises.md): each
thread reads one column, x[r, t], and no more, so the columns from 32 on are never read.
"""
# course: compile-only
import math

from numba import cuda, float32

THREADS = 32


# --8<-- [start:mistake]
@cuda.jit
def row_max(x, out):
    partial = cuda.shared.array(THREADS, float32)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    partial[t] = x[r, t] if t < x.shape[1] else -math.inf
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            partial[t] = max(partial[t], partial[t + stride])
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[r] = partial[0]
# --8<-- [end:mistake]
