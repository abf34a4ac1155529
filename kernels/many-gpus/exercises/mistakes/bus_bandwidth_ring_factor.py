"""A plausible wrong answer to the bus-bandwidth exercise (docs/many-gpus/exercises.md): one factor,
(n - 1) / n, for every collective that moves chunks, so the all-reduce's bus bandwidth comes out half of
what it is (its ring runs a reduce-scatter and then an all-gather: twice the traffic).
"""
# course: compile-only


# --8<-- [start:mistake]
def bandwidths(collective: str, size_bytes: int, ranks: int, time_ms: float) -> tuple[float, float]:
    if collective not in ("all-reduce", "reduce-scatter", "all-gather", "broadcast", "all-to-all"):
        raise ValueError(f"unknown collective {collective!r}")
    algbw = size_bytes / (time_ms * 1e-3) / 1e9
    factor = 1.0 if collective == "broadcast" else (ranks - 1) / ranks
    return algbw, algbw * factor
# --8<-- [end:mistake]
