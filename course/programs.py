"""The course's example programs: the files under kernels/ that pages embed and tests build and run.

Each program declares how it is built and run in `course:` comment lines near its top:

    // course: gpu                  needs a CUDA GPU to run (it is still compiled everywhere)
    // course: nvcc-flags -lcublas  extra compiler flags
    // course: run --n 1000         one checked run per line (no run line: one run with no arguments)
    // course: bench --bench        a benchmark run; its BENCH lines go to the GPU record
    // course: libs cublas cufft    CUDA libraries it links (see LIBRARIES): headers and libraries are
                                    taken from the toolkit, or else from NVIDIA's pip wheels
    // course: headers cutlass      header-only libraries (see HEADER_LIBRARIES), found or fetched
    // course: compile-only         a source with no main (for example one that CuPy loads)
    // course: header               an include file; built through the programs that include it
    // course: depends <file> ...    other course files this program builds or loads (counted in its hash)
    // course: built-by <file>      built and run by that test or page instead of the generic harness
                                    (a PyTorch extension source, say); the file must name this one
    // course: sanitizer-expect <tool|all> <why>   the program's intended behaviour trips that
                                    compute-sanitizer tool (deliberately invalid launches, say): the
                                    sanitizer run must report, and the page says why
    // course: sanitizer-skip <tool|all> <why>     not run under that tool, for the reason given
                                    (a long <why> goes on under the directive, on comment lines
                                    indented by two or more spaces after the // or #)
    // course: gpus <N>             needs at least N GPUs of one machine (default 1); the GPU run gives
                                    its items every GPU instead of pinning them to one
    // course: invariant faster <token> <partner> [impl-glob] [max-ratio=R]
                                    in a benchmark run, each row whose case has the word <token> is
                                    faster than the row of the same impl whose case has <partner> in
                                    its place, taking at most R times its time (default 1):
                                    "invariant faster causal non-causal max-ratio=0.8": a causal
                                    attention, half the work, is clearly faster than its twin
    // course: invariant grows <field> [impl-glob]
                                    rows of one impl whose cases differ only in numbers take no less
                                    time as <field> grows (a larger size is not faster)
    // course: measured <field>...   benchmark row fields each timing process measures for itself
                                    (a bandwidth or share computed from its time, a compile time,
                                    a profiler's counters; a field may be a glob, `stall_*`):
                                    such a row is taken whole from one process (course/bench.py)

Every compiled GPU program also runs under compute-sanitizer (memcheck, racecheck, initcheck,
synccheck) on its first checked arguments in the GPU run (tests/test_sanitizer.py); the verdicts go
to the GPU record beside the program's runs.

Python programs use `# course: ...`. How a program is built and run is course/toolchain/ (which knows
nothing of programs: build() and execute() below hand it a program's Compilation and command line);
when a run passes (its CHECK and BENCH lines) is course/verdicts.py. This module is the programs'
metadata: the directives, the runs they declare, what each is made of (its content hash), and the
course paths a text names.
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import toolchain
from .mistakes import MATERIALISED
from .normalise import code_of, computed_bytes, python_tokens_cached
from .paths import BUILD, KERNELS, ROOT
# What a run's content hash covers of the harness: the compiler flags and judge()'s source.
from .toolchain import GCC_FLAGS, NVCC_FLAGS
from .verdicts import judge

# Names that lived here before the harness was split by job (kernels/ and pages still import some of
# them from course.programs): the toolchain's and the verdicts'.
from .toolchain import (BENCH_TIMEOUT_S, HEADER_LIBRARIES, LIBRARIES, PORTABLE_ARCHS, RUN_TIMEOUT_S,  # noqa: E402,F401
                        MissingLibrary, default_arch, has_gpu, header_flags, library_flags)
from .verdicts import EXIT_FAIL, EXIT_WAIVED, Outcome, malformed_check_lines, verdict  # noqa: E402,F401

SOURCE_SUFFIXES = {".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".c": "c", ".h": "c", ".hpp": "cpp", ".py": "python"}
HEADER_SUFFIXES = {".cuh", ".h", ".hpp"}

_DIRECTIVE = re.compile(r"^\s*(?://|#)\s*course:\s*(?P<key>[a-z-]+)\s*(?P<value>.*?)\s*$")
# A comment line indented by two or more spaces: the why of a sanitizer directive, continued.
_CONTINUATION = re.compile(r"^\s*(?://|#)\s{2,}(?P<text>\S.*?)\s*$")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"(?P<path>[^"]+)"', re.MULTILINE)
_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?P<module>\w+)", re.MULTILINE)
# A folder a Python program puts on its import path, relative to its own file:
# sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attention")), or HERE.parents[2] with
# HERE = Path(__file__).resolve(); the modules it then imports from there are part of the program.
_SYS_PATH = re.compile(r'sys\.path\.insert\(\s*0\s*,\s*str\(\s*(?:Path\(__file__\)\.resolve\(\)|HERE)'
                       r'\.parents\[(?P<up>\d)\](?:\s*/\s*"(?P<folder>[\w.-]+)")?\s*\)\s*\)')
# A course path inside text: kernels/..., snippets/..., or a build/ output whose source is under kernels/.
_COURSE_PATH = re.compile(r"(?:(?<=\./)|(?<![\w./-]))((?:kernels|snippets|build)/[\w./-]*[\w/])")


@dataclass(frozen=True)
class Run:
    """One execution of a program: its arguments, and whether it is a benchmark."""

    program: "Program"
    args: tuple[str, ...]
    bench: bool = False

    @property
    def id(self) -> str:
        label = "bench" if self.bench else "run"
        return f"{self.program.rel}[{label}: {' '.join(self.args)}]" if self.args else f"{self.program.rel}[{label}]"

    def content_hash(self) -> str:
        """What this run computes: the harness's part, the program and the files it includes, by their
        tokens (course/normalise.py: comments and layout are not part of it), its arguments, and the
        directives that say how it is built, run and judged."""
        h = hashlib.sha256()
        # The harness's part: how it builds (flags) and how it judges a run, not the whole module,
        # so that refactoring the harness does not invalidate every recorded result.
        h.update(json.dumps([NVCC_FLAGS, GCC_FLAGS]).encode() + python_tokens_cached(inspect.getsource(judge)).encode())
        if self.bench:  # how a benchmark's rows are measured and accepted (course/bench.py)
            h.update(BENCH_PROTOCOL.encode())
        for path in self.program.sources():
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + computed_bytes(path) + b"\0")
        prog = self.program
        h.update(json.dumps([self.bench, list(self.args), prog.flags, prog.libs, prog.headers, prog.min_gpus,
                             prog.invariants, prog.measured]).encode())
        return h.hexdigest()[:16]


SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# The benchmark protocol, part of every bench run's content hash: a change to it re-stales every
# recorded benchmark. v2: each benchmark is timed in two processes, rows whose medians differ by more
# than 5% are re-measured, and the program's invariants are checked (course/bench.py).
BENCH_PROTOCOL = "bench-protocol v2: two processes, 5% agreement, invariants"


@dataclass(frozen=True)
class SanitizerRun:
    """One compute-sanitizer tool over a program's first checked run."""

    run: Run
    tool: str

    @property
    def program(self) -> "Program":
        return self.run.program

    @property
    def expected_report(self) -> str | None:
        """Why this tool is expected to report on this program, if it is (a declared, intended trip)."""
        return self.program.sanitizer_expect.get(self.tool)

    @property
    def id(self) -> str:
        return f"{self.program.rel}[{self.tool}: {' '.join(self.run.args)}]"

    def content_hash(self) -> str:
        h = hashlib.sha256(self.run.content_hash().encode())
        h.update(json.dumps(["compute-sanitizer", self.tool, self.expected_report]).encode())
        return h.hexdigest()[:16]

    def command(self, sanitizer: str, error_exitcode: int) -> list[str]:
        return [sanitizer, "--tool", self.tool, "--error-exitcode", str(error_exitcode),
                *self.program.run_command(self.run.args)]


@dataclass
class Program:
    path: Path
    lang: str
    gpu: bool = False
    compile_only: bool = False
    header: bool = False
    flags: list[str] = field(default_factory=list)
    libs: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    built_by: str | None = None
    depends: list[str] = field(default_factory=list)
    run_args: list[tuple[str, ...]] = field(default_factory=list)
    bench_args: list[tuple[str, ...]] = field(default_factory=list)
    sanitizer_expect: dict[str, str] = field(default_factory=dict)  # tool -> why it reports
    sanitizer_skip: dict[str, str] = field(default_factory=dict)    # tool -> why it is not run
    min_gpus: int = 1
    invariants: list[tuple[str, ...]] = field(default_factory=list)  # ("faster", token, partner, glob) ...
    measured: list[str] = field(default_factory=list)  # row fields each timing process measures itself

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def runnable(self) -> bool:
        return not (self.compile_only or self.header or self.built_by)

    @property
    def generic_build(self) -> bool:
        """Whether the generic harness compiles this file (headers and built-by files: no)."""
        return not (self.header or self.built_by)

    @property
    def executable(self) -> Path:
        return BUILD / self.path.relative_to(KERNELS).with_suffix("")

    def runs(self) -> list[Run]:
        if not self.runnable:
            return []
        checked = [Run(self, a) for a in (self.run_args or [()])]
        return checked + [Run(self, a, bench=True) for a in self.bench_args]

    def sanitizer_runs(self) -> list[SanitizerRun]:
        """The compute-sanitizer runs of a compiled GPU program: each tool not skipped, over the first
        checked run. (Python programs are not run under it: see docs/contributing.md.)"""
        if not (self.gpu and self.runnable and self.lang != "python"):
            return []
        first = self.runs()[0]
        return [SanitizerRun(first, t) for t in SANITIZER_TOOLS if t not in self.sanitizer_skip]

    def sources(self) -> list[Path]:
        """What the program is made of, transitively, in a stable order: the file, the local headers
        it includes, and for Python programs the course files they name (a .cu file CuPy loads) and
        the modules they import from their own folder, kernels/common, or a folder under kernels/ they
        put on sys.path."""
        seen: list[Path] = []
        stack = [self.path]
        while stack:
            path = stack.pop()
            if path in seen or not path.is_file():
                continue
            seen.append(path)
            text = code_of(path)
            if path == self.path:
                stack += [ROOT / d for d in reversed(self.depends)]
            if path.suffix == ".py":
                stack += reversed(paths_named_in(text))
                folders = [path.parent, KERNELS / "common"]  # siblings, and course_tools.py
                folders += [path.parents[int(m["up"])] / (m["folder"] or "") for m in _SYS_PATH.finditer(text)]
                folders = [f for f in dict.fromkeys(folders) if f.is_relative_to(KERNELS)]
                for m in _IMPORT.finditer(text):
                    stack += [f / (m["module"] + ".py") for f in folders]
            else:
                for m in _INCLUDE.finditer(text):
                    stack.append((path.parent / m["path"]).resolve())
        return seen

    def compilation(self) -> toolchain.Compilation:
        """What the toolchain needs to compile this program."""
        return toolchain.Compilation(self.path, self.lang, self.executable, tuple(self.flags), tuple(self.libs),
                                     tuple(self.headers), self.compile_only, tuple(self.sources()))

    def build_command(self, arch: str) -> list[str]:
        return toolchain.build_command(self.compilation(), arch)

    def portable_build_command(self) -> list[str]:
        return toolchain.portable_build_command(self.compilation())

    def run_command(self, args: tuple[str, ...]) -> list[str]:
        if self.lang == "python":
            return [sys.executable, str(self.path), *args]
        return [str(self.executable), *args]


def parse(path: Path) -> Program:
    lang = SOURCE_SUFFIXES[path.suffix]
    # kernels/common/ holds what programs include or import (course.cuh, course_tools.py): never run alone.
    shared = path.resolve().parent == KERNELS / "common"
    text = path.read_text()
    # A Python file with no `if __name__ == "__main__"` is a module that programs import (mnist_data.py),
    # not a program: like a header, it is built and run through the programs that use it.
    module = lang == "python" and not re.search(r"if\s+__name__\s*==", text)
    prog = Program(path=path.resolve(), lang=lang, header=path.suffix in HEADER_SUFFIXES or shared or module)
    lines = text.splitlines()[:60]
    for i, line in enumerate(lines):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        key, value = m["key"], m["value"]
        if key in ("sanitizer-expect", "sanitizer-skip"):
            for more in lines[i + 1:]:
                c = _CONTINUATION.match(more)
                if not c:
                    break
                value += " " + c["text"]
        if key == "gpu":
            prog.gpu = True
        elif key == "nvcc-flags" or key == "cc-flags":
            prog.flags += shlex.split(value)
        elif key == "run":
            prog.run_args.append(tuple(shlex.split(value)))
        elif key == "bench":
            prog.bench_args.append(tuple(shlex.split(value)))
        elif key == "libs":
            prog.libs += value.split()
        elif key == "compile-only":
            prog.compile_only = True
        elif key == "headers":
            prog.headers += value.split()
        elif key == "depends":
            prog.depends += value.split()
        elif key == "built-by":
            prog.built_by = value
        elif key == "header":
            prog.header = True
        elif key == "gpus":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{path}: 'course: gpus <N>' takes a whole number of GPUs, got {value!r}")
            prog.min_gpus = int(value)
        elif key == "invariant":
            words = shlex.split(value)
            ratio = "1"
            if words and words[-1].startswith("max-ratio="):
                ratio = words.pop()[len("max-ratio="):]
            shapes = {"faster": (3, 4), "grows": (2, 3)}
            try:
                ok = 0 < float(ratio) <= 1
            except ValueError:
                ok = False
            if not ok or not words or words[0] not in shapes or not shapes[words[0]][0] <= len(words) <= shapes[words[0]][1]:
                raise ValueError(f"{path}: 'course: invariant faster <token> <partner> [impl-glob] [max-ratio=R]' or "
                                 f"'course: invariant grows <field> [impl-glob]', got {value!r}")
            words += ["*"] if len(words) == shapes[words[0]][0] else []
            prog.invariants.append(tuple(words) + ((float(ratio),) if words[0] == "faster" else ()))
        elif key == "measured":
            if not value.split() or any(fnmatch.fnmatchcase(special, f) for f in value.split()
                                        for special in ("time_ms", "case", "impl")):
                raise ValueError(f"{path}: 'course: measured <field>...' names row fields other than time_ms, "
                                 f"case and impl, got {value!r}")
            prog.measured += value.split()
        elif key in ("sanitizer-expect", "sanitizer-skip"):
            tool, _, why = value.partition(" ")
            tools = SANITIZER_TOOLS if tool == "all" else (tool,)
            if tool != "all" and tool not in SANITIZER_TOOLS or not why.strip():
                raise ValueError(f"{path}: 'course: {key} <{'|'.join(SANITIZER_TOOLS)}|all> <why>', got {value!r}")
            target = prog.sanitizer_expect if key == "sanitizer-expect" else prog.sanitizer_skip
            target.update({t: why.strip() for t in tools})
        else:
            raise ValueError(f"{path}: unknown directive 'course: {key}'")
    return prog


def paths_named_in(text: str) -> list[Path]:
    """Course files that a block or a script names: kernels/x.cu, a folder under kernels/ (every file
    in it), or build/ch/x (the program kernels/ch/x.* that builds it)."""
    found: list[Path] = []
    for token in _COURSE_PATH.findall(text):
        path = ROOT / token
        if token.startswith("build/"):
            stem = KERNELS / token[len("build/"):]
            candidates = [stem.with_name(stem.name + s) for s in SOURCE_SUFFIXES]
        elif path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if p.is_file() and not _generated(p))
        else:
            candidates = [path]
        for c in candidates:
            if c.is_file() and c not in found:
                found.append(c)
    return found


def _generated(path: Path) -> bool:
    """Written by a run, not part of the course: Python's caches and the exercise mistakes that
    course/mistakes.py materialises from their diffs (<exercise folder>/.mistakes/)."""
    return "__pycache__" in path.parts or MATERIALISED in path.parts


def all_programs() -> list[Program]:
    files = sorted(p for p in KERNELS.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    return [parse(p) for p in files if not _generated(p)]


def program_for(rel_path: str) -> Program | None:
    path = ROOT / rel_path
    if path.is_file() and path.suffix in SOURCE_SUFFIXES and KERNELS in path.resolve().parents:
        return parse(path)
    return None


def build(program: Program, arch: str | None = None, portable: bool = False):
    """Compile a program (toolchain.build: skipped when already built from the same sources)."""
    return toolchain.build(program.compilation(), arch, portable)


def execute(run: Run, timeout: int | None = None, timing_process: int = 1, retime: list[str] | None = None) -> Outcome:
    """One run of a program, judged (toolchain.execute; its limit: BENCH_TIMEOUT_S for a benchmark)."""
    limit = timeout or (BENCH_TIMEOUT_S if run.bench else RUN_TIMEOUT_S)
    return toolchain.execute(run.program.run_command(run.args), limit, timing_process, retime)
