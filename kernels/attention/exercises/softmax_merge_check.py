"""softmax_merge_check.py: the checker for the softmax-merge exercise of docs/attention/exercises.md. It
launches merge_kernel from kernels/attention/exercises/softmax_merge.py (or, with --solution,
kernels/attention/exercises/solutions/softmax_merge.py), one program per row, on partial results
(m, l, acc) computed in float64 from random scores and values split at a random point of each row,
rows and widths D drawn from the seed (D never a power of two, and 1), acc rows spaced wider than D
(a kernel that takes D for the row stride fails), and these rows among them: the first half empty
(m1 = -inf, l1 = 0), the second half empty, both empty (the merge must give m = -inf, l = 0, acc = 0,
never NaN), maxima near 1000 (exp(m) overflows), and maxima 60 apart. The outputs are filled with
NaN first, the columns between D and the row stride must keep their value, and m, l and acc are
compared with a float64 merge of the same float32 inputs (m exactly). It first checks that the file
exposes a @triton.jit kernel, not a host function that merges with PyTorch. --sim runs it on
Triton's interpreter (no GPU).

Run: python -m course.exercise softmax_merge     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 15
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

PAD, SENTINEL = 5, 1234.0  # acc rows are D + PAD apart; the PAD columns hold SENTINEL


def partial(s, v):
    """(m, l, acc) of scores s (keys) and values v (keys x D), in float64; no keys: (-inf, 0, 0)."""
    import torch

    if s.numel() == 0:
        return float("-inf"), 0.0, torch.zeros(v.shape[1], dtype=torch.float64)
    m = s.max()
    p = torch.exp(s - m)
    return float(m), float(p.sum()), p @ v


def merged(m1, l1, acc1, m2, l2, acc2):
    """The merge of two partials (float64 tensors, one entry per row): the reference."""
    import torch

    m = torch.maximum(m1, m2)
    base = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    s1, s2 = torch.exp(m1 - base), torch.exp(m2 - base)
    return m, l1 * s1 + l2 * s2, acc1 * s1[:, None] + acc2 * s2[:, None]


def main() -> int:
    kernel, device, gen = exercise_tools.triton_start("Check the softmax-merge exercise (Triton).", "merge_kernel")
    import torch
    import triton

    draw = functools.partial(exercise_tools.draw, gen)
    width = functools.partial(exercise_tools.draw_off_power_of_two, gen)  # never a power of two

    results = []
    for rows, D in [(draw(30, 60), width(33, 100)), (1, 1), (draw(7, 13), width(3, 15))]:
        parts = [[], []]
        for r in range(rows):
            keys = draw(2, 40)
            s = torch.randn(keys, generator=gen, dtype=torch.float64) * 3
            v = torch.rand(keys, D, generator=gen, dtype=torch.float64) * 2 - 1
            split = draw(1, keys)
            kind = r % 6 if rows > 1 else 3  # a single row: both halves empty
            if kind == 1:
                split = 0                          # the first half saw no keys
            elif kind == 2:
                split = keys                       # the second half saw none
            elif kind == 3:
                s, v, split = s[:0], v[:0], 0      # neither did
            elif kind == 4:
                s = s + 1000.0                     # exp(m) overflows in float32 (and float64)
            elif kind == 5:
                s[split:] -= 60.0                  # the second half's maximum far below the first's
            parts[0].append(partial(s[:split], v[:split]))
            parts[1].append(partial(s[split:], v[split:]))
        inputs = []
        for half in parts:  # float32 inputs; acc rows D + PAD apart
            m = torch.tensor([p[0] for p in half], dtype=torch.float32)
            l = torch.tensor([p[1] for p in half], dtype=torch.float32)
            acc = torch.full((rows, D + PAD), SENTINEL)
            acc[:, :D] = torch.stack([p[2] for p in half]).float()
            inputs += [m.to(device), l.to(device), acc.to(device)[:, :D]]
        want = merged(*(t.cpu().double() for t in inputs))
        m, l = (torch.full((rows,), float("nan"), device=device) for _ in range(2))
        acc_storage = torch.full((rows, D + PAD), SENTINEL, device=device)
        acc_storage[:, :D] = float("nan")
        acc = acc_storage[:, :D]
        name = f"softmax_merge_{rows}x{D}"
        ran = exercise_tools.launch_sized(name, rows * (D + 2), kernel, (rows,), *inputs, m, l, acc, D,
                                          acc.stride(0), BLOCK_D=triton.next_power_of_2(D))
        if not ran:
            results.append(False)
            continue
        scale = max(1.0, float(want[2].abs().max()))
        results.append(exercise_tools.compare(f"{name}_m", m, want[0], 0, 0))
        results.append(exercise_tools.compare(f"{name}_l", l, want[1], 1e-5, 1e-6 * float(want[1].max())))
        results.append(exercise_tools.compare(f"{name}_acc", acc, want[2], 1e-5, 1e-6 * scale))
        results.append(exercise_tools.compare(f"{name}_acc_past_D", acc_storage[:, D:],
                                              torch.full((rows, PAD), SENTINEL), 0, 0))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
