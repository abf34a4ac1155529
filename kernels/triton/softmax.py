# softmax.py: row-wise softmax in one fused Triton kernel: one program per row, the whole row in
# registers, so the input is read once and the output written once.
#
# Taught in docs/triton/softmax.md. Without a CUDA GPU the kernel runs in Triton's interpreter on
# the CPU (TRITON_INTERPRET=1); with one it is compiled for that GPU.
# Convention (shared with the memory-model chapter's CUDA softmax): a row that is entirely -inf (fully
# masked) gives all zeros, where torch.softmax gives NaN; a NaN anywhere in a row makes the whole row NaN.
# Run:   python kernels/triton/softmax.py --rows 37 --cols 1000
# Timed against PyTorch and the memory-model chapter's CUDA kernel by kernels/triton/bench.py.
#
# course: run --rows 1 --cols 1
# course: run --rows 37 --cols 1000
# course: run --rows 5 --cols 4099
# course: run --rows 37 --cols 1000 --plant zeros-small
import os
import sys
from pathlib import Path

import torch

# The interpreter must be chosen before triton is imported: @triton.jit reads the setting.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
MAX_COLS = 1 << 15  # one row must fit in one program's registers (spilled, beyond a few thousand)
MAX_ROWS = 1 << 20  # with MAX_COLS, 2^35 elements: the row offset needs 64 bits


# --8<-- [start:reference]
def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    """The unfused composite, in float64, with the course's convention for rows without a finite
    maximum: a fully masked row (all -inf) gives zeros, a row holding NaN gives NaN."""
    x = x.double()
    row_max = x.amax(dim=1, keepdim=True)               # NaN if the row holds one
    row_max = torch.where(row_max == -torch.inf, 0.0, row_max)  # all -inf: exp(-inf - 0) = 0
    e = (x - row_max).exp()                             # subtract the row max: exp cannot overflow
    total = e.sum(dim=1, keepdim=True)
    return e / torch.where(total == 0, 1.0, total)      # only an all -inf row sums to 0: 0 / 1 = 0
# --8<-- [end:reference]


# --8<-- [start:kernel]
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)              # 64-bit: row * stride passes 2^31 in big inputs
    cols = tl.arange(0, BLOCK)                       # BLOCK is n_cols rounded up to a power of 2
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=0)                      # padding is -inf: it never wins the max
    row_max = tl.where(row_max == -float("inf"), 0.0, row_max)  # all -inf: no -inf - -inf = NaN
    num = tl.exp(x - row_max)                        # exp(-inf) = 0 adds nothing to the sum
    den = tl.sum(num, axis=0)                        # NaN if the row holds a NaN
    den = tl.where(den == 0.0, 1.0, den)             # 0 only for an all -inf row: 0 / 1 = 0
    tl.store(y_ptr + row * y_row_stride + cols, num / den, mask=mask)
# --8<-- [end:kernel]


# --8<-- [start:launch]
def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    if x.dim() != 2 or x.shape[1] > MAX_COLS:
        raise ValueError(f"softmax: expects a 2-D tensor with at most {MAX_COLS} columns, got {tuple(x.shape)}")
    if out is not None and (out.shape != x.shape or out.stride(1) != 1):
        raise ValueError("softmax: out needs x's shape and unit stride along a row")
    if x.stride(1) != 1:
        x = x.contiguous()                           # the kernel assumes unit stride along a row
    rows, cols = x.shape
    y = torch.empty_like(x) if out is None else out
    if x.numel() == 0:
        return y
    block = triton.next_power_of_2(cols)
    # More warps for longer rows, so that each thread holds a bounded number of elements.
    warps = 4 if block <= 2048 else (8 if block <= 8192 else 16)
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)
    return y
# --8<-- [end:launch]


# --8<-- [start:adversarial]
def adversarial_rows(cols: int, device: str, seed: int):
    """Named inputs that break a careless softmax, each checked against softmax_reference."""
    g = torch.Generator().manual_seed(seed)
    inf, nan = float("inf"), float("nan")

    def rand(rows):
        return ((torch.rand(rows, cols, generator=g) * 2 - 1) * 100).to(device)

    cases = {"random": rand(7)}
    x = rand(3)
    x[:, : (3 * cols) // 4] = -inf                   # leading -inf: the first elements seen are -inf
    cases["leading_-inf"] = x
    n = min(cols, 64)                                # causal mask: row i sees columns 0..i
    x = rand(n)
    x[torch.ones(n, cols, dtype=torch.bool).triu(1).to(device)] = -inf
    cases["causal_mask"] = x
    x = torch.full((3, cols), -inf, device=device)   # one finite value per row: the answer is one-hot
    x[0, 0], x[1, cols - 1], x[2, cols // 2] = 5.0, -80.0, 1e4
    cases["one_finite"] = x
    x = rand(4)
    x[1:3] = -inf                                    # fully masked rows: zeros by the course's convention
    cases["fully_masked"] = x
    x = rand(3)
    x[0, cols - 1], x[2, 0] = nan, nan               # a NaN poisons its row, and only its row
    if cols > 1:
        x[2, 1:] = -inf                              # NaN beside -inf: still NaN, not zero
    cases["nan"] = x
    return cases


def check_adversarial(label: str, fn, cols: int, device: str, seed: int = 7) -> bool:
    """fn(x, out) writes softmax(x) into out; each case's output is poisoned with NaN first, and the
    expected NaNs are compared through a mask (check_close never passes NaN)."""
    ok = True
    for name, x in adversarial_rows(cols, device, seed).items():
        want = softmax_reference(x)
        out = torch.full_like(x, float("nan"))
        fn(x, out)
        got = out.double().cpu()
        want = want.cpu()
        nan_rows = want.isnan().all(dim=1)
        ok &= course_tools.check_true(f"{label}_{name}_nan_rows_{x.shape[0]}x{cols}",
                                      bool(torch.equal(got.isnan(), want.isnan())), x.shape[0],
                                      f"nan_rows={int(nan_rows.sum())}")
        keep = ~nan_rows
        if keep.any():
            ok &= course_tools.check_close_each(f"{label}_{name}_{x.shape[0]}x{cols}", got[keep], want[keep],
                                                course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL)
    return bool(ok)
# --8<-- [end:adversarial]


def main() -> int:
    p = course_tools.parser("fused row softmax in Triton (the interpreter on the CPU without a GPU)")
    p.add_argument("--rows", type=course_tools.int_in(1, MAX_ROWS), default=37)
    p.add_argument("--cols", type=course_tools.int_in(1, MAX_COLS), default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plant", choices=course_tools.PLANT_CHOICES,
                   help="also run the check on output with zeros where it is below the old atol of 1e-6")
    args = p.parse_args()
    torch.manual_seed(args.seed)
    # Large values on purpose: without the max subtraction exp() would overflow to inf.
    x = (torch.rand(args.rows, args.cols, device=DEVICE) * 2 - 1) * 100
    y = torch.full_like(x, float("nan"))
    print(f"triton {triton.__version__}, {'interpreter on the CPU' if INTERPRET else torch.cuda.get_device_name()}")
    # Relative to each output (softmax_reference.cuh's tolerance): scores in [-100, 100] give outputs
    # far below any fixed atol, and the old atol of 1e-6 let zeros pass there.
    want, tol = softmax_reference(x), (course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL)
    ok = course_tools.check_close_each("triton_softmax", softmax(x, out=y), want, *tol)
    if args.plant:
        ok &= course_tools.check_each_planted("triton_softmax", y, want, *tol, old_atol=1e-6)
    ok &= check_adversarial("triton_softmax", lambda t, o: softmax(t, out=o), args.cols, DEVICE)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
