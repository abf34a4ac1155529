# vector_add.py: c = a + b in Triton, the "hello world" of the block programming model.
#
# Taught in docs/triton/programming-model.md. Without a CUDA GPU the kernel runs in Triton's
# interpreter on the CPU (TRITON_INTERPRET=1, set below); with one it is compiled for that GPU.
# Run:   python kernels/triton/vector_add.py --n 100003
#        TRITON_INTERPRET=1 python kernels/triton/vector_add.py --n 100003   (force the interpreter)
# Timed against PyTorch and a CUDA kernel by kernels/triton/bench.py.
#
# course: run --n 1
# course: run --n 100003
import argparse
import os
import sys

import torch

# --8<-- [start:interpret]
# The interpreter must be chosen before triton is imported: @triton.jit reads the setting.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
# --8<-- [end:interpret]


# --8<-- [start:kernel]
@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)                    # which block of the output this program owns
    offsets = pid * BLOCK + tl.arange(0, BLOCK)    # BLOCK indices at once: a vector, not a scalar
    mask = offsets < n                             # the last block may run past the end
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)
# --8<-- [end:kernel]


# --8<-- [start:launch]
def add(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, block: int = 1024) -> torch.Tensor:
    if a.shape != b.shape or a.device != b.device or a.dtype != b.dtype:
        raise ValueError("add: a and b need the same shape, device and dtype")
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty_like(a) if out is None else out
    n = a.numel()
    if n == 0:
        return c                                   # a grid of zero programs is an error
    grid = (triton.cdiv(n, block),)                # one program per BLOCK elements
    add_kernel[grid](a, b, c, n, BLOCK=block)      # tensors are passed as pointers to their data
    return c
# --8<-- [end:launch]


def check_close(name, got, want, rtol, atol):
    """Print the course's CHECK line for |got - want| <= atol + rtol * |want| (NaN fails)."""
    got64, want64 = got.detach().double().cpu(), want.detach().double().cpu()
    err = (got64 - want64).abs()
    ok = bool(((err <= atol + rtol * want64.abs()) & ~got64.isnan()).all()) and got64.numel() > 0
    worst = float(err.max()) if err.numel() else float("nan")
    print(f"CHECK {'PASS' if ok else 'FAIL'} {name} n={got64.numel()} max_abs_err={worst:.3g} rtol={rtol:g} atol={atol:g}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100003)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.n < 1 or args.n > 1 << 30:
        print(f"error: --n must be between 1 and 2^30, got {args.n}", file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    a = torch.rand(args.n, device=DEVICE) * 2 - 1
    b = torch.rand(args.n, device=DEVICE) * 2 - 1
    print(f"triton {triton.__version__}, {'interpreter on the CPU' if INTERPRET else torch.cuda.get_device_name()}")
    c = torch.full_like(a, float("nan"))           # poisoned: an element the kernel skips fails
    ok = check_close("triton_vector_add", add(a, b, out=c), a.double() + b.double(), rtol=1e-6, atol=1e-6)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
