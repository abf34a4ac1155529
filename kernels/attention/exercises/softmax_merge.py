"""Exercise (docs/attention/exercises.md): merge two partial softmax results, the last step of
split-KV decoding. Each of two programs saw half of a row's keys and kept (m, l, acc): its largest
score m, l = sum of exp(s - m), acc = sum of exp(s - m) * v. Merge them into the (m, l, acc) of all
the keys, one program per row, in Triton. A half that saw no keys has m = -inf, l = 0, acc = 0; so
may both.

Check it (on a GPU, or on the CPU with Triton's interpreter):
    python -m course.exercise softmax_merge [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:stub]
@triton.jit
def merge_kernel(m1_ptr, l1_ptr, acc1_ptr, m2_ptr, l2_ptr, acc2_ptr, m_ptr, l_ptr, acc_ptr,
                 D, row_stride, BLOCK_D: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_D)  # BLOCK_D: the next power of two >= D
    mask = cols < D
    # acc1, acc2 and acc are rows x D, row r at acc_ptr + r * row_stride (row_stride >= D).
    # TODO (about 12 lines):
    #  1. load m1, l1, m2, l2 of this row and the two acc rows;
    #  2. m = max(m1, m2); rescale each half to the new maximum: s1 = exp(m1 - m), s2 = exp(m2 - m);
    #  3. l = l1 * s1 + l2 * s2, acc = acc1 * s1 + acc2 * s2; store m, l and acc.
    #  When both halves are empty, m1 = m2 = m = -inf and m1 - m is NaN: the result must be
    #  m = -inf, l = 0, acc = 0, never NaN.
# --8<-- [end:stub]
