# course_ext: the packaged fused GELU. Importing it loads the compiled library (course_ext/_C), whose
# C++ registers torch.ops.course_ext.fused_gelu and fused_gelu_backward for CUDA tensors; this file
# adds what torch.compile and autograd need to know about them.
#
# Taught in docs/pytorch-extensions/torch-library.md. Built and installed by
# kernels/pytorch-extensions/setup.py, which kernels/pytorch-extensions/package_gelu.py runs.
#
# course: built-by kernels/pytorch-extensions/package_gelu.py
import torch

from . import _C  # noqa: F401  (loading the library runs its TORCH_LIBRARY registrations)

# --8<-- [start:fake]
# "Fake" (meta) implementations: the output's shape, dtype and device without computing anything.
# torch.compile traces with fake tensors, so an operator without one cannot be compiled.
@torch.library.register_fake("course_ext::fused_gelu")
def _(x):
    return x.new_empty(x.shape)  # contiguous, like the real kernel's output


@torch.library.register_fake("course_ext::fused_gelu_backward")
def _(grad, x):
    torch._check(grad.shape == x.shape, lambda: "fused_gelu backward: grad and x shapes differ")
    return x.new_empty(x.shape)
# --8<-- [end:fake]


# --8<-- [start:autograd]
def _setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)  # the backward recomputes tanh from x: nothing else is stored


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.course_ext.fused_gelu_backward(grad, x)


torch.library.register_autograd("course_ext::fused_gelu", _backward, setup_context=_setup_context)
# --8<-- [end:autograd]


def fused_gelu(x: torch.Tensor) -> torch.Tensor:
    """tanh-approximated GELU of a CUDA tensor in one kernel (differentiable; works under torch.compile)."""
    return torch.ops.course_ext.fused_gelu(x)
