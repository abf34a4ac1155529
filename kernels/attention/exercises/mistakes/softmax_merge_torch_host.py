"""A plausible wrong answer to the softmax-merge exercise (docs/attention/exercises.md): the merge
computed on the host with PyTorch, no Triton kernel. The checker must reject it (is_a_kernel).
"""
# course: compile-only
import torch


# --8<-- [start:mistake]
def merge_kernel(m1, l1, acc1, m2, l2, acc2, m, l, acc, D, row_stride, BLOCK_D):
    m.copy_(torch.maximum(m1, m2))
    base = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    s1, s2 = torch.exp(m1 - base), torch.exp(m2 - base)
    l.copy_(l1 * s1 + l2 * s2)
    acc.copy_(acc1 * s1[:, None] + acc2 * s2[:, None])
# --8<-- [end:mistake]
