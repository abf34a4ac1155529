"""A plausible wrong answer to the SAXPY exercise (docs/first-kernels/exercises.md): the answer
computed on the host with NumPy, no kernel at all. The checker must reject it (is_a_kernel).
"""
# course: compile-only
import numpy as np


# --8<-- [start:mistake]
def saxpy(a, x, y, out):
    out.copy_to_device(np.float32(a) * x.copy_to_host() + y.copy_to_host())
# --8<-- [end:mistake]
