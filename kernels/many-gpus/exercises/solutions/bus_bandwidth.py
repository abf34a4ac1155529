"""Solution to the bus-bandwidth exercise (docs/many-gpus/exercises.md).
Check it: python -m course.exercise bus_bandwidth --solution
"""
# course: compile-only


# --8<-- [start:solution]
def bandwidths(collective: str, size_bytes: int, ranks: int, time_ms: float) -> tuple[float, float]:
    """(algorithm bandwidth, bus bandwidth) in GB/s; see the stub."""
    n = ranks
    factor = {
        "all-reduce": 2 * (n - 1) / n,   # a reduce-scatter and an all-gather
        "reduce-scatter": (n - 1) / n,   # n - 1 of the n chunks arrive at each rank
        "all-gather": (n - 1) / n,
        "broadcast": 1.0,                # every byte reaches every rank once
        "all-to-all": (n - 1) / n,       # a rank keeps its own chunk
    }
    if collective not in factor:
        raise ValueError(f"unknown collective {collective!r}")
    algbw = size_bytes / (time_ms * 1e-3) / 1e9  # bytes per second, in units of 10^9
    return algbw, algbw * factor[collective]
# --8<-- [end:solution]
