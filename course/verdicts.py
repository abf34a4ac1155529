"""Verdicts: how the harness reads what a program printed, and when a run passes.

A program reports its checks and figures on stdout, one line each (kernels/common/verify.cuh,
planted.cuh and timing.cuh, and kernels/common/course_tools.py print them):

    CHECK PASS <name> n=<count> [detail]     a check that compared <count> values and passed
    CHECK FAIL <name> n=<count> [detail]     one that failed
    BENCH {"case": ..., "impl": ..., "time_ms": ..., "bytes": ..., "flops": ..., "peer": ...}

A run passes when the program exits 0, prints at least one `CHECK PASS` line with a positive count,
and prints no `CHECK FAIL` line. Exit code 2 means "waived": the GPU lacks a feature the program
needs, which the harness reports as a skip.

judge()'s source text is part of every run's content hash (course/programs.py, Run.content_hash):
edit it and every recorded result goes stale. New rules go into verdict() instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

EXIT_FAIL = 1
EXIT_WAIVED = 2

_CHECK = re.compile(r"^CHECK (?P<status>PASS|FAIL) (?P<name>\S+) n=(?P<n>\d+)(?P<rest>.*)$", re.MULTILINE)
CHECK_LINE = _CHECK  # one CHECK line, for readers of a program's output (course/exercise_report.py)
_BENCH = re.compile(r"^BENCH (?P<json>\{.*\})\s*$", re.MULTILINE)


@dataclass
class Outcome:
    """What a run printed, judged by the harness's rules."""

    returncode: int
    stdout: str
    stderr: str
    checks: list[dict]
    benchmarks: list[dict]
    problems: list[str]
    # A benchmark's timing processes, seconds each (course/bench.py): where a sitting's time goes.
    process_s: list[float] = field(default_factory=list)

    @property
    def waived(self) -> bool:
        return self.returncode == EXIT_WAIVED

    @property
    def passed(self) -> bool:
        return not self.problems and not self.waived


def judge(returncode: int, stdout: str, stderr: str, require_check: bool = True) -> Outcome:
    checks = [
        {"status": m["status"], "name": m["name"], "n": int(m["n"]), "detail": m["rest"].strip()}
        for m in _CHECK.finditer(stdout)
    ]
    benchmarks = []
    problems = []
    for m in _BENCH.finditer(stdout):
        try:
            benchmarks.append(json.loads(m["json"]))
        except json.JSONDecodeError as e:
            problems.append(f"malformed BENCH line ({e}): {m.group(0)}")
    if returncode not in (0, EXIT_WAIVED):
        problems.append(f"exit code {returncode}")
    failed = [c["name"] for c in checks if c["status"] == "FAIL"]
    if failed:
        problems.append(f"failed checks: {', '.join(failed)}")
    empty = [c["name"] for c in checks if c["status"] == "PASS" and c["n"] == 0]
    if empty:
        problems.append(f"checks that compared nothing (n=0): {', '.join(empty)}")
    if returncode == 0 and require_check and not [c for c in checks if c["status"] == "PASS" and c["n"] > 0]:
        problems.append("exited 0 without printing a passing CHECK line: success was claimed, not checked")
    for b in benchmarks:
        if not (isinstance(b.get("time_ms"), (int, float)) and b["time_ms"] > 0):
            problems.append(f"benchmark with no positive time: {b}")
    return Outcome(returncode, stdout, stderr, checks, benchmarks, problems)


def verdict(returncode: int, stdout: str, stderr: str, require_check: bool = True) -> Outcome:
    """judge(), plus one rule added later: a line that starts like a CHECK line but does not parse (a
    name with spaces) is a problem, because a FAIL line the pattern misses would go unseen. The rule
    is kept out of judge() and out of the record's content hash: it can only fail a run that judge()
    passed, and no run in the record printed such a line (tests/test_gpu_record.py checks the
    recorded output), so the recorded verdicts stand."""
    outcome = judge(returncode, stdout, stderr, require_check)
    malformed = malformed_check_lines(stdout)
    if malformed:
        outcome.problems.append(f"malformed CHECK line (want 'CHECK PASS|FAIL <one-word name> n=<count> ...'): "
                                f"{malformed[0]}")
    return outcome


def malformed_check_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines()
            if re.match(r"CHECK (PASS|FAIL)\b", line) and not _CHECK.fullmatch(line)]
