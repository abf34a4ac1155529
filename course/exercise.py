"""The course's exercises and the one command that checks them.

    python -m course.exercise list                  every exercise: chapter, language, whether it needs a GPU
    python -m course.exercise NAME                  build (or import) your file, run its checker, say what is wrong
    python -m course.exercise NAME --solution       the same for the course's solution
    python -m course.exercise NAME --sim            on the CPU: Numba's CUDA simulator or Triton's interpreter
    python -m course.exercise NAME --seed 1234      replay the inputs of an earlier run
    python -m course.exercise NAME --file PATH      check another file (a copy of the stub, beside it)
    python -m course.exercise NAME --mistake M      check one of the plausible mistakes registered below
    python -m course.exercise NAME --no-memcheck    CUDA C++: skip the run under compute-sanitizer memcheck
    python -m course.exercise NAME --verbose        show everything the build and the checker printed
    python -m course.exercise progress              the exercises you have passed, per chapter, and the next one

Each exercise is a stub with TODOs that compiles (or imports) and fails its checker as shipped, a
solution that passes, and a checker that draws fresh random inputs (the seed is printed), uses sizes
that are not multiples of the block size, fills the output with NaN before the kernel runs, and, for the
exercises about speed, times the kernel against a peer in the same run. On a GPU, a CUDA C++
exercise's checks run first under compute-sanitizer memcheck (without the timing), which reports any
access outside an allocation; --no-memcheck skips that run. CUDA C++ exercises: the stub
`#include`s its checker (`NAME_check.cuh`, which has `main`). Python exercises: the checker
(`NAME_check.py`) imports the stub. tests/test_exercises.py proves that every stub fails and every
solution passes, and that every registered mistake fails. A mistake that is the solution with one
deliberate error is stored as mistakes/STEM.diff against the solution and written out when it is
checked (course/mistakes.py); one that is a different program is a whole file, mistakes/STEM.cu or .py.
The runner shows each failed check once, the first with a few wrong values (course/exercise_report.py);
after a speed exercise passes, its kernel's share of the GPU's datasheet limit beside the course
solution's share from the GPU record (course/exercise_limits.py);
a pass of the reader's own file is kept for `progress` (course/exercise_progress.py).
Exit code: 0 pass, 1 fail (or bad usage), 2 waived (the GPU lacks a feature), 3 cannot check here (a
CUDA C++ exercise on a machine without a GPU: it compiles, and nothing was checked).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from course import exercise_limits, exercise_progress, exercise_report, gpu_run, programs, record
from course import mistakes as mistake_files

ROOT = programs.ROOT

SIMULATORS = {"numba": "NUMBA_ENABLE_CUDASIM", "triton": "TRITON_INTERPRET"}


def registry_reduced_to(runner: str, ex: "Exercise") -> str:
    """This file's text with the registry replaced by `ex`'s entry: what an exercise's hash reads of it."""
    # The markers as they stand at the start of a line (inside this function they are mid-line).
    start, end = runner.index("\n# --8<-- [start:registry]"), runner.index("\n# --8<-- [end:registry]")
    return runner[:start] + "\n" + repr(ex) + runner[end:]


@dataclass(frozen=True)
class Exercise:
    name: str
    chapter: str          # the docs/ folder whose exercises page presents it
    title: str
    lang: str             # cuda (C++), numba, triton, torch
    folder: str           # kernels/<chapter>/exercises
    speed: bool = False   # the checker's speed bar or time cap runs (with --bench)
    # Plausible wrong answers the checker must reject: mistakes/STEM.diff (the solution with one error)
    # or, for a different program, the file mistakes/STEM.cu or .py itself.
    mistakes: tuple[str, ...] = ()

    @property
    def stub(self) -> str:
        return f"{self.folder}/{self.name}.{'cu' if self.lang == 'cuda' else 'py'}"

    @property
    def solution(self) -> str:
        return f"{self.folder}/solutions/{self.name}.{'cu' if self.lang == 'cuda' else 'py'}"

    @property
    def checker(self) -> str:
        return f"{self.folder}/{self.name}_check.{'cuh' if self.lang == 'cuda' else 'py'}"

    def mistake_source(self, mistake: str) -> str:
        """What a registered mistake is stored as: its diff against the solution, or the whole file."""
        diff = mistake_files.diff_of(ROOT / self.folder / "mistakes", mistake)
        return diff.relative_to(ROOT).as_posix() if diff else f"{self.folder}/mistakes/{mistake}"

    def mistake_file(self, mistake: str) -> str:
        """The file to check for a registered mistake: a diff applied to the solution and written out
        (course/mistakes.py raises DiffError when it no longer applies), or the stored file."""
        if mistake not in self.mistakes:
            raise ValueError(f"{self.name} has no mistake {mistake!r}; it has {', '.join(self.mistakes)}")
        return mistake_files.materialise(ROOT / self.folder / "mistakes", mistake).relative_to(ROOT).as_posix()

    def hash_inputs(self) -> list[tuple[str, bytes]]:
        """What checking this exercise reads, as (name, content) for the content hash of its GPU items
        (tests/test_exercises.py, course/pytest_plugin.py): the stub, checker, solution and mistakes with
        the headers and modules they include or import (kernels/common/exercise.cuh, exercise_tools.py),
        and the runner: course/mistakes.py, exercise_report.py (what a test of the output reads),
        exercise_progress.py (which a pass calls), exercise_limits.py (a speed check's share of the
        GPU's limit), and this file with the registry reduced to this exercise's
        entry. Another exercise's files, or its registry entry, are not in it: editing one re-stales only
        that exercise's items."""
        found: list[Path] = []
        for rel in (self.stub, self.checker, self.solution, *(self.mistake_source(m) for m in self.mistakes)):
            path = ROOT / rel
            made_of = programs.parse(path).sources() if path.suffix in programs.SOURCE_SUFFIXES else [path]
            found += [p for p in made_of if p not in found]
        found += [ROOT / "course" / f for f in ("mistakes.py", "exercise_report.py", "exercise_progress.py",
                                                "exercise_limits.py")]
        return [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in found] + \
            [("course/exercise.py", registry_reduced_to(Path(__file__).read_text(), self).encode())]

    @property
    def simulator(self) -> str | None:
        """The environment switch that runs the kernel on the CPU, or None."""
        return SIMULATORS.get(self.lang)

    @property
    def needs_gpu(self) -> bool:
        return self.lang == "cuda"

    def where_it_runs(self) -> str:
        return {"cuda": "GPU", "numba": "GPU, or CPU with --sim (Numba simulator)",
                "triton": "GPU, or CPU with --sim (Triton interpreter)", "torch": "CPU or GPU"}[self.lang]


_FK, _MM, _LIB = "kernels/first-kernels/exercises", "kernels/memory-model/exercises", "kernels/libraries/exercises"
_MAT, _TRI = "kernels/matmul/exercises", "kernels/triton/exercises"
_EXT, _MN = "kernels/pytorch-extensions/exercises", "kernels/mnist/exercises"
_MG = "kernels/many-gpus/exercises"
_SRV = "kernels/serving/exercises"
_ATT = "kernels/attention/exercises"

# --8<-- [start:registry]
EXERCISES = [
    Exercise("clamp", "first-kernels", "Clamp with a grid-stride loop", "cuda", _FK,
             mistakes=("clamp_fixed_bounds.cu", "clamp_past_the_end.cu")),
    Exercise("count_above", "first-kernels", "Count with an atomic", "cuda", _FK,
             mistakes=("count_above_at_least.cu", "count_above_typed_in.cu")),
    Exercise("saxpy", "first-kernels", "SAXPY with a bounds check (Numba)", "numba", _FK,
             mistakes=("saxpy_host_numpy.py", "saxpy_array_expression.py", "saxpy_no_bounds_check.py",
                       "saxpy_fixed_size.py")),
    Exercise("matrix_add", "first-kernels", "A 2D grid over a matrix (Numba)", "numba", _FK,
             mistakes=("matrix_add_host_numpy.py", "matrix_add_array_expression.py", "matrix_add_one_bound.py")),
    Exercise("clamp_numba", "first-kernels", "Clamp with a grid-stride loop (Numba, no GPU needed)", "numba", _FK,
             mistakes=("clamp_numba_host_numpy.py", "clamp_numba_one_per_thread.py", "clamp_numba_fixed_bounds.py")),
    Exercise("count_above_numba", "first-kernels", "Count with an atomic (Numba, no GPU needed)", "numba", _FK,
             mistakes=("count_above_numba_host_numpy.py", "count_above_numba_not_atomic.py",
                       "count_above_numba_at_least.py")),
    Exercise("histogram", "first-kernels", "A histogram with shared-memory atomics", "cuda", _FK, speed=True,
             mistakes=("histogram_global_atomics.cu", "histogram_replay.cu")),
    Exercise("row_max", "memory-model", "The maximum of every row, one warp per row", "cuda", _MM,
             mistakes=("row_max_one_column.cu", "row_max_zero_start.cu")),
    Exercise("block_sum", "memory-model", "A block's sum in shared memory (Numba)", "numba", _MM,
             mistakes=("block_sum_host_numpy.py", "block_sum_no_tail.py")),
    Exercise("row_max_numba", "memory-model", "The maximum of every row, one block per row (Numba, no GPU needed)",
             "numba", _MM,
             mistakes=("row_max_numba_host_numpy.py", "row_max_numba_zero_start.py",
                       "row_max_numba_one_column_each.py")),
    Exercise("transpose", "memory-model", "A transpose at copy speed", "cuda", _MM, speed=True,
             mistakes=("transpose_replay.cu", "transpose_no_bounds.cu")),
    Exercise("gemm_row_major", "libraries", "Row-major GEMM with column-major cuBLAS", "cuda", _LIB, speed=True,
             mistakes=("gemm_row_major_host.cu", "gemm_row_major_geam.cu")),
    Exercise("inclusive_sum", "libraries", "A prefix sum with CUB", "cuda", _LIB, speed=True,
             mistakes=("inclusive_sum_host.cu",)),
    Exercise("sgemm_tiled", "fast-matmul-fft", "A tiled SGEMM against cuBLAS", "cuda", _MAT, speed=True,
             mistakes=("sgemm_untiled.cu",)),
    Exercise("fft_convolve", "fast-matmul-fft", "Circular convolution with cuFFT", "cuda", _MAT, speed=True,
             mistakes=("fft_convolve_direct.cu",)),
    Exercise("add_masked", "triton", "Vector addition with masks", "triton", _TRI,
             mistakes=("add_masked_torch_host.py", "add_masked_no_mask.py", "add_masked_fixed_n.py")),
    Exercise("softmax_rows", "triton", "Row softmax with masked rows", "triton", _TRI,
             mistakes=("softmax_rows_torch_host.py", "softmax_rows_zero_base.py", "softmax_rows_no_max.py")),
    Exercise("matmul_tiles", "triton", "The tile loop of a matmul", "triton", _TRI,
             mistakes=("matmul_tiles_torch_host.py", "matmul_tiles_contiguous.py", "matmul_tiles_c_row_major.py")),
    Exercise("fake_op", "pytorch-extensions", "A custom operator's fake function", "torch", _EXT,
             mistakes=("fake_op_default_dtype.py", "fake_op_contiguous.py", "fake_op_wrong_device.py")),
    Exercise("split_kv_merge", "serving", "Merging split-KV partials", "cuda", _SRV,
             mistakes=("split_kv_merge_empty_nan.cu", "split_kv_merge_no_max.cu")),
    Exercise("add_rmsnorm", "serving", "The residual add and RMSNorm in one kernel", "cuda", _SRV,
             mistakes=("add_rmsnorm_no_eps.cu", "add_rmsnorm_one_warp.cu", "add_rmsnorm_unstored.cu")),
    Exercise("softmax_xent", "mnist", "Softmax cross-entropy, forward and backward", "cuda", _MN,
             mistakes=("softmax_xent_no_bounds.cu",)),
    Exercise("bus_bandwidth", "many-gpus", "Bus bandwidth from a measured time", "torch", _MG,
             mistakes=("bus_bandwidth_ring_factor.py", "bus_bandwidth_gib.py")),
    Exercise("ring_schedule", "many-gpus", "The schedule of a ring reduce-scatter", "torch", _MG,
             mistakes=("ring_schedule_floor_chunks.py", "ring_schedule_own_chunk_first.py")),
    Exercise("softmax_merge", "attention", "Merging two partial softmax results (Triton)", "triton", _ATT,
             mistakes=("softmax_merge_torch_host.py", "softmax_merge_nan_empty.py", "softmax_merge_no_rescale.py")),
    Exercise("masked_attention_row", "attention", "An attention row with fully masked rows (Triton)", "triton", _ATT,
             mistakes=("masked_attention_row_torch_host.py", "masked_attention_row_nan_masked.py",
                       "masked_attention_row_zero_masked.py", "masked_attention_row_no_max.py")),
]
# --8<-- [end:registry]
BY_NAME = {e.name: e for e in EXERCISES}


EXIT_CANNOT_CHECK = 3  # a CUDA C++ exercise where no GPU is: it compiles, and nothing was checked
SIMULATOR_NAMES = {"numba": "Numba's CUDA simulator", "triton": "Triton's interpreter"}


@dataclass
class Result:
    returncode: int   # 0 pass, 1 fail, 2 waived, 3 cannot check here (no GPU)
    output: str       # what the reader was shown: the verdict, each failed check once
    log: str          # everything: the build's and the checker's whole output, and the verdict
    benchmarks: list = field(default_factory=list)  # the checker's BENCH rows (a speed check's timings)


class _Report:
    """The lines of one check: `say` is shown to the reader (and logged), `detail` is logged, and shown
    with --verbose only."""

    def __init__(self, echo: bool, verbose: bool):
        self.echo, self.verbose = echo, verbose
        self.shown: list[str] = []
        self.log: list[str] = []

    def say(self, text: str) -> None:
        self.shown.append(text)
        self.log.append(text)
        if self.echo:
            print(text, flush=True)

    def detail(self, text: str) -> None:
        if not text:
            return
        if self.verbose:
            self.say(text)
        else:
            self.log.append(text)

    def result(self, returncode: int, benchmarks: list | None = None) -> Result:
        return Result(returncode, "\n".join(self.shown), "\n".join(self.log), benchmarks or [])


def _last_lines(text: str, count: int) -> list[str]:
    return [f"  {ln.strip()}" for ln in text.splitlines() if ln.strip()][-count:]


def _verdict(ex: Exercise, proc_rc: int, stdout: str, stderr: str, out: _Report, seed: int) -> int:
    outcome = programs.verdict(proc_rc, stdout, stderr)
    checks, trailing = exercise_report.parse(stdout)
    said_at_the_end = [f"  {t}" for t in trailing[-6:]] + _last_lines(stderr, 8)
    if outcome.waived:
        out.say(f"WAIVED {ex.name}: this GPU lacks a feature the exercise needs")
        for line in said_at_the_end:
            out.say(line)
        return programs.EXIT_WAIVED
    if outcome.passed:
        out.say(exercise_report.summary(ex.name, checks, passed=True))
        for line in exercise_report.pass_notes(checks):
            out.say(line)
        if ex.speed and outcome.benchmarks:  # how far from the GPU's limit, beside the course's solution
            for line in exercise_limits.limit_lines(stdout, gpu_run.gpu_name(), record.load(), ex.name):
                out.say(line)
        return 0
    out.say(exercise_report.summary(ex.name, checks, passed=False))
    failures = exercise_report.failure_lines(checks)
    for line in failures or said_at_the_end + [f"  {p}" for p in outcome.problems]:
        out.say(line)
    if not out.verbose:
        out.say(f"same inputs again: --seed {seed}; everything the checker printed: --verbose")
    return programs.EXIT_FAIL


def _build_cuda(ex: Exercise, rel: str, out: _Report) -> Path | None:
    path = (ROOT / rel).resolve()
    if programs.KERNELS not in path.parents:
        out.say(f"error: {rel}: keep your file under kernels/ beside the stub (it includes its checker by a "
                f"relative path)")
        return None
    prog = replace(programs.parse(path), compile_only=False, header=False)
    out.detail(f"building {path.relative_to(ROOT)}")
    try:
        proc = programs.build(prog)
    except (programs.MissingLibrary, FileNotFoundError) as e:
        out.say(f"error: cannot build: {e}")
        return None
    if proc.returncode != 0:
        out.say((proc.stdout + proc.stderr).rstrip("\n"))
        out.say(f"FAIL {ex.name}: {path.relative_to(ROOT)} does not compile (the compiler's messages are above)")
        return None
    return prog.executable


def _sanitizer() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (str(p) for p in sorted(Path("/usr/local").glob("cuda*/bin/compute-sanitizer"))), None)


def _memcheck(exe: Path, seed: int, out: _Report) -> str:
    """Run the checker (its checks, not its timing) under compute-sanitizer memcheck. Returns what the
    checker's output gets first: the sanitizer's reports as messages and a CHECK line (course/
    exercise_report.py reads them as one check), or "" when memcheck cannot run here."""
    sanitizer = _sanitizer()
    if sanitizer is None:
        out.say("compute-sanitizer not found (it ships with the CUDA toolkit): the memcheck run is skipped")
        return ""
    out.detail("running your program under compute-sanitizer memcheck first (--no-memcheck skips this)")
    proc = subprocess.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "99", "--print-limit", "5",
                           str(exe), "--seed", str(seed)], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    text = proc.stdout + proc.stderr
    m = re.search(r"ERROR SUMMARY: (\d+) error", text)
    errors = int(m[1]) if m else 0
    if errors == 0 and proc.returncode != 99:
        return "CHECK PASS memcheck n=1 errors=0"
    reports = [f"  {ln}" for ln in text.splitlines() if ln.startswith("=========")][:24]
    return "\n".join(reports + [f"  memcheck: {errors} invalid memory accesses (or other errors) in your program "
                                f"(compute-sanitizer's report)", f"CHECK FAIL memcheck n=1 errors={errors}"])


def check(ex: Exercise, solution: bool = False, sim: bool = False, seed: int | None = None,
          file: str | None = None, echo: bool = True, memcheck: bool = True, mistake: str | None = None,
          verbose: bool = False) -> Result:
    """Build or import the file, run the exercise's checker on fresh inputs, and judge it. `mistake`: one
    of ex.mistakes, written out from its diff if it has one. A pass of the reader's own file (not
    the solution, not a mistake) is kept for `progress` (course/exercise_progress.py)."""
    out = _Report(echo, verbose)
    if mistake is not None:
        file = ex.mistake_file(mistake)
    seed = seed if seed is not None else random.randrange(1, 2**31)
    rel = file or (ex.solution if solution else ex.stub)
    out.say(f"exercise {ex.name} ({ex.chapter}): {ex.title}")
    if ex.lang == "cuda":
        if sim:
            out.say(f"error: {ex.name} is CUDA C++: it has no simulator and needs a GPU")
            return out.result(programs.EXIT_FAIL)
        exe = _build_cuda(ex, rel, out)
        if exe is None:
            return out.result(programs.EXIT_FAIL)
        if not programs.has_gpu():
            out.say(f"CANNOT CHECK {ex.name} here: {rel} compiles, but its checker runs your kernel on an NVIDIA "
                    f"GPU and none was found (nvidia-smi -L). Nothing was checked (exit code {EXIT_CANNOT_CHECK}).")
            return out.result(EXIT_CANNOT_CHECK)
        out.say(f"checking {rel} on the GPU, seed {seed}")
        checker_said_first = _memcheck(exe, seed, out) if memcheck else ""
        cmd = [str(exe), "--seed", str(seed)] + (["--bench"] if ex.speed else [])
    else:
        where = ""
        if not sim and ex.simulator and not programs.has_gpu():
            sim, where = True, f" on the CPU with {SIMULATOR_NAMES[ex.lang]} (no GPU found)"
        elif sim:
            where = f" on the CPU with {SIMULATOR_NAMES.get(ex.lang, 'no simulator')} (--sim)"
        elif ex.simulator:
            where = " on the GPU"
        out.say(f"checking {rel}{where}, seed {seed}")
        cmd = [sys.executable, str(ROOT / ex.checker), "--seed", str(seed)]
        cmd += (["--solution"] if solution and not file else []) + (["--file", file] if file else [])
        cmd += ["--sim"] if sim else []
        checker_said_first = ""
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ), timeout=1800)
    stdout = f"{checker_said_first}\n{proc.stdout}" if checker_said_first else proc.stdout
    out.detail(stdout.rstrip("\n"))
    out.detail(proc.stderr.rstrip("\n"))
    rc = _verdict(ex, proc.returncode, stdout, proc.stderr, out, seed)
    if rc == 0 and not solution and mistake is None:
        exercise_progress.record_pass(ex.name, ROOT / rel, seed)
    return out.result(rc, programs.verdict(proc.returncode, stdout, proc.stderr).benchmarks)


def _list() -> int:
    width = max(len(e.name) for e in EXERCISES) + 2
    chapter_width = max(len(e.chapter) for e in EXERCISES) + 2
    print(f"{'exercise':{width}}{'chapter':{chapter_width}}{'language':10}runs on")
    for e in EXERCISES:
        print(f"{e.name:{width}}{e.chapter:{chapter_width}}{e.lang:10}{e.where_it_runs()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # exit 1, never argparse's 2 (the course's "waived")
            self.print_usage(sys.stderr)
            sys.exit(f"{self.prog}: error: {message}")

    p = Parser(prog="python -m course.exercise", allow_abbrev=False,
               description="Check one of the course's exercises: `list` shows them all, `progress` the ones "
                           "you have passed.")
    p.add_argument("name", help="an exercise's name, `list` or `progress`")
    p.add_argument("--solution", action="store_true", help="check the course's solution instead of the stub")
    p.add_argument("--sim", action="store_true", help="run on the CPU: Numba's simulator or Triton's interpreter")
    p.add_argument("--seed", type=int, default=None, help="replay the inputs of an earlier run")
    p.add_argument("--file", default=None, help="check this file (relative to the repository's root) instead")
    p.add_argument("--mistake", default=None,
                   help="check one of the exercise's registered plausible mistakes (its name, with or without .cu/.py)")
    p.add_argument("--no-memcheck", action="store_true",
                   help="CUDA C++: skip the run of the checks under compute-sanitizer memcheck")
    p.add_argument("--verbose", action="store_true", help="show everything the build and the checker printed")
    args = p.parse_args(argv)
    if args.name == "list":
        return _list()
    if args.name == "progress":
        print(exercise_progress.report(EXERCISES, programs.has_gpu()))
        return 0
    if args.name not in BY_NAME:
        p.error(f"no exercise named {args.name!r}; `python -m course.exercise list` shows them")
    ex = BY_NAME[args.name]
    if sum(map(bool, (args.solution, args.file, args.mistake))) > 1:
        p.error("--solution, --file and --mistake name different files: give one")
    mistake = None
    if args.mistake:
        mistake = next((m for m in ex.mistakes if args.mistake in (m, Path(m).stem)), None)
        if mistake is None:
            p.error(f"{ex.name} has no mistake {args.mistake!r}; it has: {', '.join(ex.mistakes)}")
    try:
        return check(ex, args.solution, args.sim, args.seed, args.file, memcheck=not args.no_memcheck,
                     mistake=mistake, verbose=args.verbose).returncode
    except mistake_files.DiffError as e:
        print(f"error: {e}", file=sys.stderr)
        return programs.EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
