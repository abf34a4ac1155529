"""A plausible wrong answer to the softmax-merge exercise (docs/attention/exercises.md): the textbook
merge, with no care for two empty halves: exp(-inf - (-inf)) is NaN, and so is the merged row.
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:mistake]
@triton.jit
def merge_kernel(m1_ptr, l1_ptr, acc1_ptr, m2_ptr, l2_ptr, acc2_ptr, m_ptr, l_ptr, acc_ptr,
                 D, row_stride, BLOCK_D: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    m1, l1 = tl.load(m1_ptr + row), tl.load(l1_ptr + row)
    m2, l2 = tl.load(m2_ptr + row), tl.load(l2_ptr + row)
    acc1 = tl.load(acc1_ptr + row * row_stride + cols, mask=mask, other=0.0)
    acc2 = tl.load(acc2_ptr + row * row_stride + cols, mask=mask, other=0.0)
    m = tl.maximum(m1, m2)
    s1 = tl.exp(m1 - m)
    s2 = tl.exp(m2 - m)
    tl.store(m_ptr + row, m)
    tl.store(l_ptr + row, l1 * s1 + l2 * s2)
    tl.store(acc_ptr + row * row_stride + cols, acc1 * s1 + acc2 * s2, mask=mask)
# --8<-- [end:mistake]
