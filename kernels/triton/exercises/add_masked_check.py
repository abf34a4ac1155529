"""add_masked_check.py: the checker for the masked vector-addition exercise of docs/triton/exercises.md.
It launches add_kernel from kernels/triton/exercises/add_masked.py (or, with --solution,
kernels/triton/exercises/solutions/add_masked.py) with BLOCK = 1024 and cdiv(n, 1024) programs, on
random vectors whose lengths are drawn from the seed, never a multiple of 1024 (and 1, and 0 with one
program), in float32 and one case in float16, the output filled with NaN first, and compares with
float64. It first checks that the file exposes a @triton.jit kernel, not a host function that adds with
PyTorch. It also checks that nothing past n was written: guard elements after the end of the output must
keep the value they had. --sim runs it on Triton's interpreter (no GPU).

Run: python -m course.exercise add_masked     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 8
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

BLOCK = 1024
GUARD = 2048  # elements after the end of out, which a kernel without a mask would overwrite
SENTINEL = 1234.0  # exact in float16 too


def main() -> int:
    kernel, device, gen = exercise_tools.triton_start("Check the masked vector-addition exercise (Triton).",
                                                      "add_kernel")
    import torch
    import triton

    results = []
    drawn = exercise_tools.sizes(gen, [(500, 1000), (3000, 6000), (90_000, 110_000)], BLOCK)
    cases = [(n, torch.float32) for n in drawn] + [(1, torch.float32), (0, torch.float32), (drawn[1], torch.float16)]
    for n, dtype in cases:
        # x and y are followed by GUARD more elements, so that an unmasked load reads memory that exists;
        # views of at least one element (the interpreter crashes on an unmasked load from an empty one)
        x, y = (torch.rand(n + GUARD, generator=gen).mul_(2).sub_(1).to(device=device, dtype=dtype)[:max(n, 1)]
                for _ in range(2))
        storage = torch.full((n + GUARD,), SENTINEL, device=device, dtype=dtype)
        storage[:n] = float("nan")  # poisoned: unwritten elements fail
        out = storage[:max(n, 1)]
        name = f"add_masked_n{n}" + ("_float16" if dtype == torch.float16 else "")
        want = (x[:n].double() + y[:n].double()).to(dtype)  # the sum rounded once to the output's type
        tol = 1e-6 if dtype == torch.float32 else 1e-3
        grid = (max(1, triton.cdiv(n, BLOCK)),)  # n == 0: one program, which must write nothing
        ran = exercise_tools.launch_sized(name, n, kernel, grid, x, y, out, n, BLOCK=BLOCK)
        if n or not ran:
            results.append(ran and exercise_tools.compare(name, out[:n], want, tol, tol))
        if ran:
            results.append(exercise_tools.compare(f"{name}_past_the_end", storage[n:], torch.full((GUARD,), SENTINEL),
                                                  0, 0))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
