"""row_max_numba_check.py: the checker for the Numba row-maximum exercise of
docs/memory-model/exercises.md. It launches the kernel in kernels/memory-model/exercises/row_max_numba.py
(or, with --solution, kernels/memory-model/exercises/solutions/row_max_numba.py) with one block of 32
threads per row on random matrices whose shapes, drawn from the seed, have rows longer and shorter
than 32 and never a multiple of 32 (and 1 x 1), with rows of negative numbers only (a maximum that
starts at 0 fails), rows of -inf only, and rows whose maximum is in their last column, the output
filled with NaN first and followed by guard elements that must stay untouched, and compares exactly
with NumPy's maximum. It first checks that the file exposes a @cuda.jit kernel, not a host function;
on the simulator an output written as a whole array fails too. --sim runs it on Numba's CUDA
simulator (no GPU).

Run: python -m course.exercise row_max_numba     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 14
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

THREADS = 32


def cases(kernel, sim, rng):
    import numpy as np
    from numba import cuda

    ranges = [(9, 20), (70, 200), (5, 12), (2, 31)] + ([] if sim else [(2000, 3000), (1000, 1500)])
    sides = exercise_tools.sizes(rng, ranges, THREADS)  # rows, columns, ...: never a multiple of 32
    drawn = list(zip(sides[::2], sides[1::2]))
    shapes = drawn[:2] + [(1, 1), (7, 1)] + drawn[2:]
    for rows, cols in shapes:
        x = rng.uniform(-10, 10, (rows, cols)).astype(np.float32)
        r = np.arange(rows)
        x[r % 4 == 1] = -rng.uniform(1, 100, (int((r % 4 == 1).sum()), cols))  # negative numbers only
        x[r % 4 == 2] = -np.inf                                                # every column masked
        x[r % 4 == 3, -1] = 1000.0                                             # the maximum in the last column
        d_x = cuda.to_device(x)
        d_out, d_whole = exercise_tools.guarded(np.full(rows, np.nan, dtype=np.float32), np.float32(7.0), sim)
        yield from exercise_tools.launch_compared(f"row_max_{rows}x{cols}", rows, kernel, (rows, THREADS), d_x, d_out,
                                                  whole=d_whole, want=x.max(axis=1), fill=np.float32(7.0))


if __name__ == "__main__":
    sys.exit(exercise_tools.numba_check("Check the row-maximum exercise (Numba).", "row_max", cases))
