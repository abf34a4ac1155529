"""Running a course program the way a reader would, with no GPU in sight: shared by the tests of
command lines (tests/test_cli.py, tests/test_commands_in_text.py)."""

import os
import subprocess

from course import programs

# CUDA_VISIBLE_DEVICES emptied: a GPU program finds no GPU, on a GPU machine too.
NO_GPU = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
# An option no program knows, and a value for it.
UNKNOWN_OPTION = ("--no-such-option", "7")


def run_without_gpu(program: programs.Program, args) -> subprocess.CompletedProcess:
    """The program built as the tests build it, then run with `args` and no GPU visible."""
    if program.lang != "python":
        built = programs.build(program)
        assert built.returncode == 0, built.stderr
    return subprocess.run(program.run_command(tuple(args)), cwd=programs.ROOT, env=NO_GPU, capture_output=True,
                          text=True, timeout=180)
