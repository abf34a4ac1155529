"""A plausible wrong answer to the clamp exercise in Numba (docs/first-kernels/exercises.md): the
answer computed on the host with NumPy, no kernel at all. The checker must reject it (is_a_kernel).
"""
# course: compile-only
import numpy as np


# --8<-- [start:mistake]
def clamp(x, y, lo, hi):
    y.copy_to_device(np.clip(x.copy_to_host(), lo, hi))
# --8<-- [end:mistake]
