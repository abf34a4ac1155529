"""Exercise (docs/triton/exercises.md): a row softmax in Triton that follows the course's rules for
masked scores: a -inf score contributes 0, and a row whose every score is -inf gives all zeros
(as FlashAttention does; torch.softmax gives NaN there). As shipped, the kernel is the textbook
softmax: right on ordinary rows, NaN on fully masked ones.

Check it (on a GPU, or on the CPU with Triton's interpreter):
    python -m course.exercise softmax_rows [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:stub]
@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    offsets = tl.arange(0, BLOCK)  # BLOCK: the next power of two >= cols
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=float("-inf"))
    m = tl.max(x, axis=0)
    # TODO: when every score is -inf, m is -inf and x - m is -inf - (-inf) = NaN. Use 0 as the base
    # instead (tl.where), and make a row whose sum d is 0 give zeros instead of 0 / 0.
    e = tl.exp(x - m)
    d = tl.sum(e, axis=0)
    tl.store(out_ptr + row * cols + offsets, e / d, mask=mask)
# --8<-- [end:stub]
