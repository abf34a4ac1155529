"""What `python -m course.exercise NAME` shows a reader: the checker's verdict, each failure once.

A checker prints machine lines (`CHECK PASS|FAIL name n=...`, `BENCH {...}`; course/verdicts.py) and,
before a CHECK line, indented messages that explain it: "  wrong at index 3: expected 1, got 0",
"  name: 5 of 9 elements wrong", "  name: your kernel raised IndexError: ...". The runner shows, by
default, only the failed checks, one line each with the first few wrong values under the first one,
so that a one-token mistake reads in a dozen lines; `--verbose` shows everything the checker printed.
The verdict itself (pass, fail, waived) is the harness's (course/verdicts.py), not this module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from course.verdicts import CHECK_LINE

FAILED_CHECKS_SHOWN = 4   # failed checks with a line of their own; the rest are named on one line
EXAMPLES_SHOWN = 3        # wrong values listed under the first failed check
LINE_WIDTH = 200          # an exception's message can run long
_EXAMPLE = re.compile(r"^(wrong at |=========)")  # one wrong value (compare), one sanitizer report line
_OWN_LINE = re.compile(r"^(seed \d+ |checking |BENCH )")  # the runner says these itself, or nothing


@dataclass
class Check:
    status: str
    name: str
    n: int
    detail: str
    messages: list[str] = field(default_factory=list)  # the indented lines printed before it, unindented


def parse(stdout: str) -> tuple[list[Check], list[str]]:
    """The checks a checker printed, each with the messages before it, and the messages after the last
    one (a checker that stopped early)."""
    checks: list[Check] = []
    pending: list[str] = []
    for line in stdout.splitlines():
        m = CHECK_LINE.fullmatch(line)
        if m:
            checks.append(Check(m["status"], m["name"], int(m["n"]), m["rest"].strip(), pending))
            pending = []
        elif line.strip() and not _OWN_LINE.match(line):
            pending.append(line.strip())
    return checks, pending


def _clip(text: str) -> str:
    return text if len(text) <= LINE_WIDTH else text[:LINE_WIDTH - 3] + "..."


def _without_name(message: str, name: str) -> str:
    """A message without its "name: " prefix, where the prefix is the check's name or the start of it
    (a case's name that its checks extend: "rows_9x40: ..." before "rows_9x40_opcheck")."""
    head, sep, rest = message.partition(": ")
    return rest if sep and " " not in head and name.startswith(head) else message


_NAN_WHY = re.compile(r" \((\d+) of them NaN: [^)]*\)")  # compare's explanation, said once is enough


def _about(check: Check) -> tuple[str, list[str]]:
    """What went wrong in a failed check, in one phrase, and its examples (wrong values)."""
    examples = [m for m in check.messages if _EXAMPLE.match(m)]
    notes = [_without_name(m, check.name) for m in check.messages if not _EXAMPLE.match(m)]
    if notes:
        return "; ".join(notes), examples
    m = re.search(r"first_bad=(\d+) got=(\S+) want=(\S+)", check.detail)
    if m:
        return f"wrong at index {m[1]}: expected {m[3]}, got {m[2]}", examples
    return check.detail or "failed", examples


def failure_lines(checks: list[Check]) -> list[str]:
    """The failed checks: the first with up to EXAMPLES_SHOWN wrong values under it, the next ones
    with their first, then the names of any beyond FAILED_CHECKS_SHOWN."""
    failed = [c for c in checks if c.status == "FAIL"]
    if not failed:
        return []
    about, examples = _about(failed[0])
    lines = [_clip(f"  {failed[0].name}: {about}")] + [_clip(f"    {e}") for e in examples[:EXAMPLES_SHOWN]]
    # The next ones with their first wrong value; checks that failed alike (the same exception) share a line.
    alike: dict[str, list[str]] = {}
    for check in failed[1:]:
        about, examples = _about(check)
        if _NAN_WHY.search(lines[0]):
            about = _NAN_WHY.sub(r" (\1 NaN)", about)
        if examples and examples[0].startswith("wrong at ") and examples[0] not in about:
            about += "; first " + examples[0].removeprefix("wrong ")
        alike.setdefault(about, []).append(check.name)
    groups = list(alike.items())
    for about, names in groups[:FAILED_CHECKS_SHOWN - 1]:
        lines.append(_clip(f"  {', '.join(names)}: {about}"))
    rest = [name for _, names in groups[FAILED_CHECKS_SHOWN - 1:] for name in names]
    if rest:
        lines.append(_clip(f"  and {len(rest)} more failed: {', '.join(rest)}"))
    return lines


def pass_notes(checks: list[Check]) -> list[str]:
    """What a passing run still has to say: how fast the kernel was against its bar (a speed check's
    detail names its bar= or cap=), and any check the checker had to skip here."""
    notes = []
    for check in checks:
        timed = re.search(r"\b(bar|cap)=", check.detail)
        notes += [f"  {m}" for m in check.messages if timed or "skipped" in m]
    return [_clip(n) for n in dict.fromkeys(notes)]


def summary(name: str, checks: list[Check], passed: bool) -> str:
    """The verdict's line: PASS with the number of checks, or FAIL with how many failed of how many."""
    failed = sum(c.status == "FAIL" for c in checks)
    if passed:
        return f"PASS {name}: all {len(checks)} checks passed"
    if failed:
        return f"FAIL {name}: {failed} of {len(checks)} checks failed"
    return f"FAIL {name}:"
