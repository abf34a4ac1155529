"""A plausible wrong answer to the shared-memory reduction exercise (docs/memory-model/exercises.md):
the load has no bounds check, so the last block sums whatever lies past the end of x.
"""
# course: compile-only
from numba import cuda, float32

# --8<-- [start:mistake]
THREADS = 128


@cuda.jit
def block_sums(x, partial):
    tile = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    tile[t] = x[cuda.blockIdx.x * THREADS + t]
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            tile[t] += tile[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]
# --8<-- [end:mistake]
