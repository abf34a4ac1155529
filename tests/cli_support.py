"""Running a course program the way a reader would, with no GPU in sight: shared by the tests of
command lines (tests/test_cli.py, tests/test_commands_in_text.py)."""

import os
import subprocess

from course import programs

# CUDA_VISIBLE_DEVICES emptied: a GPU program finds no GPU, on a GPU machine too.
NO_GPU = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
# An option no program knows, and a value for it.
UNKNOWN_OPTION = ("--no-such-option", "7")

# The runs of this session, by command line and by the version of what runs: a page and a kernel's
# header often show the same command (and a Run: line with no arguments is tests/test_cli.py's own run),
# and a program with no GPU visible does the same thing every time, so it runs once.
_RUNS: dict[tuple, subprocess.CompletedProcess] = {}


def _version(program: programs.Program) -> tuple:
    """What a run depends on that a session may change: the built program, or a Python program's files."""
    files = [program.executable] if program.lang != "python" else program.sources()
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


def run_without_gpu(program: programs.Program, args) -> subprocess.CompletedProcess:
    """The program built as the tests build it, then run with `args` and no GPU visible."""
    if program.lang != "python":
        built = programs.build(program)
        assert built.returncode == 0, built.stderr
    command = program.run_command(tuple(args))
    key = (tuple(command), _version(program))
    if key not in _RUNS:
        _RUNS[key] = subprocess.run(command, cwd=programs.ROOT, env=NO_GPU, capture_output=True, text=True,
                                    timeout=180)
    return _RUNS[key]
