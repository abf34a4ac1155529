"""A plausible wrong answer to the row-maximum exercise in Numba (docs/memory-model/exercises.md): the
running maximum starts at 0 instead of -inf, so a row of negative numbers gets 0.
"""
# course: compile-only
from numba import cuda, float32

THREADS = 32


# --8<-- [start:mistake]
@cuda.jit
def row_max(x, out):
    partial = cuda.shared.array(THREADS, float32)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    m = float32(0.0)
    for c in range(t, x.shape[1], THREADS):
        m = max(m, x[r, c])
    partial[t] = m
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
