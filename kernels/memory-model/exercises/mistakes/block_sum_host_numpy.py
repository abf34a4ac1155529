"""A plausible wrong answer to the shared-memory reduction exercise (docs/memory-model/exercises.md):
the block sums computed on the host with NumPy, no kernel. The checker must reject it (is_a_kernel).
"""
# course: compile-only
import numpy as np

# --8<-- [start:mistake]
THREADS = 128


def block_sums(x, partial):
    h = x.copy_to_host()
    padded = np.zeros(partial.size * THREADS, dtype=np.float32)
    padded[:h.size] = h
    partial.copy_to_device(padded.reshape(-1, THREADS).sum(axis=1))
# --8<-- [end:mistake]
