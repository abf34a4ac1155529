# vector_add.py: c = a + b in Triton, the "hello world" of the block programming model.
#
# Taught in docs/triton/programming-model.md. Without a CUDA GPU the kernel runs in Triton's
# interpreter on the CPU (TRITON_INTERPRET=1, set below); with one it is compiled for that GPU.
# Run:   python kernels/triton/vector_add.py --n 100003
#        TRITON_INTERPRET=1 python kernels/triton/vector_add.py --n 100003   (force the interpreter)
# Timed against PyTorch and the course's vectorised CUDA vector add by kernels/triton/bench.py.
#
# course: run --n 1
# course: run --n 100003
import os
import sys
from pathlib import Path

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


# --8<-- [start:kernel]
@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)       # which block this program owns (64-bit: n may pass 2^31)
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


def main() -> int:
    p = course_tools.parser("c = a + b in Triton (the interpreter on the CPU without a GPU)")
    p.add_argument("--n", type=course_tools.int_in(1, 1 << 30), default=100003)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    a = torch.rand(args.n, device=DEVICE) * 2 - 1
    b = torch.rand(args.n, device=DEVICE) * 2 - 1
    print(f"triton {triton.__version__}, {'interpreter on the CPU' if INTERPRET else torch.cuda.get_device_name()}")
    c = torch.full_like(a, float("nan"))           # poisoned: an element the kernel skips fails
    ok = course_tools.check_close("triton_vector_add", add(a, b, out=c),
                                  a.double() + b.double(), rtol=1e-6, atol=1e-6)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
