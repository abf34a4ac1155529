"""Exercise (docs/triton/exercises.md): vector addition in Triton, one program per BLOCK elements,
with a mask for the last, partial block.

Check it (on a GPU, or on the CPU with Triton's interpreter):
    python -m course.exercise add_masked [--sim]
"""
# course: compile-only
import triton
import triton.language as tl


# --8<-- [start:stub]
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    # TODO (4 lines):
    #  1. offsets = the BLOCK element indices of this program: pid * BLOCK + tl.arange(0, BLOCK);
    #  2. mask = offsets < n (n need not be a multiple of BLOCK);
    #  3. load x and y at those offsets with that mask, and store their sum into out_ptr, masked too.
    pass
# --8<-- [end:stub]
