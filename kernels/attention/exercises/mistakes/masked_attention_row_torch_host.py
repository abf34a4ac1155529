"""A plausible wrong answer to the masked attention-row exercise (docs/attention/exercises.md):
the attention computed on the host with PyTorch, no Triton kernel. The checker must reject it
(is_a_kernel).
"""
# course: compile-only
import torch


# --8<-- [start:mistake]
def attention_row_kernel(q, k, v, keep, out, N, D, scale, BLOCK_N, BLOCK_D):
    s = (q @ k.t() * scale).masked_fill(keep == 0, float("-inf"))
    out.copy_(torch.nan_to_num(torch.softmax(s, dim=1)) @ v)
# --8<-- [end:mistake]
