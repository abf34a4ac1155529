"""A plausible wrong answer to the masked vector-addition exercise (docs/triton/exercises.md): the sum
computed with PyTorch in a host function, no Triton kernel. The checker must reject it (is_a_kernel).
"""
# course: compile-only


# --8<-- [start:mistake]
def add_kernel(x, y, out, n, BLOCK):
    out.copy_(x + y)
# --8<-- [end:mistake]
