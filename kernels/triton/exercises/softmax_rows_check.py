"""softmax_rows_check.py: the checker for the masked softmax exercise of docs/triton/exercises.md. It
launches softmax_kernel from kernels/triton/exercises/softmax_rows.py (or, with --solution,
kernels/triton/exercises/solutions/softmax_rows.py), one program per row, on random scores with
widths drawn from the seed that are not powers of two, some scores masked (-inf), some rows fully
masked, some rows with large scores (exp overflows without the maximum subtracted), some rows whose
every score is far below zero (exp underflows unless the row's own maximum is subtracted: a base
clamped at 0 fails), the output filled with NaN first, and compares with a float64 reference that
follows the course's rules. It first checks that the file exposes a @triton.jit kernel, not a host
function that calls torch.softmax. --sim runs it on Triton's
interpreter (no GPU).

Run: python -m course.exercise softmax_rows     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 9
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402


def reference(x):
    """Softmax of every row in float64: -inf scores give 0, a fully masked row gives zeros."""
    import torch

    x = x.double()
    m = x.amax(dim=1, keepdim=True)
    base = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    e = torch.exp(x - base)
    d = e.sum(dim=1, keepdim=True)
    return torch.where(d == 0, torch.zeros_like(e), e / d)


def main() -> int:
    kernel, device, gen = exercise_tools.triton_start("Check the masked softmax exercise (Triton).", "softmax_kernel")
    import torch
    import triton

    width = partial(exercise_tools.draw_off_power_of_two, gen)  # drawn from the seed, never a power of two

    results = []
    for rows, cols in [(37, width(65, 127)), (1, 1), (9, width(513, 1023)), (64, width(17, 31)), (11, 1)]:
        x = torch.randn(rows, cols, generator=gen) * 3
        r = torch.arange(rows)
        x[r % 5 == 2] += 1000.0                                                         # exp(x) overflows in float
        x[r % 5 == 3] = -200.0 - 100.0 * torch.rand(int((r % 5 == 3).sum()), cols, generator=gen)  # all negative
        x[torch.rand(rows, cols, generator=gen) < 0.2] = float("-inf")                  # masked scores
        x[r % 5 == 0] = float("-inf")                                                   # fully masked rows
        x = x.to(device)
        out = torch.full_like(x, float("nan"))
        name = f"softmax_rows_{rows}x{cols}"
        block = triton.next_power_of_2(cols)
        results.append(exercise_tools.launch_sized(name, rows * cols, kernel, (rows,), x, out, cols, BLOCK=block) and
                       exercise_tools.compare(name, out, reference(x.cpu()), 1e-5, 1e-6))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
