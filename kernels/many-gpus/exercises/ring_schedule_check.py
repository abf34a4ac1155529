"""ring_schedule_check.py: the checker for the ring-schedule exercise of docs/many-gpus/exercises.md.
It imports kernels/many-gpus/exercises/ring_schedule.py (or, with --solution,
kernels/many-gpus/exercises/solutions/ring_schedule.py) and checks:
  - chunk_range on 1 to 9 ranks and sizes drawn from the seed, 0 and 1 and sizes below the rank count
    among them: the chunks in order, contiguous, covering [0, size), lengths differing by at most one;
  - send_chunk by running the ring reduce-scatter it describes on every rank count from 1 to 9, each rank
    holding random integers (so sums are exact): every chunk index in range, every rank sending on at
    the next step the chunk it has just received, and rank r holding chunk r of the sum at the end;
  - bad arguments (0 ranks, a negative size, a chunk out of range) raising ValueError.

Run: python -m course.exercise ring_schedule     (or this file, with --solution, --seed S)
"""
# course: run --solution --seed 21
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import course_tools  # noqa: E402
import exercise_tools  # noqa: E402


def said(what: str, shown: list) -> None:
    """Print the first few reasons a check fails, then stay quiet."""
    if len(shown) < 5:
        print(f"  {what}")
    shown.append(what)


def check_chunks(module, rng) -> bool:
    wrong: list = []
    for ranks in range(1, 10):
        for size in {0, 1, ranks - 1, ranks, ranks + 1, rng.randint(2, 50), rng.randint(1000, 10**7)}:
            try:
                chunks = [tuple(module.chunk_range(k, size, ranks)) for k in range(ranks)]
            except Exception as e:  # the reader's code may raise anything
                said(f"chunk_range(k, {size}, {ranks}) raised {type(e).__name__}: {e}", wrong)
                continue
            ends = [0] + [stop for _, stop in chunks]
            lengths = [stop - start for start, stop in chunks]
            if any(start != end for (start, _), end in zip(chunks, ends)) or ends[-1] != size:
                said(f"{size} elements on {ranks} ranks: chunks {chunks} do not cover [0, {size}) in order", wrong)
            elif min(lengths) < 0 or max(lengths) - min(lengths) > 1:
                said(f"{size} elements on {ranks} ranks: chunk lengths {lengths} differ by more than one", wrong)
    return course_tools.check_true("chunk_ranges", not wrong, 9, f"wrong={len(wrong)}")


def check_ring(module, rng) -> bool:
    wrong: list = []
    for ranks in range(1, 10):
        size = rng.randint(ranks, 4 * ranks + 3)
        data = [[rng.randint(-1000, 1000) for _ in range(size)] for _ in range(ranks)]
        want = [sum(column) for column in zip(*data)]
        bufs = [list(row) for row in data]
        received = [None] * ranks  # the chunk each rank received at the previous step
        try:
            for step in range(ranks - 1):
                sends = [module.send_chunk(r, step, ranks) for r in range(ranks)]
                if any(not isinstance(c, int) or not 0 <= c < ranks for c in sends):
                    raise ValueError(f"step {step}: chunks {sends} not all in [0, {ranks})")
                for r, c in enumerate(sends):
                    if received[r] is not None and c != received[r]:
                        said(f"{ranks} ranks, step {step}: rank {r} sends chunk {c}, not chunk {received[r]} "
                             "that it has just received and reduced", wrong)
                # Every rank sends the chunk as it holds it before the step, then the receivers add.
                messages = [bufs[r][slice(*module.chunk_range(c, size, ranks))] for r, c in enumerate(sends)]
                for r, c in enumerate(sends):
                    start, stop = module.chunk_range(c, size, ranks)
                    dest = (r + 1) % ranks
                    bufs[dest][start:stop] = [a + b for a, b in zip(bufs[dest][start:stop], messages[r])]
                    received[dest] = c
            for r in range(ranks):
                start, stop = module.chunk_range(r, size, ranks)
                if bufs[r][start:stop] != want[start:stop]:
                    said(f"{ranks} ranks: rank {r} ends with {bufs[r][start:stop]} in chunk {r}, "
                         f"not the sum {want[start:stop]}", wrong)
        except Exception as e:  # the reader's code may raise anything
            said(f"{ranks} ranks: {type(e).__name__}: {e}", wrong)
    return course_tools.check_true("ring_reduce_scatter", not wrong, 9, f"wrong={len(wrong)}")


def check_bad_arguments(module) -> bool:
    wrong: list = []
    for args in ((0, 10, 0), (0, -1, 4), (4, 10, 4), (-1, 10, 4)):
        try:
            module.chunk_range(*args)
            said(f"chunk_range{args} returned instead of raising ValueError", wrong)
        except ValueError:
            pass
        except Exception as e:
            said(f"chunk_range{args} raised {type(e).__name__}, not ValueError", wrong)
    return course_tools.check_true("bad_arguments_raise", not wrong, 4)


def main() -> int:
    module, _, seed = exercise_tools.start("Check the ring-schedule exercise.", runs_on_cpu=True)
    rng = random.Random(seed)
    results = [check_chunks(module, rng), check_ring(module, rng), check_bad_arguments(module)]
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
