"""The toolchain: how a course program is compiled and run.

It knows nothing of how programs declare themselves (course/programs.py reads their `course:` lines):
it compiles a Compilation, plain data that names the source, the output and the flags, and runs a
command line.

- Compiler flags: NVCC_FLAGS and GCC_FLAGS for every program (warnings are errors), PORTABLE_ARCHS for
  the compile-only build for every architecture the course supports.
- CUDA libraries (`course: libs`, LIBRARIES): headers and libraries from the toolkit, or else from
  NVIDIA's pip wheels; header-only libraries (`course: headers`, HEADER_LIBRARIES): unpacked once from
  a pinned wheel.
- build(): one compilation, skipped when the same command already built the same sources. Building
  every program, several at a time, is the package's command (course/toolchain/__main__.py:
  `python -m course.toolchain build-all [JOBS [PROGRAM ...]]`).
- execute(): one run of a program's command line, judged (course/verdicts.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import sys
from dataclasses import dataclass
from pathlib import Path

from ..paths import BUILD, KERNELS, ROOT
from ..verdicts import Outcome, verdict

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


@functools.lru_cache(maxsize=None)
def _toolkit_root() -> Path | None:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    # /usr/local/bin/nvcc may be a wrapper script: ask nvcc where it lives.
    out = subprocess.run(["nvcc", "--dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"], capture_output=True, text=True)
    m = re.search(r"TOP=(\S+)", out.stderr + out.stdout)
    return Path(m.group(1)).resolve() if m else Path(nvcc).resolve().parent.parent


def compute_sanitizer() -> str:
    """compute-sanitizer's path; it ships with the CUDA toolkit, in bin/ or compute-sanitizer/."""
    found = shutil.which("compute-sanitizer")
    for pattern in ("cuda*/bin/compute-sanitizer", "cuda*/compute-sanitizer/compute-sanitizer"):
        found = found or next((str(p) for p in sorted(Path("/usr/local").glob(pattern)) if p.is_file()), None)
    if found is None:
        raise FileNotFoundError("compute-sanitizer not found: it ships with the CUDA toolkit (bin/compute-sanitizer)")
    return found


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
        if not (link.is_symlink() and os.readlink(link) == str(versioned[0])):
            # Parallel builds (build-all's jobs) may get here at once: make the link under a name of this
            # process's own, then rename it over the old one, which is atomic, so no build sees it missing.
            spare = farm / f".lib{libname}.so.{os.getpid()}.{threading.get_ident()}"
            spare.unlink(missing_ok=True)
            spare.symlink_to(versioned[0])
            os.replace(spare, link)
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
class Compilation:
    """One source to compile, as plain data: what the compiler command and the up-to-date check need."""

    source: Path                   # a file under kernels/
    lang: str                      # "cuda", "cpp" or "c" (course/programs.py's SOURCE_SUFFIXES)
    executable: Path               # the linked program; with compile_only, the object file beside it
    flags: tuple[str, ...] = ()    # the program's own compiler flags
    libs: tuple[str, ...] = ()     # CUDA libraries (LIBRARIES)
    headers: tuple[str, ...] = ()  # header-only libraries (HEADER_LIBRARIES)
    compile_only: bool = False     # no main: compile to an object file, do not link
    inputs: tuple[Path, ...] = ()  # every file the compiler reads (the source, its local headers)


def _library_flags(unit: Compilation) -> list[str]:
    # Only when asked for: library_flags asks nvcc where the toolkit lives.
    return ((header_flags(list(unit.headers)) if unit.headers else [])
            + (library_flags(list(unit.libs)) if unit.libs else []))


def build_command(unit: Compilation, arch: str) -> list[str]:
    """The command that compiles a source for one architecture into unit.executable."""
    out = str(unit.executable) + (".o" if unit.compile_only else "")
    libs = _library_flags(unit)
    if unit.lang == "cuda":
        cmd = ["nvcc", *NVCC_FLAGS, f"-arch={arch}", *unit.flags, *libs]
        return cmd + (["-c"] if unit.compile_only else []) + ["-o", out, str(unit.source)]
    compiler = "g++" if unit.lang == "cpp" else "gcc"
    std = ["-std=c++17"] if unit.lang == "cpp" else ["-std=c11"]
    return [compiler, *std, *GCC_FLAGS, *unit.flags, *libs] + (["-c"] if unit.compile_only else []) + ["-o", out, str(unit.source)]


def portable_build_command(unit: Compilation) -> list[str]:
    """Compile (no link) for every architecture the course supports, to an object file under
    build/portable/: a program must compile for all of them and waive at run time where its GPU
    lacks a feature (see PORTABLE_ARCHS)."""
    out = BUILD / "portable" / unit.source.relative_to(KERNELS).with_suffix(".o")
    libs = _library_flags(unit)
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in PORTABLE_ARCHS]
    return ["nvcc", *NVCC_FLAGS, "--threads", "0", *gencode, *unit.flags, *libs, "-c", "-o", str(out), str(unit.source)]


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


# One lock per output file, so that two threads asked for the same build (a test, and the pool that
# builds ahead of the tests: tests/conftest.py) run the compiler once and the second waits for it; and
# the failures of this process, so that a build that failed is reported again without compiling again.
_OUTPUT_LOCKS: dict[Path, threading.Lock] = {}
_OUTPUT_LOCKS_GUARD = threading.Lock()
_FAILED: dict[tuple[Path, str], subprocess.CompletedProcess] = {}


def build(unit: Compilation, arch: str | None = None, portable: bool = False,
          niceness: int = 0) -> subprocess.CompletedProcess:
    """Compile, unless the same command already built the same sources (a stamp beside the output
    holds a hash of both), so that several runs of one program build it once. portable: the
    compile-only build for every architecture in PORTABLE_ARCHS. Safe to call from several threads
    at once: a build of the same output waits for the one under way. niceness: run the compiler under
    `nice` (a build made ahead of need yields the CPU to whatever else runs)."""
    cmd = portable_build_command(unit) if portable else build_command(unit, arch or default_arch())
    output = Path(cmd[cmd.index("-o") + 1])
    output.parent.mkdir(parents=True, exist_ok=True)
    # The stamp names paths relative to the tree, so that a build folder copied into another copy of
    # the tree (the GPU run's shards) still counts as built.
    h = hashlib.sha256(json.dumps(cmd).replace(str(ROOT), "<root>").encode())
    for path in unit.inputs:
        h.update(path.read_bytes())
    digest = h.hexdigest()
    with _OUTPUT_LOCKS_GUARD:
        lock = _OUTPUT_LOCKS.setdefault(output, threading.Lock())
    with lock:
        if (output, digest) in _FAILED:
            return _FAILED[output, digest]
        stamp = output.with_name(output.name + ".stamp")
        if output.exists() and stamp.exists() and stamp.read_text() == digest:
            return subprocess.CompletedProcess(cmd, 0, "", "")
        stamp.unlink(missing_ok=True)
        nice = ["nice", "-n", str(niceness)] if niceness and shutil.which("nice") else []
        proc = subprocess.run(nice + cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        if proc.returncode == 0:
            stamp.write_text(digest)
        else:
            _FAILED[output, digest] = proc
        return proc


RUN_TIMEOUT_S = 300    # a checked run
BENCH_TIMEOUT_S = 560  # a timed run, which may compile and autotune first (mnist_torch.py); under the
                       # GPU machine's ten-minute limit on one command


def execute(command: list[str], timeout: int, timing_process: int = 1, retime: list[str] | None = None) -> Outcome:
    """Runs one program's command line and reads its verdict. A benchmark is timed in several processes
    (course/bench.py); `timing_process` (COURSE_TIMING_PROCESS) tells a program which one it is, so
    that a repeat may check a smaller sample of what the first process checked in full; `retime`
    (COURSE_RETIME, a JSON list) names the implementations whose rows a repeat must time, so that a
    program which cannot time everything (a search within a budget) times those first or only."""
    env = dict(os.environ, COURSE_TIMING_PROCESS=str(timing_process))
    env.pop("COURSE_RETIME", None)
    if retime is not None:
        env["COURSE_RETIME"] = json.dumps(retime)
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    return verdict(proc.returncode, proc.stdout, proc.stderr)
