"""bus_bandwidth_check.py: the checker for the bus-bandwidth exercise of docs/many-gpus/exercises.md.
It imports kernels/many-gpus/exercises/bus_bandwidth.py (or, with --solution,
kernels/many-gpus/exercises/solutions/bus_bandwidth.py) and compares bandwidths() with the factors of
kernels/many-gpus/collectives.py (nccl-tests' PERFORMANCE.md) on every collective, on 1, 2, 3, 4, 7 and
8 ranks, on sizes and times drawn from the seed (from 8 bytes and microseconds to GiB and seconds),
and on the worked case of the exercise page; a name that is not a collective must raise ValueError.

Run: python -m course.exercise bus_bandwidth     (or this file, with --solution, --seed S)
"""
# course: run --solution --seed 11
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import course_tools  # noqa: E402
import exercise_tools  # noqa: E402

from collectives import BUS_FACTOR  # noqa: E402  the chapter's program: one definition of the factors


_SAID: set = set()  # what the reader's function raised, printed once


def call(module, *args):
    """bandwidths(*args) as two floats, or None (and the reason printed once) when it raises or returns
    something else."""
    try:
        algbw, busbw = module.bandwidths(*args)
        return float(algbw), float(busbw)
    except Exception as e:  # the reader's code may raise anything
        what = f"{type(e).__name__}: {e}"
        if what not in _SAID:
            _SAID.add(what)
            print(f"  bandwidths{args} raised {what}")
        return None


def main() -> int:
    module, _, seed = exercise_tools.start("Check the bus-bandwidth exercise.", runs_on_cpu=True)
    rng = random.Random(seed)
    got_alg, got_bus, want_alg, want_bus = [], [], [], []
    cases = [("all-reduce", 1 << 30, 4, 4.5)]  # the page's worked case
    for name in BUS_FACTOR:
        for ranks in (1, 2, 3, 4, 7, 8):
            for _ in range(4):
                size = rng.choice([8, 1024, 4096 * 3, 1 << 20, 64 << 20, 1 << 30]) * rng.randint(1, 9)
                cases.append((name, size, ranks, rng.uniform(0.005, 2000.0)))
    for name, size, ranks, ms in cases:
        got = call(module, name, size, ranks, ms)
        algbw = size / (ms * 1e6)  # GB/s: bytes / (ms * 1e-3 s) / 1e9
        want_alg.append(algbw)
        want_bus.append(algbw * BUS_FACTOR[name](ranks))
        got_alg.append(got[0] if got else float("nan"))
        got_bus.append(got[1] if got else float("nan"))
    results = [exercise_tools.compare("algorithm_bandwidth", got_alg, want_alg, 1e-9, 0.0),
               exercise_tools.compare("bus_bandwidth", got_bus, want_bus, 1e-9, 0.0)]
    try:
        module.bandwidths("reduce", 1024, 2, 1.0)
        raised = False
        print("  bandwidths('reduce', ...) returned instead of raising ValueError")
    except ValueError:
        raised = True
    except Exception as e:
        raised = False
        print(f"  bandwidths('reduce', ...) raised {type(e).__name__}, not ValueError")
    results.append(course_tools.check_true("unknown_collective_raises", raised, 1))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
