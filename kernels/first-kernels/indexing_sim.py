"""indexing_sim.py: the indexing lessons in Python with Numba's CUDA simulator, so they run on any
CPU: a 2D launch over a matrix that is not a multiple of the block size, and a grid-stride loop
with a fixed, small grid. The simulator runs each thread as a Python thread: the same index
arithmetic as on a GPU, slowly.

Taught in docs/first-kernels/indexing.md.
Run: python kernels/first-kernels/indexing_sim.py          (no GPU needed)
"""
# course: run --rows 13 --cols 37
# course: run --rows 1 --cols 1
import os
import sys
from pathlib import Path

# Must be set before numba.cuda is imported: every @cuda.jit kernel then runs on the CPU simulator.
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


# --8<-- [start:kernels]
@cuda.jit
def who_2d(rows, cols, out_row, out_col, out_block):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < rows and col < cols:  # the grid overhangs the matrix: check both axes
        out_row[row, col] = row
        out_col[row, col] = col
        out_block[row, col] = cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x


@cuda.jit
def fill_grid_stride(out):
    start = cuda.grid(1)          # blockIdx.x * blockDim.x + threadIdx.x
    stride = cuda.gridsize(1)     # gridDim.x * blockDim.x
    for i in range(start, out.size, stride):
        out[i] = i
# --8<-- [end:kernels]


def main() -> int:
    parser = course_tools.parser("Index arithmetic on Numba's CUDA simulator (runs on the CPU).")
    parser.add_argument("--rows", type=int, default=13)
    parser.add_argument("--cols", type=int, default=37)
    args = parser.parse_args()
    if args.rows < 1 or args.cols < 1 or args.rows * args.cols > 10_000:
        parser.error("--rows and --cols must be at least 1, rows * cols at most 10000 (the simulator is slow)")
    rows, cols = args.rows, args.cols
    # --8<-- [start:launch]
    block = (16, 4)                                   # (x: columns, y: rows)
    grid = ((cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1])
    out_row = np.full((rows, cols), -1, dtype=np.int32)  # -1: never written
    out_col = np.full((rows, cols), -1, dtype=np.int32)
    out_block = np.full((rows, cols), -1, dtype=np.int32)
    who_2d[grid, block](rows, cols, out_row, out_col, out_block)
    # --8<-- [end:launch]
    r, c = np.indices((rows, cols))

    def check(name, got, want):  # integers: exact
        return course_tools.check_close(name, got, want, rtol=0.0, atol=0.0)

    ok = check("sim_2d_row", out_row, r)
    ok = check("sim_2d_col", out_col, c) and ok
    ok = check("sim_2d_block", out_block, (r // block[1]) * grid[0] + c // block[0]) and ok

    n = rows * cols * 3 + 1
    out = np.full(n, -1, dtype=np.int64)
    fill_grid_stride[2, 32](out)                      # 64 threads, whatever n is
    ok = check("sim_grid_stride", out, np.arange(n)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
