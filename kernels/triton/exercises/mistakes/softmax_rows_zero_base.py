"""A plausible wrong answer to the masked softmax exercise (docs/triton/exercises.md): the base clamped
at 0 instead of replacing only -inf, which avoids the NaN of a fully masked row but underflows every
exp of a row whose scores are all far below 0 (zeros instead of a softmax).
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:mistake]
@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=float("-inf"))
    base = tl.maximum(tl.max(x, axis=0), 0.0)
    e = tl.exp(x - base)
    d = tl.sum(e, axis=0)
    inv = tl.where(d == 0.0, 0.0, 1.0 / d)
    tl.store(out_ptr + row * cols + offsets, e * inv, mask=mask)
# --8<-- [end:mistake]
