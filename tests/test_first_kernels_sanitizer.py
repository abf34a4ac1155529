"""compute-sanitizer finds the bugs that kernels/first-kernels/sanitizer_demo.cu plants.

The program is correct without --plant-bug (its own runs are checked by test_programs); here the
tools run on it with and without the planted bugs, and each report must name the bug, or say that
there is none. Taught in docs/first-kernels/sanitizer.md.
"""

import re
import subprocess

import pytest

from course import programs, toolchain

SOURCE = "kernels/first-kernels/sanitizer_demo.cu"
BINARY = programs.BUILD / "first-kernels" / "sanitizer_test" / "sanitizer_demo"


@pytest.fixture(scope="module")
def binary():
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    # -lineinfo: the reports then name the source file and line of the bad access.
    cmd = ["nvcc", *programs.NVCC_FLAGS, f"-arch={programs.default_arch()}", "-o", str(BINARY),
           str(programs.ROOT / SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=programs.ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return str(BINARY)


def _sanitize(binary: str, tool: str, *args: str) -> str:
    proc = subprocess.run([toolchain.compute_sanitizer(), "--tool", tool, binary, "--n", "1000003", *args],
                          capture_output=True, text=True, cwd=programs.ROOT, timeout=600)
    return proc.stdout + proc.stderr


@pytest.mark.gpu
def test_memcheck_clean_program_has_no_errors(binary):
    out = _sanitize(binary, "memcheck")
    assert "ERROR SUMMARY: 0 errors" in out, out
    assert "CHECK PASS scale" in out and "CHECK FAIL" not in out, out


@pytest.mark.gpu
def test_memcheck_reports_planted_out_of_bounds_write(binary):
    out = _sanitize(binary, "memcheck", "--plant-bug", "oob")
    assert "Invalid __global__ write of size 4" in out, out
    assert "sanitizer_demo.cu" in out, "the report should name the source file (built with -lineinfo)\n" + out
    m = re.search(r"ERROR SUMMARY: (\d+) error", out)
    assert m and int(m.group(1)) >= 1, out


@pytest.mark.gpu
def test_racecheck_clean_program_has_no_hazards(binary):
    out = _sanitize(binary, "racecheck")
    assert re.search(r"RACECHECK SUMMARY: 0 hazards", out), out


@pytest.mark.gpu
def test_racecheck_reports_planted_race(binary):
    out = _sanitize(binary, "racecheck", "--plant-bug", "race")
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards?", out)
    assert m and int(m.group(1)) >= 1, out
    assert "reverse_blocks" in out, out
