"""The memory-model chapter's race demonstration: compute-sanitizer's racecheck finds the hazard
planted in kernels/memory-model/reduction.cu (--plant-race: the shared-memory tree without its
__syncthreads()), and finds none in the program as written, which passes its checks."""

import re
import subprocess
from pathlib import Path

import pytest

from course import programs, toolchain

pytestmark = pytest.mark.gpu

N = "4099"  # a prime: the last block is partly empty


@pytest.fixture(scope="module")
def reduction() -> Path:
    prog = programs.program_for("kernels/memory-model/reduction.cu")
    proc = programs.build(prog)
    assert proc.returncode == 0, proc.stderr
    return prog.executable


def _racecheck(exe: Path, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    proc = subprocess.run([toolchain.compute_sanitizer(), "--tool", "racecheck", str(exe), *args], capture_output=True, text=True,
                          timeout=600)
    text = proc.stdout + proc.stderr
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed", text)
    assert m, f"no racecheck summary in the output:\n{text[-3000:]}"
    return proc, int(m.group(1))


def test_racecheck_reports_the_planted_race(reduction):
    proc, hazards = _racecheck(reduction, "--n", N, "--plant-race")
    assert hazards > 0, proc.stdout[-3000:]


def test_racecheck_is_clean_with_every_barrier(reduction):
    proc, hazards = _racecheck(reduction, "--n", N)
    assert hazards == 0, proc.stdout[-3000:]
    assert proc.returncode == 0 and "CHECK PASS" in proc.stdout and "CHECK FAIL" not in proc.stdout, proc.stdout
