# gelu_reference.py: the operator the PyTorch-extensions chapter fuses, the tanh approximation of
# GELU, written as a composite of PyTorch ops, with its derivative worked out by hand; and the checks
# every implementation of the chapter (CUDA through load_inline, the packaged CUDA extension, Triton)
# must pass.
#
# Taught in docs/pytorch-extensions/index.md; jit_gelu.py, package_gelu.py and triton_gelu.py import its checks.
# Run directly, it checks the hand-derived derivative against autograd's, on the CPU.
# Run:   python kernels/pytorch-extensions/gelu_reference.py
#
# course: run
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
from course_tools import check_close, check_true  # noqa: E402,F401  (the chapter's programs import them from here)

# --8<-- [start:composite]
# Python floats are float64: a float64 tensor is computed with these exact constants, and a float32
# one with the constants rounded to float32 by PyTorch.
K0 = math.sqrt(2.0 / math.pi)
K1 = 0.044715


def gelu_composite(x: torch.Tensor) -> torch.Tensor:
    """y = x/2 (1 + tanh(k0 (x + k1 x^3))): nine elementwise PyTorch ops (k1 * x, * x, * x, x +,
    k0 *, tanh, 1 +, 0.5 * x, the final product): nine kernels and eight intermediate tensors when eager."""
    return 0.5 * x * (1.0 + torch.tanh(K0 * (x + K1 * x * x * x)))


def gelu_backward_composite(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """dL/dx = grad * dy/dx, with dy/dx = (1 + t)/2 + x/2 (1 - t^2) k0 (1 + 3 k1 x^2), t = tanh(...)."""
    t = torch.tanh(K0 * (x + K1 * x * x * x))
    return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * K0 * (1.0 + 3.0 * K1 * x * x))
# --8<-- [end:composite]


def raises(fn, *exceptions):
    """The exception type fn raises (one of `exceptions`), or None: a crash is not caught here."""
    try:
        fn()
    except exceptions as e:  # noqa: PERF203
        return e
    return None


# --8<-- [start:check_operator]
def check_operator(label: str, op, device: str, dtypes=(torch.float32,), bad_device=None, bad_dtype=torch.int32):
    """The checks every implementation passes. `op` is the user-facing function (autograd included)."""
    ok = True
    torch.manual_seed(0)
    for dtype in dtypes:
        # float32: the slope's (1 - t^2) loses digits where tanh saturates, and is multiplied by up to
        # ~x^3: an absolute error of a few 1e-6 at |x| ~ 9, inherent to float32, not a bug.
        tol = {torch.float32: (1e-5, 3e-5), torch.float64: (1e-12, 1e-12),
               torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}[dtype]
        # Random inputs, an odd size, values where tanh is neither linear nor saturated.
        x = (torch.randn(517, 1003, device=device) * 3).to(dtype).requires_grad_()
        y = op(x)
        g = torch.randn_like(y)
        (dx,) = torch.autograd.grad(y, x, g)
        x64 = x.detach().double()
        ok &= check_close(f"{label}_forward_{str(dtype)[6:]}", y, gelu_composite(x64), *tol)
        ok &= check_close(f"{label}_backward_{str(dtype)[6:]}", dx, gelu_backward_composite(g.double(), x64), *tol)

    # Non-contiguous inputs (a transposed view, every other column) and a contiguous view that starts
    # one element into its storage, so not 16-byte aligned: same values as the composite.
    base = torch.randn(300, 202, device=device)
    for name, view in [("transposed", base.t()), ("strided", base[:, ::2]), ("offset", base.flatten()[1:])]:
        ok &= check_close(f"{label}_{name}_input", op(view), gelu_composite(view.double()), 1e-5, 1e-6)

    # An empty tensor: an empty result of the same shape, and no kernel launch with a zero grid.
    empty = torch.empty(0, 7, device=device)
    ok &= check_true(f"{label}_empty_input", op(empty).shape == empty.shape, 1, "shape (0, 7)")

    # Double-precision gradcheck: finite differences against the backward the operator registers.
    xd = torch.randn(17, 5, device=device, dtype=torch.float64, requires_grad=True)
    ok &= check_true(f"{label}_gradcheck_float64", torch.autograd.gradcheck(op, (xd,), eps=1e-6, atol=1e-5),
                     xd.numel())

    # Wrong dtype and wrong device: a Python exception with a message, never a crash.
    bad = [("dtype", lambda: op(torch.ones(4, device=device, dtype=bad_dtype)))]
    if bad_device is not None:
        bad.append(("device", lambda: op(torch.ones(4, device=bad_device))))
    for what, call in bad:
        err = raises(call, RuntimeError, TypeError, ValueError, NotImplementedError)
        print(f"  wrong {what} -> {type(err).__name__}: {str(err).splitlines()[0] if err else 'no error'}")
        ok &= check_true(f"{label}_rejects_wrong_{what}", err is not None, 1)
    return bool(ok)
# --8<-- [end:check_operator]


def main() -> int:
    course_tools.parser("check the hand-derived GELU derivative against autograd (CPU, float64)").parse_args()
    torch.manual_seed(0)
    x = (torch.randn(10007, dtype=torch.float64) * 3).requires_grad_()
    y = gelu_composite(x)
    g = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, x, g)
    ok = check_close("composite_matches_torch_gelu_tanh", y, torch.nn.functional.gelu(x, approximate="tanh"), 1e-12,
                     1e-12)
    ok &= check_close("hand_derivative_matches_autograd", gelu_backward_composite(g, x.detach()), dx, 1e-12, 1e-12)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
