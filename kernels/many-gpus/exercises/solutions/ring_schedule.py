"""Solution to the ring-schedule exercise (docs/many-gpus/exercises.md).
Check it: python -m course.exercise ring_schedule --solution
"""
# course: compile-only


# --8<-- [start:solution]
def chunk_range(chunk: int, size: int, ranks: int) -> tuple[int, int]:
    """[start, stop) of chunk `chunk` of `ranks` near-equal chunks; see the stub."""
    if ranks < 1 or size < 0 or not 0 <= chunk < ranks:
        raise ValueError(f"no chunk {chunk} of a buffer of {size} elements on {ranks} ranks")
    base, extra = divmod(size, ranks)  # the first `extra` chunks hold base + 1 elements
    start = chunk * base + min(chunk, extra)
    return start, start + base + (chunk < extra)


def send_chunk(rank: int, step: int, ranks: int) -> int:
    """The chunk `rank` sends to the next rank at `step`; see the stub."""
    # At the last step, ranks - 2, rank r - 1 must send chunk r to rank r: each rank sends the chunk one
    # past its own, (rank - (ranks - 2) - 1) mod ranks. Each step earlier, one chunk earlier.
    return (rank - step - 1) % ranks
# --8<-- [end:solution]
