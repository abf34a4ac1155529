"""python -m course.toolchain build-all [JOBS [kernels/PROGRAM ...]]: build every program the generic
harness compiles (or those named), JOBS at a time, for this machine's GPU.

The command, not the toolchain, knows the course's programs: it reads them with course/programs.py and
hands each one's Compilation to the toolchain, which knows nothing of how programs declare themselves.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

from course import programs


def build_all(jobs: int, only: list[str] | None = None) -> int:
    """Builds every program the generic harness compiles (or those of `only`, paths under kernels/),
    `jobs` at a time, for this machine's GPU (the GPU run does this once before copying the tree into
    its processes' copies, so that none compiles what another already did). Returns how many failed
    to build; the tests report why."""
    todo = [p for p in programs.all_programs()
            if p.generic_build and p.lang != "python" and (only is None or p.rel in only)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        failed = sum(proc.returncode != 0 for proc in pool.map(programs.build, todo))
    print(f"built {len(todo) - failed} of {len(todo)} programs ({failed} failed: the tests say why)")
    return failed


def main(argv: list[str]) -> None:
    usage = "usage: python -m course.toolchain build-all [JOBS [kernels/PROGRAM ...]]"
    if len(argv) < 1 or argv[0] != "build-all" or (len(argv) >= 2 and not argv[1].isdigit()):
        sys.exit(usage)
    # A PROGRAM this command does not build would otherwise be skipped in silence ("built 0 of 0").
    buildable = {p.rel for p in programs.all_programs() if p.generic_build and p.lang != "python"}
    unknown = [a for a in argv[2:] if a not in buildable]
    if unknown:
        sys.exit(f"error: {', '.join(unknown)}: not a program this command builds (a C, C++ or CUDA file "
                 f"under kernels/, named from the repository's root)\n{usage}")
    build_all(int(argv[1]) if len(argv) >= 2 else os.cpu_count() or 1, argv[2:] or None)


if __name__ == "__main__":
    main(sys.argv[1:])
