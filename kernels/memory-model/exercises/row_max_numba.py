"""Exercise (docs/memory-model/exercises.md): the maximum of every row of a matrix, one block of 32
threads per row, the threads' partial maxima combined in shared memory, in Numba's CUDA dialect: the
twin of row_max.cu (which combines them with warp shuffles) that runs without a GPU.

Check it (on a GPU, or on the CPU with Numba's simulator):
    python -m course.exercise row_max_numba [--sim]
"""
# course: compile-only
import math

from numba import cuda, float32

THREADS = 32  # the checker launches one block of this many threads per row


# --8<-- [start:stub]
@cuda.jit
def row_max(x, out):
    partial = cuda.shared.array(THREADS, float32)
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    # TODO (about 10 lines):
    #  1. m = the max of x[r, t], x[r, t + 32], x[r, t + 64], ... (start from -math.inf: a row may hold
    #     only negative numbers, or only -inf);
    #  2. partial[t] = m; cuda.syncthreads();
    #  3. for stride 16, 8, 4, 2, 1: threads t < stride take the max of partial[t] and
    #     partial[t + stride], with cuda.syncthreads() after every step (every thread reaches it);
    #  4. thread 0 writes partial[0] to out[r].
# --8<-- [end:stub]
