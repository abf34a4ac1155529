"""A plausible wrong answer to the bus-bandwidth exercise (docs/many-gpus/exercises.md): bytes divided
by 2^30 (GiB/s) where nccl-tests and this course report GB/s (10^9 bytes per second), about 7% low.
"""
# course: compile-only


# --8<-- [start:mistake]
def bandwidths(collective: str, size_bytes: int, ranks: int, time_ms: float) -> tuple[float, float]:
    n = ranks
    factor = {"all-reduce": 2 * (n - 1) / n, "reduce-scatter": (n - 1) / n, "all-gather": (n - 1) / n,
              "broadcast": 1.0, "all-to-all": (n - 1) / n}
    if collective not in factor:
        raise ValueError(f"unknown collective {collective!r}")
    algbw = size_bytes / (time_ms * 1e-3) / 2**30
    return algbw, algbw * factor[collective]
# --8<-- [end:mistake]
