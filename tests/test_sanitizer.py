"""Every compiled GPU program under compute-sanitizer: memcheck, racecheck, initcheck and synccheck, on
its first checked arguments (course.programs.SanitizerRun). The verdict goes to the GPU record with the
item; pages say their programs are sanitizer-clean, or which tool reports and why.

A program whose intended behaviour trips a tool declares it (`course: sanitizer-expect <tool> <why>`):
then the tool must report, so the declaration cannot go stale silently. `course: sanitizer-skip`
leaves a tool out, with the reason shown on the page.
"""

import re
import subprocess

import pytest

from course import programs, toolchain

ERRORS = 86  # --error-exitcode: what the sanitizer returns when it found something
RUNS = [s for p in programs.all_programs() for s in p.sanitizer_runs()]
# memcheck, initcheck and synccheck end with "ERROR SUMMARY: N errors"; racecheck with
# "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error")


@pytest.mark.gpu
@pytest.mark.parametrize("run", RUNS, ids=lambda s: s.id)
def test_sanitizer(run, request):
    built = programs.build(run.program)
    assert built.returncode == 0, built.stderr
    proc = subprocess.run(run.command(toolchain.compute_sanitizer(), ERRORS), cwd=programs.ROOT, capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    summaries = _SUMMARY.findall(out)
    errors = sum(int(a or b) for a, b in summaries)
    reported = proc.returncode == ERRORS or errors > 0
    from course.pytest_plugin import ITEM_OUTCOME
    # The record keeps the start of the report (the first error, with its kernel and frames) and its end.
    kept = out if len(out) <= 7000 else out[:4000] + "\n[...]\n" + out[-3000:]
    request.node.stash[ITEM_OUTCOME] = {"checks": [], "benchmarks": [], "printed": bool(out.strip()), "stdout": kept}
    if proc.returncode == programs.EXIT_WAIVED:
        pytest.skip("waived: the program does not run on this GPU")
    if run.expected_report:
        assert reported, f"{run.tool} was declared to report ({run.expected_report}) but found nothing:\n{out[-3000:]}"
        return
    assert not reported, f"{run.tool} reported {errors} error(s):\n{kept}"
    assert proc.returncode == 0, f"exit code {proc.returncode} under {run.tool}:\n{out[-3000:]}"
    assert summaries, f"no summary line from {run.tool}:\n{out[-3000:]}"
