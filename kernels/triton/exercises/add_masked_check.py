"""add_masked_check.py: the checker for the masked vector-addition exercise of docs/triton/exercises.md.
It launches add_kernel from kernels/triton/exercises/add_masked.py (or, with --solution,
kernels/triton/exercises/solutions/add_masked.py) with BLOCK = 1024 and cdiv(n, 1024) programs, on
random vectors whose length is not a multiple of 1024 (and 1), the output filled with NaN first, and
compares with float64. It also checks that nothing past n was written: guard elements after the end
of the output must keep the value they had. --sim runs it on Triton's interpreter (no GPU).

Run: python -m course.exercise add_masked     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 8
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

STUB, SOLUTION = "kernels/triton/exercises/add_masked.py", "kernels/triton/exercises/solutions/add_masked.py"
BLOCK = 1024
GUARD = 2048  # elements after the end of out, which a kernel without a mask would overwrite
SENTINEL = 12345.0


def main() -> int:
    kernel, device, gen = exercise_tools.triton_start("Check the masked vector-addition exercise (Triton).", STUB, SOLUTION,
                                                      "add_kernel")
    import torch
    import triton

    results = []
    for n in [1000, 1, 4099, 98437]:
        x, y = (torch.rand(n, generator=gen).mul_(2).sub_(1).to(device) for _ in range(2))
        storage = torch.full((n + GUARD,), SENTINEL, device=device)
        storage[:n] = float("nan")  # poisoned: unwritten elements fail
        out = storage[:n]
        name = f"add_masked_n{n}"
        want = x.double() + y.double()
        ran = exercise_tools.launch(name, kernel, (triton.cdiv(n, BLOCK),), x, y, out, n, BLOCK=BLOCK)
        results.append(ran and exercise_tools.compare(name, out, want, 1e-6, 1e-6))
        results.append(ran and exercise_tools.compare(f"{name}_past_the_end", storage[n:],
                                                      torch.full((GUARD,), SENTINEL), 0, 0))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
