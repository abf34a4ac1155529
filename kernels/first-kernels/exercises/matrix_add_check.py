"""matrix_add_check.py: the checker for the 2D-grid exercise of docs/first-kernels/exercises.md. It
launches the kernel in kernels/first-kernels/exercises/matrix_add.py (or, with --solution,
kernels/first-kernels/exercises/solutions/matrix_add.py) with blocks of 16 x 8 threads over random
matrices that are not square and whose sides are not multiples of 16 or 8 (so swapping rows and
columns fails; the sides are drawn from the seed, one case taller than wide, one wider than tall,
and one with no rows), the output filled with NaN first and followed by guard rows that must stay
untouched, and compares with float64. It first checks that the file exposes a @cuda.jit kernel, not a host function;
on the simulator an output written as a whole array (out[:, :] = a + b) fails too. --sim runs it on
Numba's CUDA simulator (no GPU; smaller sizes).

Run: python -m course.exercise matrix_add     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 6
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

BLOCK = (16, 8)  # (x: columns, y: rows)


def cases(kernel, sim, rng):
    import numpy as np

    side = partial(exercise_tools.draw_off_multiple, rng)  # (lo, hi, block): never a multiple of the block's
    if sim:
        shapes = [(side(9, 30, 8), side(33, 60, 16)), (side(33, 60, 8), side(9, 30, 16)),
                  (1, 1), (0, side(9, 30, 16))]
    else:
        shapes = [(side(900, 1100, 8), side(1101, 1300, 16)), (side(33, 60, 8), side(9, 30, 16)), (1, 1),
                  (3, side(4000, 4200, 16)), (0, side(9, 30, 16))]
    for rows, cols in shapes:
        a, b = (rng.uniform(-1, 1, (rows, cols)).astype(np.float32) for _ in range(2))
        (d_a, _), (d_b, _) = (exercise_tools.guarded(m, np.float32(0.0), sim, guard=32) for m in (a, b))
        d_out, d_whole = exercise_tools.guarded(np.full((rows, cols), np.nan, dtype=np.float32), np.float32(7.0),
                                                sim, guard=32)
        grid = ((cols + BLOCK[0] - 1) // BLOCK[0], max(1, (rows + BLOCK[1] - 1) // BLOCK[1]))  # 0 rows: one
        yield from exercise_tools.launch_compared(f"matrix_add_{rows}x{cols}", rows * cols, kernel, (grid, BLOCK),
                                                  d_a, d_b, d_out, whole=d_whole, want=a.astype(np.float64) + b,
                                                  fill=np.float32(7.0), rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    sys.exit(exercise_tools.numba_check("Check the 2D-grid exercise (Numba).", "matrix_add", cases))
