"""block_sum_check.py: the checker for the shared-memory reduction exercise of
docs/memory-model/exercises.md. It launches the kernel in kernels/memory-model/exercises/block_sum.py
(or, with --solution, kernels/memory-model/exercises/solutions/block_sum.py) with blocks of 128
threads over random inputs whose length is not a multiple of 128, the partial sums filled with NaN
first, and compares every block's sum with float64. --sim runs it on Numba's CUDA simulator (no GPU).

Run: python -m course.exercise block_sum     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 7
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

STUB = "kernels/memory-model/exercises/block_sum.py"
SOLUTION = "kernels/memory-model/exercises/solutions/block_sum.py"
THREADS = 128


def main() -> int:
    kernel, sim, rng = exercise_tools.numba_start("Check the shared-memory reduction exercise (Numba).", STUB, SOLUTION,
                                                  "block_sums")
    import numpy as np
    from numba import cuda

    results = []
    for n in ([1000, 1, 129] if sim else [1000003, 1, 129, 4099]):
        x = rng.uniform(-1, 1, n).astype(np.float32)
        blocks = (n + THREADS - 1) // THREADS
        d_x = cuda.to_device(x)
        d_partial = cuda.to_device(np.full(blocks, np.nan, dtype=np.float32))
        name = f"block_sums_n{n}"
        padded = np.zeros(blocks * THREADS)
        padded[:n] = x
        want = padded.reshape(blocks, THREADS).sum(axis=1)
        # float32 sums of 128 terms of size <= 1: rounding stays far below 2e-5
        results.append(exercise_tools.launch(name, kernel, (blocks, THREADS), d_x, d_partial) and
                       exercise_tools.compare(name, d_partial.copy_to_host(), want, 1e-5, 2e-5))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
