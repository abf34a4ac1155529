"""A plausible wrong answer to the masked softmax exercise (docs/triton/exercises.md): torch.softmax
in a host function with the fully masked rows patched, no Triton kernel. The checker must reject it.
"""
# course: compile-only
import torch


# --8<-- [start:mistake]
def softmax_kernel(x, out, cols, BLOCK):
    out.copy_(torch.nan_to_num(torch.softmax(x, dim=1), nan=0.0))
# --8<-- [end:mistake]
