"""A plausible wrong answer to the 2D-grid exercise (docs/first-kernels/exercises.md): the sum computed
on the host with NumPy, no kernel at all. The checker must reject it (is_a_kernel).
"""
# course: compile-only


# --8<-- [start:mistake]
def matrix_add(a, b, out):
    out.copy_to_device(a.copy_to_host() + b.copy_to_host())
# --8<-- [end:mistake]
