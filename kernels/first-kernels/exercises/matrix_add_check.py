"""matrix_add_check.py: the checker for the 2D-grid exercise of docs/first-kernels/exercises.md. It
launches the kernel in kernels/first-kernels/exercises/matrix_add.py (or, with --solution,
kernels/first-kernels/exercises/solutions/matrix_add.py) with blocks of 16 x 8 threads over random
matrices that are not square and whose sides are not multiples of 16 or 8 (so swapping rows and
columns fails), the output filled with NaN first, and compares with float64. --sim runs it on
Numba's CUDA simulator (no GPU; smaller sizes).

Run: python -m course.exercise matrix_add     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 6
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

STUB = "kernels/first-kernels/exercises/matrix_add.py"
SOLUTION = "kernels/first-kernels/exercises/solutions/matrix_add.py"
BLOCK = (16, 8)  # (x: columns, y: rows)


def main() -> int:
    kernel, sim, rng = exercise_tools.numba_start("Check the 2D-grid exercise (Numba).", STUB, SOLUTION, "matrix_add")
    import numpy as np
    from numba import cuda

    results = []
    for rows, cols in ([(13, 37), (1, 1), (41, 9)] if sim else [(1009, 997), (1, 1), (41, 9), (3, 4099)]):
        a, b = (rng.uniform(-1, 1, (rows, cols)).astype(np.float32) for _ in range(2))
        d_a, d_b = cuda.to_device(a), cuda.to_device(b)
        d_out = cuda.to_device(np.full((rows, cols), np.nan, dtype=np.float32))
        grid = ((cols + BLOCK[0] - 1) // BLOCK[0], (rows + BLOCK[1] - 1) // BLOCK[1])
        name = f"matrix_add_{rows}x{cols}"
        results.append(exercise_tools.launch(name, kernel, (grid, BLOCK), d_a, d_b, d_out) and
                       exercise_tools.compare(name, d_out.copy_to_host(), a.astype(np.float64) + b, 1e-6, 1e-6))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
