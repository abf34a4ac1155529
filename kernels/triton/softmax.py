# softmax.py: row-wise softmax in one fused Triton kernel: one program per row, the whole row in
# registers, so the input is read once and the output written once.
#
# Taught in docs/triton/softmax.md. Without a CUDA GPU the kernel runs in Triton's interpreter on
# the CPU (TRITON_INTERPRET=1); with one it is compiled for that GPU.
# Run:   python kernels/triton/softmax.py --rows 37 --cols 1000
# Timed against PyTorch and a CUDA kernel by kernels/triton/bench.py.
#
# course: run --rows 1 --cols 1
# course: run --rows 37 --cols 1000
# course: run --rows 5 --cols 4099
import argparse
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from vector_add import check_close  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
MAX_COLS = 1 << 15  # one row must fit in one program's registers (spilled, beyond a few thousand)


# --8<-- [start:reference]
def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    """The unfused composite, in float64: five passes over memory when run eagerly."""
    x = x.double()
    shifted = x - x.max(dim=1, keepdim=True).values   # subtract the row max: exp cannot overflow
    e = shifted.exp()
    return e / e.sum(dim=1, keepdim=True)
# --8<-- [end:reference]


# --8<-- [start:kernel]
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)                           # one program per row
    cols = tl.arange(0, BLOCK)                       # BLOCK is n_cols rounded up to a power of 2
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)                        # padding is -inf: it never wins the max
    num = tl.exp(x)                                  # and exp(-inf) = 0 adds nothing to the sum
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)
# --8<-- [end:kernel]


# --8<-- [start:launch]
def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    if x.dim() != 2 or x.shape[1] > MAX_COLS:
        raise ValueError(f"softmax: expects a 2-D tensor with at most {MAX_COLS} columns, got {tuple(x.shape)}")
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


def main() -> int:
    parser = argparse.ArgumentParser(description="fused row softmax in Triton")
    parser.add_argument("--rows", type=int, default=37)
    parser.add_argument("--cols", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (1 <= args.rows <= 1 << 20 and 1 <= args.cols <= MAX_COLS):
        print(f"error: need 1 <= rows <= 2^20 and 1 <= cols <= {MAX_COLS}", file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    # Large values on purpose: without the max subtraction exp() would overflow to inf.
    x = (torch.rand(args.rows, args.cols, device=DEVICE) * 2 - 1) * 100
    y = torch.full_like(x, float("nan"))
    print(f"triton {triton.__version__}, {'interpreter on the CPU' if INTERPRET else torch.cuda.get_device_name()}")
    ok = check_close("triton_softmax", softmax(x, out=y), softmax_reference(x), rtol=1e-5, atol=1e-6)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
