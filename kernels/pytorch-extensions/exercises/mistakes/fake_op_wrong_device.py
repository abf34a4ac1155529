"""A plausible wrong answer to the fake-function exercise (docs/pytorch-extensions/exercises.md): the
fake output has x's shape, dtype and strides but is always on the CPU: right for CPU tensors only (the
checker also runs the meta device and, with a GPU, CUDA).
"""
# course: compile-only
import torch


@torch.library.custom_op("course_ex::rms_normalize", mutates_args=())
def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Every row (last dimension) of x divided by sqrt(mean(x^2) + eps)."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)


# --8<-- [start:mistake]
@rms_normalize.register_fake
def _(x, eps):
    return torch.empty_like(x, device="cpu")
# --8<-- [end:mistake]
