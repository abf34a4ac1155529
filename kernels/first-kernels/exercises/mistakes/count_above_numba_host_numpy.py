"""A plausible wrong answer to the counting exercise in Numba (docs/first-kernels/exercises.md): the
count taken on the host with NumPy, no kernel at all. The checker must reject it (is_a_kernel).
"""
# course: compile-only
import numpy as np


# --8<-- [start:mistake]
def count_above(x, t, count):
    count.copy_to_device(np.array([(x.copy_to_host() > t).sum()], dtype=np.uint64))
# --8<-- [end:mistake]
