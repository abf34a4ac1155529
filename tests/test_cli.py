"""Bad input gets a clear error and a non-zero exit, never a crash or a silent default.

Every runnable program, built as the tests build it, is run twice without a GPU in sight
(CUDA_VISIBLE_DEVICES is emptied, so this holds on a GPU machine too):
- with an option it does not know: it must exit 1 (not 2, the harness's "waived") and name the
  option in its message, before touching the GPU;
- with its first checked arguments: a CPU program must pass as usual; a GPU program must exit 1 with
  a plain message on stderr, not die on a signal, an uncaught exception or a Python traceback.
"""

import os
import subprocess

import pytest

from course import programs

RUNNABLE = [p for p in programs.all_programs() if p.runnable]
NO_GPU = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
CRASH_SIGNS = ("Traceback (most recent call last)", "terminate called", "Segmentation fault", "core dumped",
               "Aborted")


def _run(program, args):
    if program.lang != "python":
        built = programs.build(program)
        assert built.returncode == 0, built.stderr
    return subprocess.run(program.run_command(tuple(args)), cwd=programs.ROOT, env=NO_GPU, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.parametrize("program", RUNNABLE, ids=lambda p: p.rel)
def test_rejects_unknown_option(program):
    proc = _run(program, ["--no-such-option", "7"])
    said = proc.stdout + proc.stderr
    assert proc.returncode == programs.EXIT_FAIL, f"exit code {proc.returncode}, want {programs.EXIT_FAIL}\n{said}"
    assert "--no-such-option" in said, f"the message does not name the unknown option:\n{said}"
    assert not any(s in said for s in CRASH_SIGNS), said


@pytest.mark.parametrize("program", [p for p in RUNNABLE if p.gpu], ids=lambda p: p.rel)
def test_gpu_program_without_gpu_fails_cleanly(program):
    args = program.run_args[0] if program.run_args else ()
    proc = _run(program, args)
    said = proc.stdout + proc.stderr
    assert proc.returncode == programs.EXIT_FAIL, f"exit code {proc.returncode}, want {programs.EXIT_FAIL}\n{said}"
    assert proc.stderr.strip(), f"exited {proc.returncode} without saying why on stderr\n{said}"
    assert not any(s in said for s in CRASH_SIGNS), said
