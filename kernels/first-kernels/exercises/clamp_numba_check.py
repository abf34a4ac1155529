"""clamp_numba_check.py: the checker for the Numba clamp exercise of docs/first-kernels/exercises.md.
It launches the kernel in kernels/first-kernels/exercises/clamp_numba.py (or, with --solution,
kernels/first-kernels/exercises/solutions/clamp_numba.py) with a fixed grid of 4 blocks of 32 threads
(far fewer threads than elements: each thread must loop) on random inputs whose sizes, drawn from the
seed, are odd (and 0, 1 and 129), with bounds lo < hi drawn from the seed, inputs that include
elements equal to lo and to hi and that overshoot both, the output filled with NaN first and followed
by guard elements that must stay untouched, and compares exactly with NumPy's clip. It first checks
that the file exposes a @cuda.jit kernel, not a host function; on the simulator an output written as
a whole array (y[:] = ...) fails too. --sim runs it on Numba's CUDA simulator (no GPU).

Run: python -m course.exercise clamp_numba     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 12
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

BLOCKS, THREADS = 4, 32  # 128 threads in all, whatever the size


def cases(kernel, sim, rng):
    import numpy as np

    ranges = [(600, 1500) if sim else (500_000, 1_100_000), (2000, 4000)]
    for n in exercise_tools.sizes(rng, ranges, 2, edges=(0, 1, 129)):  # odd sizes, never a multiple of the grid
        lo = np.float32(rng.uniform(-3, 0))
        hi = np.float32(lo + rng.uniform(0.5, 3))
        x = rng.uniform(lo - 2, hi + 2, n).astype(np.float32)
        x[::7], x[3::7] = lo, hi  # elements equal to a bound stay as they are
        x[0:1] = hi + 1  # a single element overshoots
        d_x, _ = exercise_tools.guarded(x, np.float32(0.0), sim)
        d_y, d_whole = exercise_tools.guarded(np.full(n, np.nan, dtype=np.float32), np.float32(7.0), sim)
        yield from exercise_tools.launch_compared(f"clamp_n{n}", n, kernel, (BLOCKS, THREADS), d_x, d_y, lo, hi,
                                                  whole=d_whole, want=np.clip(x, lo, hi), fill=np.float32(7.0))


if __name__ == "__main__":
    sys.exit(exercise_tools.numba_check("Check the clamp exercise (Numba).", "clamp", cases))
