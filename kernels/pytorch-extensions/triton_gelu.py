# triton_gelu.py: the chapter's fused GELU (forward and backward) written in Triton and registered
# with torch.library.triton_op, so that autograd and torch.compile treat it like a PyTorch operator.
#
# Taught in docs/pytorch-extensions/triton-operator.md. Without a CUDA GPU the kernels run in Triton's
# interpreter on the CPU (TRITON_INTERPRET=1) and the checks use CPU tensors; with one they are
# compiled for the GPU. kernels/pytorch-extensions/package_gelu.py also checks it under torch.compile
# and times it.
# Run:   python kernels/pytorch-extensions/triton_gelu.py
#
# course: run
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from torch.library import triton_op, wrap_triton  # noqa: E402

from gelu_reference import check_operator  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
BLOCK = 1024


# --8<-- [start:kernels]
@triton.jit
def _tanh(u):
    # tanh(u) = 1 - 2 / (exp(2u) + 1); exp(2u) underflowing to 0 gives -1. Above u = 20, tanh(u)
    # is 1 even in float64, so clamp there rather than let exp overflow to inf.
    return 1.0 - 2.0 / (tl.exp(2.0 * tl.minimum(u, 20.0)) + 1.0)


@triton.jit
def _constants(COMPUTE: tl.constexpr):
    # Each constant built in the compute type: the float64 path gets every digit, whatever rules a
    # Triton release applies to Python float literals.
    k0 = tl.full((), 0.7978845608028654, COMPUTE)     # sqrt(2 / pi)
    k1 = tl.full((), 0.044715, COMPUTE)
    return k0, k1


@triton.jit
def gelu_forward_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, COMPUTE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)   # 64-bit: n may pass 2^31
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(COMPUTE)   # half/bfloat16 are computed in float32
    k0, k1 = _constants(COMPUTE)
    t = _tanh(k0 * (x + k1 * x * x * x))
    tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gelu_backward_kernel(g_ptr, x_ptr, dx_ptr, n, BLOCK: tl.constexpr, COMPUTE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(COMPUTE)
    g = tl.load(g_ptr + offs, mask=mask).to(COMPUTE)
    k0, k1 = _constants(COMPUTE)
    t = _tanh(k0 * (x + k1 * x * x * x))
    slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k0 * (1.0 + 3.0 * k1 * x * x)
    tl.store(dx_ptr + offs, (g * slope).to(dx_ptr.dtype.element_ty), mask=mask)
# --8<-- [end:kernels]


# --8<-- [start:ops]
def _check(t: torch.Tensor, name: str) -> None:
    if t.dtype not in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"triton_gelu: {name} must be float64, float32, float16 or bfloat16, got {t.dtype}")
    if t.device.type != DEVICE:
        raise RuntimeError(f"triton_gelu: {name} must be on {DEVICE}, got a tensor on {t.device}")


def _launch(kernel, out, *inputs):
    n = out.numel()
    if n > 0:                                          # a grid of zero programs is an error
        compute = tl.float64 if out.dtype == torch.float64 else tl.float32
        wrap_triton(kernel)[(triton.cdiv(n, BLOCK),)](*inputs, out, n, BLOCK=BLOCK, COMPUTE=compute)
    return out


@triton_op("course_triton::gelu", mutates_args=())
def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    _check(x, "x")
    x = x.contiguous()
    return _launch(gelu_forward_kernel, torch.empty(x.shape, dtype=x.dtype, device=x.device), x)


@triton_op("course_triton::gelu_backward", mutates_args=())
def triton_gelu_backward(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    _check(grad, "grad")
    _check(x, "x")
    grad, x = grad.contiguous(), x.contiguous()
    return _launch(gelu_backward_kernel, torch.empty(x.shape, dtype=x.dtype, device=x.device), grad, x)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return triton_gelu_backward(grad, x)


triton_gelu.register_autograd(_backward, setup_context=_setup_context)
# --8<-- [end:ops]


def main() -> int:
    course_tools.parser("check the Triton GELU operator (the interpreter on the CPU without a GPU)").parse_args()
    where = "interpreter on the CPU" if INTERPRET else torch.cuda.get_device_name()
    print(f"triton {triton.__version__}, torch {torch.__version__}, {where}")
    # float64 with float64's tolerance: catches constants that carry only float32's precision.
    dtypes = ((torch.float32, torch.float64) if INTERPRET
              else (torch.float32, torch.float64, torch.float16, torch.bfloat16))
    ok = check_operator("triton", triton_gelu, DEVICE, dtypes=dtypes, bad_device=None if INTERPRET else "cpu")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
