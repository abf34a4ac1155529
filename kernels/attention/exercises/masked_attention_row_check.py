"""masked_attention_row_check.py: the checker for the masked attention-row exercise of
docs/attention/exercises.md. It launches attention_row_kernel from
kernels/attention/exercises/masked_attention_row.py (or, with --solution,
kernels/attention/exercises/solutions/masked_attention_row.py), one program per query row, on random
queries, keys and values whose counts and width, drawn from the seed, are not powers of two (and one
query of one key of width 1), with about a third of the keys masked at random and these rows among
them: every key masked (the output must be zeros, never NaN), one key kept, scores near +200 (exp
overflows without the maximum subtracted) and scores near -200 (exp underflows to 0 if the base is
clamped at 0). The output is filled with NaN first and compared with float64 attention of the same
float32 inputs. It first checks that the file exposes a @triton.jit kernel, not a host function that
computes with PyTorch. --sim runs it on Triton's interpreter (no GPU).

Run: python -m course.exercise masked_attention_row     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 16
import math
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402


def reference(q, k, v, keep, scale):
    """Masked attention in float64: softmax over the kept keys; a row with no key kept gives zeros."""
    import torch

    s = (q.double() @ k.double().t() * scale).masked_fill(keep == 0, float("-inf"))
    m = s.amax(dim=1, keepdim=True)
    base = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - base)
    l = p.sum(dim=1, keepdim=True)
    return torch.where(l == 0, torch.zeros_like(l), 1 / l) * (p @ v.double())


def main() -> int:
    kernel, device, gen = exercise_tools.triton_start("Check the masked attention-row exercise (Triton).",
                                                      "attention_row_kernel")
    import torch
    import triton

    width = partial(exercise_tools.draw_off_power_of_two, gen)  # drawn from the seed, never a power of two

    results = []
    for rows, N, D in [(width(20, 40), width(65, 200), width(17, 60)), (1, 1, 1), (width(5, 12), width(3, 30), 3)]:
        scale = 1 / math.sqrt(D)
        q = torch.rand(rows, D, generator=gen) * 2 - 1
        k = torch.rand(N, D, generator=gen) * 2 - 1
        v = torch.rand(N, D, generator=gen) * 2 - 1
        keep = (torch.rand(rows, N, generator=gen) < 0.65).to(torch.int8)
        k[:, 0] = 1.0  # every key's first component is 1: q[r, 0] shifts row r's every score
        r = torch.arange(rows)
        keep[r % 5 == 0] = 0                                   # every key masked
        keep[r % 5 == 1] = 0
        keep[r % 5 == 1, int(torch.randint(0, N, (1,), generator=gen))] = 1  # one key kept
        keep[r % 5 >= 2, N - 1] = 1                            # the last key kept (past a power of two)
        q[r % 5 == 2, 0] = 200.0 / scale                       # scores near +200: exp overflows
        q[r % 5 == 3, 0] = -200.0 / scale                      # scores near -200: exp underflows
        if rows == 1:
            keep[:] = 1  # the single query sees its single key
        q, k, v, keep = (t.to(device) for t in (q, k, v, keep))
        out = torch.full((rows, D), float("nan"), device=device)
        name = f"masked_attention_row_{rows}x{N}x{D}"
        ran = exercise_tools.launch_sized(name, rows * D, kernel, (rows,), q, k, v, keep, out, N, D, scale,
                                          BLOCK_N=triton.next_power_of_2(N), BLOCK_D=triton.next_power_of_2(D))
        want = reference(q.cpu(), k.cpu(), v.cpu(), keep.cpu(), scale)
        # scores near 200 carry float32 rounding of a few units of 200 * 2^-24 (about 1e-5 each), which
        # moves each weight by as much relatively: 1e-4 covers it, far below outputs of typically 0.1
        results.append(ran and exercise_tools.compare(name, out, want, 1e-4, 1e-4))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
