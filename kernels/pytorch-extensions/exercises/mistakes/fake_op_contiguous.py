"""A plausible wrong answer to the fake-function exercise (docs/pytorch-extensions/exercises.md): the
fake output has x's shape, dtype and device but contiguous strides, while the real operator's output
keeps a transposed x's layout: right for contiguous inputs only.
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
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)
# --8<-- [end:mistake]
