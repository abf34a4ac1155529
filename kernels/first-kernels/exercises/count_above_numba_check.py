"""count_above_numba_check.py: the checker for the Numba counting exercise of
docs/first-kernels/exercises.md. It launches the kernel in
kernels/first-kernels/exercises/count_above_numba.py (or, with --solution,
kernels/first-kernels/exercises/solutions/count_above_numba.py) with ceil(n / 64) blocks of 64 threads
on random inputs whose sizes, drawn from the seed, are odd (and 0 and 1), with a threshold t drawn
from the seed and many elements exactly equal to t (which are not greater than t), the counter
starting at a value drawn from the seed (the kernel adds to it), followed by guard elements
that must stay untouched, and compares the count exactly. It first checks that the file exposes a
@cuda.jit kernel, not a host function; on the simulator a counter changed other than by
cuda.atomic.add (count[0] += 1, which loses updates on a GPU) fails too. --sim runs it on Numba's CUDA
simulator (no GPU).

Run: python -m course.exercise count_above_numba     (or this file, with --solution, --sim, --seed S)
"""
# course: run --solution --sim --seed 13
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import exercise_tools  # noqa: E402

THREADS = 64


def cases(kernel, sim, rng):
    import numpy as np
    from numba import cuda

    ranges = [(300, 1300) if sim else (1_000_000, 4_000_000), (2000, 4000)]
    for n in exercise_tools.sizes(rng, ranges, 2, edges=(0, 1)):  # odd sizes, never a multiple of the block
        t = np.float32(rng.uniform(-1, 1))
        # values from a small set that holds t: a fifth or so of the elements equal t exactly
        x = rng.choice(np.array([t - 1, t - 0.5, t, t + 0.25, t + 1], dtype=np.float32), n)
        start = np.uint64(rng.integers(0, 1000))
        counter = np.full(1 + 255, 77, dtype=np.uint64)  # the counter, then guard elements
        counter[0] = start
        if sim:
            counter = exercise_tools.atomic_writes_only(counter)
        d_x, _ = exercise_tools.guarded(x, np.float32(t + 1), sim)  # never an empty device array;
        # elements past the end are greater than t: a kernel that reads them counts too many
        d_whole = cuda.to_device(counter)
        name = f"count_above_n{n}"
        blocks = max(1, (n + THREADS - 1) // THREADS)  # one block for n == 0: it must count nothing
        if exercise_tools.launch_sized(name, 1, kernel, (blocks, THREADS), d_x, t, d_whole[:1]):
            got = np.asarray(d_whole.copy_to_host())
            want = int(start) + int((x > t).sum())
            if got[0] != want:
                print(f"  {name}: counted {int(got[0]) - int(start)} elements greater than t, want "
                      f"{want - int(start)} ({int((x == t).sum())} elements equal t and are not greater)")
            yield exercise_tools.compare(name, got[:1], np.array([want]), 0, 0)
            yield exercise_tools.past_the_end(name, d_whole, (1,), np.uint64(77))
        else:
            yield False


if __name__ == "__main__":
    sys.exit(exercise_tools.numba_check("Check the counting exercise (Numba).", "count_above", cases))
