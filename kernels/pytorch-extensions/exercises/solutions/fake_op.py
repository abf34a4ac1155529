"""Solution to the fake-function exercise (docs/pytorch-extensions/exercises.md).
Check it: python -m course.exercise fake_op --solution
"""
# course: compile-only
import torch


@torch.library.custom_op("course_ex::rms_normalize", mutates_args=())
def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Every row (last dimension) of x divided by sqrt(mean(x^2) + eps)."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)


# --8<-- [start:solution]
@rms_normalize.register_fake
def _(x, eps):
    return torch.empty_like(x)  # same shape, dtype, device and strides; no data
# --8<-- [end:solution]
