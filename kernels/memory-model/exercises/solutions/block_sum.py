"""Solution to the shared-memory reduction exercise (docs/memory-model/exercises.md).
Check it: python -m course.exercise block_sum --solution [--sim]
"""
# course: compile-only
from numba import cuda, float32

THREADS = 128


# --8<-- [start:solution]
@cuda.jit
def block_sums(x, partial):
    tile = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * THREADS + t
    tile[t] = x[i] if i < x.size else float32(0.0)  # zeros past the end change no sum
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            tile[t] += tile[t + stride]
        cuda.syncthreads()  # outside the if: every thread of the block must reach it
        stride //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]
# --8<-- [end:solution]
