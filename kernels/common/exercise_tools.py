"""exercise_tools.py: what every Python exercise checker shares (kernels/*/exercises/*_check.py), the
Python counterpart of kernels/common/exercise.cuh.

Taught in docs/contributing.md (adding an exercise). `python -m course.exercise NAME` runs a checker;
a checker can also be run by hand:

    python kernels/<chapter>/exercises/NAME_check.py [--solution] [--sim] [--seed S]

    start(description, simulator) a checker's first steps, in order: its options, the simulator
                                  switch, the inputs' seed, the file under test imported (NAME.py
                                  beside the checker NAME_check.py, or solutions/NAME.py)
    numba_start(description, kernel_name)
    triton_start(description, kernel_name)
                                  start() for a Numba or a Triton checker, returning the kernel under
                                  test (after is_kernel: a host function ends the check) and the
                                  random source its inputs are drawn from
    numba_check(description, kernel_name, cases)
                                  a whole Numba checker: numba_start, the verdicts that
                                  cases(kernel, sim, rng) yields, finish's exit code
    draw(source, lo, hi)          an int in [lo, hi) from a NumPy or a torch random source
    draw_off_multiple(source, lo, hi, block), draw_off_power_of_two(source, lo, hi)
                                  the same, moved off a multiple of `block` or off a power of two
    sizes(source, ranges, block, edges)
                                  a draw_off_multiple from each range, then edge sizes
    vector_sizes(source, sim, block)
                                  the lengths a 1-D exercise in blocks of `block` threads is checked at
    checker_parser(description)   course_tools.parser with --solution, --sim and --seed
    use_simulator(args, ...)      set NUMBA_ENABLE_CUDASIM / TRITON_INTERPRET before numba or triton
                                  is imported, or exit 1 when neither a GPU nor --sim is there
    exercise_files()              the stub and the solution of the checker being run
    load(stub, solution, args)    import the reader's file (or the course's solution) as a module
    launch(name, kernel, grid, *a)  run a Numba or Triton kernel; an exception it raises becomes a
                                  failing CHECK line (what was raised), not a traceback
    launch_sized(name, size, kernel, grid, *a)
                                  launch(), whose failing CHECK line counts `size` elements
    is_kernel(kernel, dialect)    a failing check unless the file under test exposes a real Numba CUDA
                                  kernel (@cuda.jit) or Triton kernel (@triton.jit), not a host function
    whole_writes_refused(array)   (simulator) a device array whose kernel may write single elements
                                  only: an array expression (out[:] = a * x + y) raises
    atomic_writes_only(array)     (simulator) an array that a kernel may change through cuda.atomic
                                  only: a plain read-modify-write (count[0] += 1) raises
    guarded(array, before, after) a device array inside a larger one filled with a sentinel, to show
                                  writes past the end
    compare(name, got, want, ...) course_tools.check_close, preceded by how many elements are wrong
                                  and the first few (index, expected, got)
    launch_compared(name, size, kernel, grid, *args, whole=, want=, fill=, rtol=, atol=)
                                  launch_sized, then compare the guarded output with `want` and check
                                  that nothing past its end was written
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import sys
from pathlib import Path

import course_tools

ROOT = Path(__file__).resolve().parents[2]


def checker_parser(description: str):
    p = course_tools.parser(description)
    p.add_argument("--solution", action="store_true", help="check the course's solution instead of your file")
    p.add_argument("--file", help="check this file instead of the exercise's stub")
    p.add_argument("--sim", action="store_true",
                   help="run the kernel on the CPU (Numba's CUDA simulator, Triton's interpreter)")
    p.add_argument("--seed", type=int, default=None, help="the inputs' seed (default: a fresh one, printed)")
    return p


def seed_of(args) -> int:
    """The seed to draw inputs from: --seed, or a fresh one, printed so that a failure can be replayed."""
    seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    print(f"seed {seed} (repeat these inputs with --seed {seed})")
    return seed


def _numpy_shim_for_numba_cuda() -> None:
    """numba-cuda compiles a kernel only after registering its NumPy overloads, one of which names
    np.row_stack; NumPy 2.5 removed that alias of np.vstack (the GPU machine has NumPy 2.5), and the
    first kernel launch then raises AttributeError. Restoring the alias changes nothing else."""
    import numpy as np

    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


def use_simulator(args, env_var: str | None) -> bool:
    """Call before importing numba or triton. --sim sets env_var (the simulator or interpreter switch);
    without --sim a GPU is needed: exit 1 with a plain message if there is none."""
    _numpy_shim_for_numba_cuda()
    if args.sim:
        if env_var is None:
            sys.exit("error: this exercise has no simulator; run it without --sim on a machine with a GPU")
        os.environ[env_var] = "1"
        return True
    try:
        import torch
        if torch.cuda.is_available():
            return False
    except ImportError:
        pass
    import subprocess
    try:
        ok = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        sys.exit("error: no CUDA GPU is available; add --sim to run the kernel on the CPU instead")
    return False


def exercise_files() -> tuple[str, str]:
    """The stub and the solution of the checker being run, kernels/<chapter>/exercises/NAME_check.py:
    NAME.py beside it and solutions/NAME.py, relative to the repository's root (the layout that
    course/exercise.py's Exercise.stub and .solution name)."""
    checker = Path(sys.modules["__main__"].__file__).resolve()
    name, folder = checker.name.removesuffix("_check.py"), checker.parent.relative_to(ROOT).as_posix()
    return f"{folder}/{name}.py", f"{folder}/solutions/{name}.py"


def load(stub: str, solution: str, args):
    """Import the file to check as a module: --file, else the course's solution with --solution, else the
    reader's stub. Paths are relative to the repository's root."""
    rel = args.file or (solution if args.solution else stub)
    path = (ROOT / rel) if not Path(rel).is_absolute() else Path(rel)
    if not path.is_file():
        sys.exit(f"error: no such file: {rel}")
    print(f"checking {path.relative_to(ROOT) if ROOT in path.parents else path}")
    spec = importlib.util.spec_from_file_location(path.stem + "_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RAISED: set = set()  # what the reader's kernel raised, printed in full once


def launch(name: str, kernel, config, *args, **kwargs) -> bool:
    """kernel[config](*args, **kwargs) for a Numba or Triton kernel, then wait for it. An exception
    (an index out of range in the simulator, a compile error) becomes a failing CHECK line that says
    what was raised, instead of a traceback."""
    return launch_sized(name, 1, kernel, config, *args, **kwargs)


def launch_sized(name: str, size: int, kernel, config, *args, **kwargs) -> bool:
    """launch(), whose failing CHECK line counts `size` elements (the case's output). The same exception
    raised on several cases is printed in full once."""
    try:
        kernel[config](*args, **kwargs)
        if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and "numba" in sys.modules:
            from numba import cuda
            cuda.synchronize()
    except Exception as e:  # the reader's kernel may fail in any way: report it as the checker's verdict
        message = " ".join(str(e).split())[:300]
        # the simulator names the thread that raised (tid=[..] ctaid=[..]): the same error on another
        # thread, or in another case, is the same failure, printed once
        same = re.sub(r"\d+", "#", re.sub(r"tid=\[[^]]*\] ctaid=\[[^]]*\]:? ?", "", message))
        if (type(e).__name__, same) in _RAISED:
            print(f"  {name}: your kernel raised the same {type(e).__name__} as above")
        else:
            _RAISED.add((type(e).__name__, same))
            print(f"  {name}: your kernel raised {type(e).__name__}: {message}")
        course_tools.check_true(name, False, size, f"raised {type(e).__name__}")
        return False
    return True


def _numba_probe(out):  # compiled by nothing: cuda.jit of it gives the type of a real Numba kernel
    out[0] = 0


def _triton_probe(x_ptr):  # the same for triton.jit (which reads the source of a function in a file)
    pass


def is_kernel(kernel, dialect: str) -> bool:
    """A check that the file under test exposes a real kernel: for dialect "numba", what @cuda.jit
    returns (a dispatcher on a GPU, the simulator's kernel with --sim), for "triton" what @triton.jit
    returns (a JITFunction, or the interpreter's function). A host function that computes the answer
    with NumPy or PyTorch teaches nothing about kernels and would run on the CPU: it fails here."""
    if dialect == "numba":
        from numba import cuda
        want = type(cuda.jit(_numba_probe))
        decorator = "@cuda.jit"
    else:
        import triton
        want = type(triton.jit(_triton_probe))
        decorator = "@triton.jit"
    ok = type(kernel) is want  # exactly: a subclass could override the launch and compute on the host
    if not ok:
        print(f"  the file exposes a {type(kernel).__name__}, not a kernel: decorate it with {decorator} and "
              f"compute inside it (no NumPy or PyTorch on the host)")
    return course_tools.check_true("is_a_kernel", ok, 1, f"a {decorator} kernel" if ok else
                                   f"a {type(kernel).__name__}, not a {decorator} kernel")


def whole_writes_refused(array):
    """With --sim: `array` (NumPy) as an array whose element-at-a-time writes work and whose whole-array
    writes (out[:] = ..., out[a:b] = ...) raise. In Numba's simulator every thread runs the kernel's
    Python, so a NumPy array expression written in a kernel gives the right numbers there while no
    thread computes its own element (and the GPU refuses to compile it)."""
    import numpy as np

    class OneElementAtATime(np.ndarray):
        def __setitem__(self, key, value):
            keys = key if isinstance(key, tuple) else (key,)
            if len(keys) != self.ndim or not all(isinstance(k, (int, np.integer)) for k in keys):
                raise TypeError(f"the kernel wrote {key!r} of an output at once (a NumPy array expression): "
                                f"each thread writes its own element(s), one index at a time")
            super().__setitem__(key, value)

    return array.view(OneElementAtATime)


def atomic_writes_only(array):
    """With --sim: `array` (NumPy) as an array that a kernel may change through cuda.atomic.add only. On a
    GPU, threads that run `count[0] += 1` at once lose updates; the simulator runs its threads one
    Python step at a time and rarely shows it. Its cuda.atomic.add holds a lock while it writes; a write
    made while no thread holds that lock is a plain read-modify-write, and raises here."""
    import numpy as np
    from numba.cuda.simulator.kernelapi import addlock

    class AtomicOnly(np.ndarray):
        def __setitem__(self, key, value):
            if not addlock.locked():
                raise TypeError("the kernel changed a counter without cuda.atomic.add (a plain read-modify-"
                                "write: on a GPU, threads that do it at once lose updates)")
            super().__setitem__(key, value)

    return array.view(AtomicOnly)


def guarded(array, fill, sim: bool, guard: int = 256):
    """A device copy of NumPy `array` (a Numba kernel's output) that is a view into a larger device array
    whose extra elements, `guard` rows after the end (the view stays contiguous, which kernels
    launched on the simulator need), hold `fill`: a kernel that writes past the end changes them (on
    a GPU nothing else would show it). Returns (the view, the whole array)."""
    import numpy as np
    from numba import cuda

    whole = np.full((array.shape[0] + guard, *array.shape[1:]), fill, dtype=array.dtype)
    whole[tuple(slice(0, d) for d in array.shape)] = array
    if sim:
        whole = whole_writes_refused(whole)
    d_whole = cuda.to_device(whole)
    return d_whole[:array.shape[0]], d_whole


def past_the_end(name: str, d_whole, shape, fill) -> bool:
    """The check that a kernel wrote nothing past the end of its output (see guarded)."""
    import numpy as np

    whole = np.asarray(d_whole.copy_to_host())
    inside = np.zeros(whole.shape, dtype=bool)
    inside[tuple(slice(0, d) for d in shape)] = True
    outside = whole[~inside]
    bad = int((outside != fill).sum())
    if bad:
        print(f"  {name}_past_the_end: {bad} elements past the end of the output were written (a bounds check "
              f"is missing)")
    # n counts the guard elements checked (none of them is the case's output, which may be empty)
    return course_tools.check_true(f"{name}_past_the_end", bad == 0, outside.size,
                                   f"guard elements past the end of {int(np.prod(shape))}: {bad} written")


# --8<-- [start:compare]
def compare(name: str, got, want, rtol: float, atol: float, shown: int = 5) -> bool:
    """course_tools.check_close (which prints the CHECK line), preceded, when it fails, by how many
    elements are wrong and the first `shown` of them, with their index (a tuple for an array of more
    than one dimension), the expected value and the value the kernel wrote."""
    import numpy as np

    try:
        import torch
        if isinstance(got, torch.Tensor):
            got = got.detach().cpu().double().numpy()
        if isinstance(want, torch.Tensor):
            want = want.detach().cpu().double().numpy()
    except ImportError:
        pass
    g = np.asarray(got, dtype=np.float64)
    w = np.broadcast_to(np.asarray(want, dtype=np.float64), g.shape)
    with np.errstate(invalid="ignore"):
        err = np.where(g == w, 0.0, np.abs(g - w))
    same_inf = np.isinf(w) & (g == w)  # equal infinities match (-inf for a row of -inf), whatever rtol is
    g, w = np.where(same_inf, 0.0, g), np.where(same_inf, 0.0, w)
    bad = ~(err <= atol + rtol * np.abs(w))
    if bad.any():
        for flat in np.flatnonzero(bad)[:shown]:
            index = np.unravel_index(flat, g.shape) if g.ndim > 1 else int(flat)
            index = tuple(int(i) for i in index) if g.ndim > 1 else index
            print(f"  wrong at index {index}: expected {w.flat[flat]:.9g}, got {g.flat[flat]:.9g}")
        nan = int(np.isnan(g[bad]).sum())  # the output starts as NaN: an element left NaN was never written
        print(f"  {name}: {int(bad.sum())} of {g.size} elements wrong" +
              (f" ({nan} of them NaN: never written by your kernel, or computed as NaN)" if nan else ""))
    return course_tools.check_close(name, g, w, rtol, atol)
# --8<-- [end:compare]


def launch_compared(name: str, size: int, kernel, config, *args, whole, want, fill, rtol: float = 0.0,
                    atol: float = 0.0, **kwargs) -> list[bool]:
    """A Numba case's launch and checks: launch_sized, then the output (the leading want.shape of the
    guarded device array `whole`, see guarded) compared with NumPy `want`, and past_the_end. An empty
    output is not compared: only nothing written past it is checked. Returns the checks' verdicts."""
    if not launch_sized(name, size, kernel, config, *args, **kwargs):
        return [False]
    results = []
    if want.size:
        got = whole.copy_to_host()[tuple(slice(0, d) for d in want.shape)]
        results.append(compare(name, got, want, rtol, atol))
    return results + [past_the_end(name, whole, want.shape, fill)]


def draw(source, lo: int, hi: int) -> int:
    """An integer in [lo, hi) from a checker's random source: a NumPy Generator (numba_start) or a
    torch.Generator (triton_start)."""
    if hasattr(source, "integers"):
        return int(source.integers(lo, hi))
    import torch

    return int(torch.randint(lo, hi, (1,), generator=source))


def draw_off_multiple(source, lo: int, hi: int, block: int) -> int:
    """draw(), plus 1 where that is a multiple of `block` (block 2: an odd size): a kernel must handle
    a partial block."""
    n = draw(source, lo, hi)
    return n + (n % block == 0)


def draw_off_power_of_two(source, lo: int, hi: int) -> int:
    """draw(), plus 1 where that is a power of two: a width that a Triton block (a power of two) overhangs."""
    n = draw(source, lo, hi)
    return n + 1 if n & (n - 1) == 0 else n


def sizes(source, ranges, block: int, edges=()) -> list[int]:
    """A draw_off_multiple from each (lo, hi) of `ranges`, then the `edges` as they are (0, 1, ...)."""
    return [draw_off_multiple(source, lo, hi, block) for lo, hi in ranges] + list(edges)


def vector_sizes(source, sim: bool, block: int) -> list[int]:
    """The lengths a 1-D exercise launched in blocks of `block` threads is checked at: a large one
    (hundreds on the simulator, which is slow) and one of a few thousand, both off a multiple of
    `block`, then 0 (empty), 1 and block + 1 (one element past a full block)."""
    ranges = [(300, 1300) if sim else (500_000, 1_100_000), (3000, 6000)]
    return sizes(source, ranges, block, edges=(0, 1, block + 1))


def start(description: str, simulator: str | None = None, runs_on_cpu: bool = False):
    """What every checker does first, in this order: parse its options, set the simulator switch
    (simulator: NUMBA_ENABLE_CUDASIM or TRITON_INTERPRET, before numba or triton is imported; see
    use_simulator), print the inputs' seed, and import the file under test (see load). runs_on_cpu: the
    exercise runs on the CPU as it is (PyTorch operators), so --sim is refused and no GPU is needed.
    Returns (the imported module, whether it runs on the simulator, the seed)."""
    args = checker_parser(description).parse_args()
    if runs_on_cpu:
        if args.sim:
            sys.exit("error: this exercise runs on the CPU as it is: leave out --sim")
        sim = False
    else:
        sim = use_simulator(args, simulator)
    seed = seed_of(args)
    return load(*exercise_files(), args), sim, seed


def numba_start(description: str, kernel_name: str):
    """start() for a Numba checker (--sim: Numba's CUDA simulator). Returns (the kernel `kernel_name` of
    the file under test, whether it runs on the simulator, a NumPy Generator seeded with the seed)."""
    exercise, sim, seed = start(description, "NUMBA_ENABLE_CUDASIM")
    import numpy as np

    return _kernel_or_exit(exercise, kernel_name, "numba"), sim, np.random.default_rng(seed)


def numba_check(description: str, kernel_name: str, cases) -> int:
    """A whole Numba checker: numba_start, then `cases(kernel, sim, rng)`, a generator that launches the
    kernel on each case and yields one verdict per check (True: passed), then finish's exit code."""
    kernel, sim, rng = numba_start(description, kernel_name)
    return finish(list(cases(kernel, sim, rng)))


def triton_start(description: str, kernel_name: str):
    """start() for a Triton checker (--sim: Triton's interpreter). Returns (the kernel `kernel_name` of
    the file under test, the device its tensors go to: "cpu" on the interpreter, else "cuda", and a
    CPU torch.Generator seeded with the seed)."""
    exercise, sim, seed = start(description, "TRITON_INTERPRET")
    import torch

    return (_kernel_or_exit(exercise, kernel_name, "triton"), "cpu" if sim else "cuda",
            torch.Generator().manual_seed(seed))


def _kernel_or_exit(exercise, kernel_name: str, dialect: str):
    """The kernel `kernel_name` of the file under test; a host function (see is_kernel) fails the check
    and ends it, exit code 1."""
    kernel = getattr(exercise, kernel_name)
    if not is_kernel(kernel, dialect):
        sys.exit(finish([False]))
    return kernel


def finish(results: list[bool]) -> int:
    """The checker's exit code: 0 when every check passed (and there was one), else 1."""
    return 0 if results and all(results) else 1
