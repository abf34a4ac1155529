"""Exercise (docs/pytorch-extensions/exercises.md): give a custom operator its fake (meta) function,
so that torch.compile, torch.export and FakeTensor can trace it without running it. The operator,
course_ex::rms_normalize, divides every row of x by its root mean square; its real implementation
is written for you.

Check it (CPU tensors: no GPU needed):
    python -m course.exercise fake_op
"""
# course: compile-only
import torch


@torch.library.custom_op("course_ex::rms_normalize", mutates_args=())
def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Every row (last dimension) of x divided by sqrt(mean(x^2) + eps)."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)


# --8<-- [start:stub]
@rms_normalize.register_fake
def _(x, eps):
    # TODO: return a tensor with the metadata (shape, dtype, device) of the output, computing nothing.
    # Hint: one line; torch.empty_like does it.
    raise NotImplementedError("write the fake function of course_ex::rms_normalize")
# --8<-- [end:stub]
