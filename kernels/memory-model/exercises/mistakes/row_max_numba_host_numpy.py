"""A plausible wrong answer to the row-maximum exercise in Numba (docs/memory-model/exercises.md): the
maxima taken on the host with NumPy, no kernel at all. The checker must reject it (is_a_kernel).
"""
# course: compile-only


# --8<-- [start:mistake]
def row_max(x, out):
    out.copy_to_device(x.copy_to_host().max(axis=1))
# --8<-- [end:mistake]
