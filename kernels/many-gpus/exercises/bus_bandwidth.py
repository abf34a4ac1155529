"""Exercise (docs/many-gpus/exercises.md): turn a collective's measured time into the two figures
nccl-tests reports, its algorithm bandwidth and its bus bandwidth, for each of NCCL's five collectives.

Check it (plain Python: no GPU needed):
    python -m course.exercise bus_bandwidth
"""
# course: compile-only


# --8<-- [start:stub]
def bandwidths(collective: str, size_bytes: int, ranks: int, time_ms: float) -> tuple[float, float]:
    """(algorithm bandwidth, bus bandwidth), both in GB/s (10^9 bytes per second), of one collective
    on `ranks` ranks that took `time_ms` milliseconds. size_bytes is nccl-tests' S: the all-reduce's and
    the broadcast's buffer, the reduce-scatter's input, the all-gather's output, each rank's all-to-all
    send buffer. collective is one of "all-reduce", "reduce-scatter", "all-gather", "broadcast",
    "all-to-all"; any other name raises ValueError."""
    # TODO: the algorithm bandwidth is S / t; the bus bandwidth multiplies it by what each rank's links
    # carry for that collective (docs/many-gpus/collectives.md). About eight lines.
    raise NotImplementedError("compute the algorithm and bus bandwidth")
# --8<-- [end:stub]
