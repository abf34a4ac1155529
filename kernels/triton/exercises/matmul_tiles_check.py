"""matmul_tiles_check.py: the checker for the matmul tile-loop exercise of docs/triton/exercises.md. It
launches matmul_kernel from kernels/triton/exercises/matmul_tiles.py (or, with --solution,
kernels/triton/exercises/solutions/matmul_tiles.py) with 32 x 32 x 16 tiles on random matrices whose
sides, drawn from the seed, are not multiples of the tiles, A and B contiguous and also transposed
(views whose strides are not (K, 1) and (N, 1): a kernel that ignores the strides fails), C transposed,
A and B in float16 (C in float32), C filled
with NaN first, and compares with a float64 product. It first checks that the file exposes a
@triton.jit kernel, not a host function that multiplies with PyTorch.
On a GPU, tl.dot rounds float32 inputs to TF32 by default, so the tolerance there is that of TF32;
the interpreter (--sim, no GPU) multiplies in float32.

Run: python -m course.exercise matmul_tiles     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 10
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

BM, BN, BK = 32, 32, 16


def main() -> int:
    kernel, device, gen = exercise_tools.triton_start("Check the matmul tile-loop exercise (Triton).",
                                                      "matmul_kernel")
    import torch
    import triton

    rtol, atol = (1e-4, 1e-4) if device == "cpu" else (1e-2, 2e-2)  # TF32 on a GPU: 10 bits of mantissa

    side = partial(exercise_tools.draw_off_multiple, gen)  # (lo, hi, tile): never a multiple of the tile

    def matrix(rows, cols, transposed, dtype=torch.float32):  # values in [-1, 1); transposed: a view of a
        m = torch.rand(cols, rows, generator=gen).t() if transposed else torch.rand(rows, cols, generator=gen)
        return (m * 2 - 1).to(device=device, dtype=dtype)   # (cols, rows) matrix

    results = []
    shapes = [(side(40, 100, BM), side(33, 63, BN), side(17, 60, BK)), (1, 1, 1),
              (side(100, 140, BM), side(65, 95, BN), side(150, 220, BK))]
    # (a transposed, b transposed, c transposed, the inputs' dtype)
    layouts = [(0, 0, 0, torch.float32)] * 3 + [(1, 0, 0, torch.float32), (0, 1, 0, torch.float32),
                                                  (0, 0, 1, torch.float32), (1, 1, 0, torch.float16)]
    for (M, N, K), (ta, tb, tc, dtype) in zip(shapes + shapes[:1] + shapes[2:] + shapes[:1] + shapes[2:], layouts):
        a, b = matrix(M, K, ta, dtype), matrix(K, N, tb, dtype)
        c = torch.full((N, M), float("nan"), device=device).t() if tc else \
            torch.full((M, N), float("nan"), device=device)
        name = f"matmul_tiles_{M}x{N}x{K}" + ("_a_transposed" if ta else "") + ("_b_transposed" if tb else "") + \
            ("_c_transposed" if tc else "") + ("_float16" if dtype == torch.float16 else "")
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        ran = exercise_tools.launch_sized(name, M * N, kernel, grid, a, b, c, M, N, K, a.stride(0), a.stride(1),
                                          b.stride(0), b.stride(1), c.stride(0), c.stride(1), BLOCK_M=BM, BLOCK_N=BN,
                                          BLOCK_K=BK)
        results.append(ran and exercise_tools.compare(name, c, a.double().cpu() @ b.double().cpu(), rtol, atol))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
