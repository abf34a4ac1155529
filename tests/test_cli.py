"""Bad input gets a clear error and a non-zero exit, never a crash or a silent default.

Every runnable program, built as the tests build it, is run twice without a GPU in sight
(CUDA_VISIBLE_DEVICES is emptied, so this holds on a GPU machine too):
- with an option it does not know: it must exit 1 (not 2, the harness's "waived") and name the
  option in its message, before touching the GPU;
- with its first checked arguments: a CPU program must pass as usual; a GPU program must exit 1 with
  a plain message on stderr, not die on a signal, an uncaught exception or a Python traceback.
"""

import pytest
from cli_support import UNKNOWN_OPTION, run_without_gpu

from course import programs

RUNNABLE = [p for p in programs.all_programs() if p.runnable]
CRASH_SIGNS = ("Traceback (most recent call last)", "terminate called", "Segmentation fault", "core dumped",
               "Aborted")


def builds_for(item):
    """What a test here builds (tests/build_ahead.py builds it ahead): the program, for this machine."""
    program = item.callspec.params["program"]
    return [] if program.lang == "python" else [(program, False)]


@pytest.mark.parametrize("program", RUNNABLE, ids=lambda p: p.rel)
def test_rejects_unknown_option(program):
    proc = run_without_gpu(program, UNKNOWN_OPTION)
    said = proc.stdout + proc.stderr
    assert proc.returncode == programs.EXIT_FAIL, f"exit code {proc.returncode}, want {programs.EXIT_FAIL}\n{said}"
    assert UNKNOWN_OPTION[0] in said, f"the message does not name the unknown option:\n{said}"
    assert not any(s in said for s in CRASH_SIGNS), said


@pytest.mark.parametrize("program", [p for p in RUNNABLE if p.gpu], ids=lambda p: p.rel)
def test_gpu_program_without_gpu_fails_cleanly(program):
    args = program.run_args[0] if program.run_args else ()
    proc = run_without_gpu(program, args)
    said = proc.stdout + proc.stderr
    assert proc.returncode == programs.EXIT_FAIL, f"exit code {proc.returncode}, want {programs.EXIT_FAIL}\n{said}"
    assert proc.stderr.strip(), f"exited {proc.returncode} without saying why on stderr\n{said}"
    assert not any(s in said for s in CRASH_SIGNS), said
