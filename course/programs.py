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

Every compiled GPU program also runs under compute-sanitizer (memcheck, racecheck, initcheck,
synccheck) on its first checked arguments in the GPU run (tests/test_sanitizer.py); the verdicts go
to the GPU record beside the program's runs.

Python programs use `# course: ...`. A run passes when the program exits 0, prints at least one
`CHECK PASS name n=<count>` line with a positive count, and prints no `CHECK FAIL` line. Exit code 2
means "waived": the GPU lacks a feature the program needs, which the harness reports as a skip.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
BUILD = ROOT / "build"

EXIT_FAIL = 1
EXIT_WAIVED = 2
SOURCE_SUFFIXES = {".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".c": "c", ".h": "c", ".hpp": "cpp", ".py": "python"}
HEADER_SUFFIXES = {".cuh", ".h", ".hpp"}

_DIRECTIVE = re.compile(r"^\s*(?://|#)\s*course:\s*(?P<key>[a-z-]+)\s*(?P<value>.*?)\s*$")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"(?P<path>[^"]+)"', re.MULTILINE)
_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?P<module>\w+)", re.MULTILINE)
# A course path inside text: kernels/..., snippets/..., or a build/ output whose source is under kernels/.
_COURSE_PATH = re.compile(r"(?:(?<=\./)|(?<![\w./-]))((?:kernels|snippets|build)/[\w./-]*[\w/])")
_CHECK = re.compile(r"^CHECK (?P<status>PASS|FAIL) (?P<name>\S+) n=(?P<n>\d+)(?P<rest>.*)$", re.MULTILINE)
_BENCH = re.compile(r"^BENCH (?P<json>\{.*\})\s*$", re.MULTILINE)

# The architectures every CUDA program must compile for (CUDA 13 supports Turing, 7.5, and newer):
# Turing, Ampere, Hopper, Blackwell. A program that needs a newer one guards its code and waives.
PORTABLE_ARCHS = ("75", "80", "90", "100")

# Compiler warnings are errors for every course program: a reader copies these files.
NVCC_FLAGS = ["-std=c++17", "-O3", "-lineinfo", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra,-Werror"]
GCC_FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]


# The CUDA libraries a program may name in `course: libs`: a header that proves the library is
# there, and the library file to link. The toolkit ships most of them; cuDNN and NCCL come as pip
# wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13), which also carry the others' headers for machines
# with only the compiler (CI).
LIBRARIES = {
    "cublas": ("cublas_v2.h", "cublas"),
    "cublasLt": ("cublasLt.h", "cublasLt"),
    "cufft": ("cufft.h", "cufft"),
    "curand": ("curand.h", "curand"),
    "cudnn": ("cudnn.h", "cudnn"),
    "nccl": ("nccl.h", "nccl"),
}


class MissingLibrary(Exception):
    """A program needs a CUDA library whose headers are on neither the toolkit nor a pip wheel."""


def _toolkit_root() -> Path | None:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    # /usr/local/bin/nvcc may be a wrapper script: ask nvcc where it lives.
    out = subprocess.run(["nvcc", "--dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"], capture_output=True, text=True)
    m = re.search(r"TOP=(\S+)", out.stderr + out.stdout)
    return Path(m.group(1)).resolve() if m else Path(nvcc).resolve().parent.parent


def _wheel_dirs() -> list[Path]:
    """include/ folders of NVIDIA's pip wheels (nvidia/cu13/include, nvidia/cudnn/include, ...)."""
    found = []
    for entry in sys.path:
        base = Path(entry) / "nvidia"
        if base.is_dir():
            found += sorted(p for p in base.glob("*/include") if p.is_dir())
    return found


def library_flags(libs: list[str]) -> list[str]:
    """Compiler and linker flags for the named libraries, or MissingLibrary naming what to install."""
    flags: list[str] = []
    toolkit = _toolkit_root()
    toolkit_includes = [toolkit / "include", toolkit / "targets" / "x86_64-linux" / "include"] if toolkit else []
    for lib in libs:
        if lib not in LIBRARIES:
            raise ValueError(f"unknown library {lib!r} in 'course: libs' (known: {', '.join(LIBRARIES)})")
        header, libname = LIBRARIES[lib]
        if any((d / header).is_file() for d in toolkit_includes):
            flags.append(f"-l{libname}")
            continue
        include = next((d for d in _wheel_dirs() if (d / header).is_file()), None)
        if include is None:
            raise MissingLibrary(f"{header} is in neither the CUDA toolkit nor an installed NVIDIA wheel; "
                                 f"install the course's 'libs' extra: pip install -e '.[libs]'")
        libdir = include.parent / "lib"
        versioned = sorted(libdir.glob(f"lib{libname}.so*"))
        if not versioned:
            raise MissingLibrary(f"{header} found in {include}, but no lib{libname}.so* beside it")
        # Wheels ship only versioned names (libcublas.so.13): give the linker an unversioned link.
        farm = BUILD / "libs"
        farm.mkdir(parents=True, exist_ok=True)
        link = farm / f"lib{libname}.so"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(versioned[0])
        flags += [f"-I{include}", f"-L{farm}", f"-l{libname}", f"-Xlinker=-rpath,{libdir}"]
    return flags


# Header-only libraries a program may name in `course: headers`: the pinned wheel that carries the
# headers, the folder inside it, a file that proves the folder is right, extra flags, and the
# repository-local folder where they are unpacked (git-ignored; carried to machines with no network).
HEADER_LIBRARIES = {
    "cutlass": ("nvidia-cutlass==4.2.0.0", "cutlass_library/source/include", "cutlass/gemm/device/gemm.h",
                ["--expt-relaxed-constexpr"], ".cutlass/include"),
    "cudnn_frontend": ("nvidia-cudnn-frontend==1.32.0", "include", "cudnn_frontend.h", [], ".cudnn_fe/include"),
}


def header_flags(names: list[str]) -> list[str]:
    """-isystem flags for header-only libraries: from the repository-local folder, else unpacked once
    from the pinned wheel (pip download, no install: their Python parts pull in large dependencies)."""
    import tempfile
    import zipfile

    flags: list[str] = []
    for name in names:
        if name not in HEADER_LIBRARIES:
            raise ValueError(f"unknown header library {name!r} in 'course: headers' (known: {', '.join(HEADER_LIBRARIES)})")
        wheel, inner, marker, extra, local = HEADER_LIBRARIES[name]
        folder = ROOT / local
        if not (folder / marker).is_file():
            with tempfile.TemporaryDirectory() as tmp:
                got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, wheel],
                                     capture_output=True, text=True)
                files = list(Path(tmp).glob("*.whl"))
                if got.returncode != 0 or not files:
                    raise MissingLibrary(f"{name}: headers not in {local} and `pip download {wheel}` failed "
                                         f"(offline?): {got.stderr.strip()[-300:]}")
                with zipfile.ZipFile(files[0]) as z:
                    for member in z.namelist():
                        if member.startswith(inner + "/") and not member.endswith("/"):
                            target = folder / member[len(inner) + 1:]
                            target.parent.mkdir(parents=True, exist_ok=True)
                            target.write_bytes(z.read(member))
        flags += ["-isystem", str(folder), *extra]
        if name == "cudnn_frontend":  # it includes nvrtc.h: the toolkit's, or the nvrtc wheel's
            nvrtc = next((d for d in _wheel_dirs() if (d / "nvrtc.h").is_file()), None)
            if nvrtc is not None:
                flags += ["-isystem", str(nvrtc)]
    return flags


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
        """What this run depends on: the harness, the program and its headers, its arguments."""
        h = hashlib.sha256()
        # The harness's part: how it builds (flags) and how it judges a run, not the whole module,
        # so that refactoring the harness does not invalidate every recorded result.
        h.update(json.dumps([NVCC_FLAGS, GCC_FLAGS]).encode() + inspect.getsource(judge).encode())
        if self.bench:  # how a benchmark's rows are measured and accepted (course/bench.py)
            h.update(BENCH_PROTOCOL.encode())
        for path in self.program.sources():
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
        h.update(json.dumps([self.bench, list(self.args), self.program.flags, self.program.libs,
                             self.program.headers]).encode())
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
        the sibling modules they import."""
        seen: list[Path] = []
        stack = [self.path]
        while stack:
            path = stack.pop()
            if path in seen or not path.is_file():
                continue
            seen.append(path)
            text = path.read_text(errors="replace")
            if path == self.path:
                stack += [ROOT / d for d in reversed(self.depends)]
            if path.suffix == ".py":
                stack += reversed(paths_named_in(text))
                for m in _IMPORT.finditer(text):
                    stack.append(path.parent / (m["module"] + ".py"))
                    stack.append(KERNELS / "common" / (m["module"] + ".py"))  # course_tools.py
            else:
                for m in _INCLUDE.finditer(text):
                    stack.append((path.parent / m["path"]).resolve())
        return seen

    def build_command(self, arch: str) -> list[str]:
        out = str(self.executable) + (".o" if self.compile_only else "")
        libs = (header_flags(self.headers) if self.headers else []) + (library_flags(self.libs) if self.libs else [])
        if self.lang == "cuda":
            cmd = ["nvcc", *NVCC_FLAGS, f"-arch={arch}", *self.flags, *libs]
            return cmd + (["-c"] if self.compile_only else []) + ["-o", out, str(self.path)]
        compiler = "g++" if self.lang == "cpp" else "gcc"
        std = ["-std=c++17"] if self.lang == "cpp" else ["-std=c11"]
        return [compiler, *std, *GCC_FLAGS, *self.flags, *libs] + (["-c"] if self.compile_only else []) + ["-o", out, str(self.path)]

    def portable_build_command(self) -> list[str]:
        """Compile (no link) for every architecture the course supports, to an object file under
        build/portable/: a program must compile for all of them and waive at run time where its GPU
        lacks a feature (see PORTABLE_ARCHS)."""
        out = BUILD / "portable" / self.path.relative_to(KERNELS).with_suffix(".o")
        libs = (header_flags(self.headers) if self.headers else []) + (library_flags(self.libs) if self.libs else [])
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in PORTABLE_ARCHS]
        return ["nvcc", *NVCC_FLAGS, "--threads", "0", *gencode, *self.flags, *libs, "-c", "-o", str(out), str(self.path)]

    def run_command(self, args: tuple[str, ...]) -> list[str]:
        if self.lang == "python":
            return [sys.executable, str(self.path), *args]
        return [str(self.executable), *args]


def parse(path: Path) -> Program:
    lang = SOURCE_SUFFIXES[path.suffix]
    # kernels/common/ holds what programs include or import (course.cuh, course_tools.py): never run alone.
    shared = path.resolve().parent == KERNELS / "common"
    prog = Program(path=path.resolve(), lang=lang, header=path.suffix in HEADER_SUFFIXES or shared)
    for line in path.read_text().splitlines()[:60]:
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        key, value = m["key"], m["value"]
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
            candidates = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        else:
            candidates = [path]
        for c in candidates:
            if c.is_file() and c not in found:
                found.append(c)
    return found


def all_programs() -> list[Program]:
    files = sorted(p for p in KERNELS.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    return [parse(p) for p in files if "__pycache__" not in p.parts]


def program_for(rel_path: str) -> Program | None:
    path = ROOT / rel_path
    if path.is_file() and path.suffix in SOURCE_SUFFIXES and KERNELS in path.resolve().parents:
        return parse(path)
    return None


def has_gpu() -> bool:
    """True when a CUDA GPU is usable. COURSE_NO_GPU=1 pretends there is none (to test CI's view)."""
    if os.environ.get("COURSE_NO_GPU") == "1":
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def default_arch() -> str:
    # On a GPU box build for that GPU; elsewhere compile for Hopper, the course's reference GPU.
    return "native" if has_gpu() else "sm_90"


@dataclass
class Outcome:
    """What a run printed, judged by the harness's rules."""

    returncode: int
    stdout: str
    stderr: str
    checks: list[dict]
    benchmarks: list[dict]
    problems: list[str]

    @property
    def waived(self) -> bool:
        return self.returncode == EXIT_WAIVED

    @property
    def passed(self) -> bool:
        return not self.problems and not self.waived


def judge(returncode: int, stdout: str, stderr: str, require_check: bool = True) -> Outcome:
    checks = [
        {"status": m["status"], "name": m["name"], "n": int(m["n"]), "detail": m["rest"].strip()}
        for m in _CHECK.finditer(stdout)
    ]
    benchmarks = []
    problems = []
    for m in _BENCH.finditer(stdout):
        try:
            benchmarks.append(json.loads(m["json"]))
        except json.JSONDecodeError as e:
            problems.append(f"malformed BENCH line ({e}): {m.group(0)}")
    if returncode not in (0, EXIT_WAIVED):
        problems.append(f"exit code {returncode}")
    failed = [c["name"] for c in checks if c["status"] == "FAIL"]
    if failed:
        problems.append(f"failed checks: {', '.join(failed)}")
    empty = [c["name"] for c in checks if c["status"] == "PASS" and c["n"] == 0]
    if empty:
        problems.append(f"checks that compared nothing (n=0): {', '.join(empty)}")
    if returncode == 0 and require_check and not [c for c in checks if c["status"] == "PASS" and c["n"] > 0]:
        problems.append("exited 0 without printing a passing CHECK line: success was claimed, not checked")
    for b in benchmarks:
        if not (isinstance(b.get("time_ms"), (int, float)) and b["time_ms"] > 0):
            problems.append(f"benchmark with no positive time: {b}")
    return Outcome(returncode, stdout, stderr, checks, benchmarks, problems)


def verdict(returncode: int, stdout: str, stderr: str, require_check: bool = True) -> Outcome:
    """judge(), plus one rule added later: a line that starts like a CHECK line but does not parse (a
    name with spaces) is a problem, because a FAIL line the pattern misses would go unseen. The rule
    is kept out of judge() and out of the record's content hash: it can only fail a run that judge()
    passed, and no run in the record printed such a line (tests/test_gpu_record.py checks the
    recorded output), so the recorded verdicts stand."""
    outcome = judge(returncode, stdout, stderr, require_check)
    malformed = malformed_check_lines(stdout)
    if malformed:
        outcome.problems.append(f"malformed CHECK line (want 'CHECK PASS|FAIL <one-word name> n=<count> ...'): "
                                f"{malformed[0]}")
    return outcome


def malformed_check_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines()
            if re.match(r"CHECK (PASS|FAIL)\b", line) and not _CHECK.fullmatch(line)]


def build(program: Program, arch: str | None = None, portable: bool = False) -> subprocess.CompletedProcess:
    """Compile a program, unless the same command already built the same sources (a stamp beside the
    output holds a hash of both), so that several runs of one program build it once. portable: the
    compile-only build for every architecture in PORTABLE_ARCHS."""
    cmd = program.portable_build_command() if portable else program.build_command(arch or default_arch())
    Path(cmd[cmd.index("-o") + 1]).parent.mkdir(parents=True, exist_ok=True)
    # The stamp names paths relative to the tree, so that a build folder copied into another copy of
    # the tree (the GPU run's shards) still counts as built.
    h = hashlib.sha256(json.dumps(cmd).replace(str(ROOT), "<root>").encode())
    for path in program.sources():
        h.update(path.read_bytes())
    output = Path(cmd[cmd.index("-o") + 1])
    stamp = output.with_name(output.name + ".stamp")
    if output.exists() and stamp.exists() and stamp.read_text() == h.hexdigest():
        return subprocess.CompletedProcess(cmd, 0, "", "")
    stamp.unlink(missing_ok=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode == 0:
        stamp.write_text(h.hexdigest())
    return proc


RUN_TIMEOUT_S = 300    # a checked run
BENCH_TIMEOUT_S = 560  # a timed run, which may compile and autotune first (mnist_torch.py); under the
                       # GPU machine's ten-minute limit on one command


def execute(run: Run, timeout: int | None = None) -> Outcome:
    timeout = timeout or (BENCH_TIMEOUT_S if run.bench else RUN_TIMEOUT_S)
    proc = subprocess.run(
        run.program.run_command(run.args), cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    return verdict(proc.returncode, proc.stdout, proc.stderr)


def build_all(jobs: int, only: list[str] | None = None) -> int:
    """Builds every program the generic harness compiles (or those of `only`, paths under kernels/),
    `jobs` at a time, for this machine's GPU (the GPU run does this once before copying the tree into
    its processes' copies, so that none compiles what another already did). Returns how many failed
    to build; the tests report why."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [p for p in all_programs() if p.generic_build and p.lang != "python" and (only is None or p.rel in only)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        failed = sum(proc.returncode != 0 for proc in pool.map(build, todo))
    print(f"built {len(todo) - failed} of {len(todo)} programs ({failed} failed: the tests say why)")
    return failed


if __name__ == "__main__":  # python -m course.programs build-all [JOBS [PROGRAM ...]]
    if len(sys.argv) < 2 or sys.argv[1] != "build-all" or (len(sys.argv) >= 3 and not sys.argv[2].isdigit()):
        sys.exit("usage: python -m course.programs build-all [JOBS [kernels/PROGRAM ...]]")
    build_all(int(sys.argv[2]) if len(sys.argv) >= 3 else os.cpu_count() or 1, sys.argv[3:] or None)
