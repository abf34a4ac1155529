"""Exercise (docs/many-gpus/exercises.md): the schedule of a ring reduce-scatter, the first half of the
ring all-reduce: how a buffer is cut into one chunk per rank, and which chunk each rank sends to the
next one at each step.

Check it (plain Python: no GPU needed):
    python -m course.exercise ring_schedule
"""
# course: compile-only


# --8<-- [start:stub]
def chunk_range(chunk: int, size: int, ranks: int) -> tuple[int, int]:
    """[start, stop) of chunk `chunk` when a buffer of `size` elements is cut into `ranks` contiguous
    chunks in order, covering every element once, their lengths differing by at most one. A chunk may be
    empty (size < ranks). ranks < 1, size < 0 or chunk outside [0, ranks) raises ValueError."""
    # TODO: about four lines. The first size % ranks chunks get one element more.
    raise NotImplementedError("cut the buffer into chunks")


def send_chunk(rank: int, step: int, ranks: int) -> int:
    """The chunk that `rank` sends to rank (rank + 1) % ranks at step `step` (0 to ranks - 2) of the ring
    reduce-scatter. Every rank sends at every step; the receiver adds the chunk into its own copy and,
    at the next step, sends on the chunk it has just received. After ranks - 1 steps, rank r must hold
    chunk r of the sum of every rank's buffer (the reduce-scatter's output)."""
    # TODO: one line. Work back from the last step: what must rank r receive then?
    raise NotImplementedError("choose the chunk to send")
# --8<-- [end:stub]
