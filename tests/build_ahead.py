"""Building the course's programs ahead of the tests that need them, several at a time.

Compiling is most of what the CPU suite does (tests/test_cli.py, tests/test_programs.py and the
exercises' mistakes build every program, for this machine's GPU and for every architecture), and a
test runs one compiler at a time: on a machine with several cores the others would sit idle. So once
pytest knows which tests it will run, a pool of threads (COURSE_BUILD_JOBS, default one per core; 0:
none) starts compiling, under `nice`, what they will ask for, in the order they will ask, while the
tests go on. A test then calls programs.build() as before: it finds the program built (course/toolchain's stamp),
waits for the build under way (one lock per output), or builds it itself if the pool has not got to
it yet. A build that failed in the pool is reported by the test that needs it, with the compiler's
messages, exactly as if the test had run the compiler (the toolchain keeps the failure, so the
compiler is not run twice). Nothing here decides whether a test passes.

Measured on a two-core machine (December 2026, shared with other work, so CPU seconds): tests/test_cli.py
on a fresh clone took 714 s of CPU, most of it compiling one program at a time (cudnn_graph.cu and
sgemm.cu about a minute or two each), with the second core idle; the exercises' 16 CUDA mistakes,
built twice each, 168 s more. The pool starts at collection, so it also fills the core that the site
build of the browser tests (tests/conftest.py) leaves idle.

A test module says what its tests build with `builds_for(item) -> [(Program, portable), ...]`; the
exercises' mistakes are listed below instead, because tests/test_exercises.py's source is part of
its GPU items' keys (course/pytest_plugin.py) and an edit there would re-stale them.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from course import programs, toolchain

Build = tuple[programs.Program, bool]
# The pool's compilers run under `nice`: the tests that run meanwhile (a browser crawling the site, a
# page's block) keep the CPU they need, and the pool gets what they leave.
NICENESS = 10


def _exercise_mistake(item) -> list[Build]:
    """tests/test_exercises.py::test_cuda_mistake_compiles: the mistake as an object file, for this
    machine's GPU and for every architecture (the same Compilation the test makes)."""
    ex, mistake = item.callspec.params["ex"], item.callspec.params["mistake"]
    prog = replace(programs.parse(programs.ROOT / ex.mistake_file(mistake)), compile_only=True)
    return [(prog, False), (prog, True)]


OTHER_BUILDS = {("test_exercises.py", "test_cuda_mistake_compiles"): _exercise_mistake}


def builds_of(items) -> list[tuple[toolchain.Compilation, bool]]:
    """What the items will build, each build once, in the order they will ask for it. Each program's
    Compilation is taken now, before any test runs: a test that points the course's paths elsewhere
    for a while (tests/test_keys.py's copy of the course) cannot redirect a build under way."""
    seen: set[tuple[str, bool, bool]] = set()
    todo: list[tuple[toolchain.Compilation, bool]] = []
    for item in items:
        if item.get_closest_marker("skip") is not None or getattr(item, "module", None) is None:
            continue
        finder = getattr(item.module, "builds_for", None)
        finder = finder or OTHER_BUILDS.get((item.path.name, getattr(item, "originalname", item.name)))
        if finder is None:
            continue
        try:
            wanted = [(prog.compilation(), portable) for prog, portable in finder(item)]
        except Exception:  # noqa: BLE001 (the test itself meets the problem and reports it)
            continue
        for unit, portable in wanted:
            key = (str(unit.executable), unit.compile_only, portable)
            if key not in seen:
                seen.add(key)
                todo.append((unit, portable))
    return todo


def _build(unit: toolchain.Compilation, portable: bool) -> None:
    try:
        toolchain.build(unit, portable=portable, niceness=NICENESS)
    except Exception:  # noqa: BLE001 (a missing library, a timeout: the test that needs it says so)
        pass


class Pool:
    """The threads that build ahead; stop() waits for the builds under way and drops the rest."""

    def __init__(self, todo: list[tuple[toolchain.Compilation, bool]], jobs: int):
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="build-ahead") if todo and jobs else None
        for unit, portable in todo if self._pool else ():
            self._pool.submit(_build, unit, portable)

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def drain(self) -> None:
        """Waits until everything queued is built (before tests that may write the same outputs)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def jobs() -> int:
    value = os.environ.get("COURSE_BUILD_JOBS", "").strip()
    return int(value) if value.isdigit() else (os.cpu_count() or 1)
