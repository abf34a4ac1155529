"""Exercise (docs/memory-model/exercises.md): each block sums its 128 elements in shared memory with
a tree reduction, in Numba's CUDA dialect, and writes one partial sum per block.

Check it (on a GPU, or on the CPU with Numba's simulator):
    python -m course.exercise block_sum [--sim]
"""
# course: compile-only
from numba import cuda, float32

THREADS = 128  # the checker launches blocks of this many threads


# --8<-- [start:stub]
@cuda.jit
def block_sums(x, partial):
    tile = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * THREADS + t
    # TODO (about 8 lines):
    #  1. tile[t] = x[i], or 0 where i is past the end (the last block overhangs); cuda.syncthreads();
    #  2. halve the active threads each step: for stride 64, 32, ..., 1, threads t < stride add
    #     tile[t + stride] into tile[t], with cuda.syncthreads() after every step (all threads reach it);
    #  3. thread 0 writes tile[0] to partial[cuda.blockIdx.x].
# --8<-- [end:stub]
