"""block_sum_check.py: the checker for the shared-memory reduction exercise of
docs/memory-model/exercises.md. It launches the kernel in kernels/memory-model/exercises/block_sum.py
(or, with --solution, kernels/memory-model/exercises/solutions/block_sum.py) with blocks of 128
threads over random inputs whose length (drawn from the seed) is not a multiple of 128 (and 0, 1 and
129) and which are followed in memory by large values (a kernel that reads past the end sums them), the partial sums
filled with NaN first, and compares every block's sum with float64. It first checks that the file
exposes a @cuda.jit kernel, not a host function; on the simulator partial sums written as a whole
array fail too. --sim runs it on Numba's CUDA simulator (no GPU).

Run: python -m course.exercise block_sum     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 7
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

THREADS = 128


def cases(kernel, sim, rng):
    import numpy as np

    for n in exercise_tools.vector_sizes(rng, sim, THREADS):
        x = rng.uniform(-1, 1, n).astype(np.float32)
        blocks = max(1, (n + THREADS - 1) // THREADS)  # n == 0: one block, whose sum is 0
        d_x, _ = exercise_tools.guarded(x, np.float32(1e6), sim, guard=THREADS)  # 1e6s past the end
        d_partial, d_whole = exercise_tools.guarded(np.full(blocks, np.nan, dtype=np.float32), np.float32(7.0), sim)
        padded = np.zeros(blocks * THREADS)
        padded[:n] = x
        want = padded.reshape(blocks, THREADS).sum(axis=1)
        # float32 sums of 128 terms of size <= 1: rounding stays far below 2e-5
        yield from exercise_tools.launch_compared(f"block_sums_n{n}", blocks, kernel, (blocks, THREADS),
                                                  d_x, d_partial, whole=d_whole, want=want,
                                                  fill=np.float32(7.0), rtol=1e-5, atol=2e-5)


if __name__ == "__main__":
    sys.exit(exercise_tools.numba_check("Check the shared-memory reduction exercise (Numba).", "block_sums", cases))
