"""saxpy_check.py: the checker for the SAXPY exercise of docs/first-kernels/exercises.md. It launches
the kernel in kernels/first-kernels/exercises/saxpy.py (or, with --solution,
kernels/first-kernels/exercises/solutions/saxpy.py) with ceil(n / 128) blocks of 128 threads on random
inputs of sizes drawn from the seed that are not multiples of 128 (and 0, with one block, 1 and 129),
the output filled with NaN first and followed by guard elements that must stay untouched (a missing
bounds check writes there), and compares with float64. It first checks that the file exposes a @cuda.jit
kernel, not a host function; on the simulator an output written as a whole array (out[:] = a * x + y,
NumPy on every thread) fails too. --sim runs it on Numba's CUDA simulator (no GPU; smaller sizes).

Run: python -m course.exercise saxpy     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 5
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

THREADS = 128


def cases(kernel, sim, rng):
    import numpy as np

    for n in exercise_tools.vector_sizes(rng, sim, THREADS):
        x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
        a = np.float32(rng.uniform(-2, 2))
        (d_x, _), (d_y, _) = (exercise_tools.guarded(v, np.float32(0.0), sim) for v in (x, y))  # never empty
        poison = np.full(n, np.nan, dtype=np.float32)  # poisoned: unwritten elements fail
        d_out, d_whole = exercise_tools.guarded(poison, np.float32(7.0), sim)
        blocks = max(1, (n + THREADS - 1) // THREADS)  # one block for n == 0: it must write nothing
        want = np.float64(a) * x + y
        yield from exercise_tools.launch_compared(f"saxpy_n{n}", n, kernel, (blocks, THREADS), a, d_x, d_y, d_out,
                                                  whole=d_whole, want=want, fill=np.float32(7.0),
                                                  rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    sys.exit(exercise_tools.numba_check("Check the SAXPY exercise (Numba).", "saxpy", cases))
