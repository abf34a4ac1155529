"""saxpy_check.py: the checker for the SAXPY exercise of docs/first-kernels/exercises.md. It launches
the kernel in kernels/first-kernels/exercises/saxpy.py (or, with --solution,
kernels/first-kernels/exercises/solutions/saxpy.py) with ceil(n / 128) blocks of 128 threads on random
inputs of sizes that are not multiples of 128, the output filled with NaN first, and compares with
float64. --sim runs it on Numba's CUDA simulator (no GPU; smaller sizes, the simulator is slow).

Run: python -m course.exercise saxpy     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 5
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

STUB, SOLUTION = "kernels/first-kernels/exercises/saxpy.py", "kernels/first-kernels/exercises/solutions/saxpy.py"
THREADS = 128


def main() -> int:
    kernel, sim, rng = exercise_tools.numba_start("Check the SAXPY exercise (Numba).", STUB, SOLUTION, "saxpy")
    import numpy as np
    from numba import cuda

    results = []
    for n in ([1000, 1, 129] if sim else [1000003, 1, 129, 4099]):
        x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
        a = np.float32(rng.uniform(-2, 2))
        d_x, d_y = cuda.to_device(x), cuda.to_device(y)
        d_out = cuda.to_device(np.full(n, np.nan, dtype=np.float32))  # poisoned: unwritten elements fail
        blocks = (n + THREADS - 1) // THREADS
        want = np.float64(a) * x + y
        results.append(exercise_tools.launch(f"saxpy_n{n}", kernel, (blocks, THREADS), a, d_x, d_y, d_out) and
                       exercise_tools.compare(f"saxpy_n{n}", d_out.copy_to_host(), want, 1e-6, 1e-6))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
