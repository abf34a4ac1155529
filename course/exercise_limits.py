"""After a speed exercise passes on a GPU: the reader's kernel as a share of the GPU's limit, beside the
course's solution's share from the GPU record (`python -m course.exercise NAME` prints it).

The limit is the GPU's datasheet (course/headline.py's DATASHEETS): the bytes a BENCH row says the
kernel must move over its time, against the memory bandwidth, and its FLOPs over its time, against the
peak of the arithmetic its name says it uses. Of the two shares the larger is the one that binds (a
roofline's reading): a transpose is judged by bandwidth, an SGEMM by FP32 FLOP/s. The checker's own
speed bar, against a peer timed in the same run, is what passes or fails; this line only says how far
the kernel is from what the hardware allows, and how far the course's solution got.
"""

from __future__ import annotations

from course import headline, record, verdicts

SOLUTION_ID = "tests/test_exercises.py::test_solution_passes_on_the_gpu[{name} --bench]"


def share(row: dict, gpu: str) -> tuple[float, str] | None:
    """(share of the limit, what the limit is) for a BENCH row on `gpu`, or None where the course has no
    datasheet for the GPU or the row has no time."""
    sheet = headline.datasheet_for(gpu)
    seconds = float(row.get("time_ms") or 0) / 1e3
    if sheet is None or seconds <= 0:
        return None
    found = []
    if row.get("bytes"):
        found.append((row["bytes"] / seconds / sheet["bandwidth"],
                      f"of the {sheet['source']}'s memory bandwidth ({sheet['bandwidth'] / 1e12:.3g} TB/s)"))
    kind = headline.precision(str(row.get("impl", "")), str(row.get("case", "")))
    if row.get("flops") and kind in sheet["peak"]:
        peak = sheet["peak"][kind]
        found.append((row["flops"] / seconds / peak,
                      f"of the {sheet['source']}'s {headline.PRECISION_NAMES[kind]} peak ({peak / 1e12:.3g} TFLOP/s)"))
    return max(found, default=None)


def _yours(stdout: str) -> list[dict]:
    """The reader's rows: the BENCH rows the checker printed for the kernel under test, not its peer."""
    return [b for b in verdicts.judge(0, stdout, "", require_check=False).benchmarks if not b.get("peer")]


def solution_rows(rec: dict, name: str) -> tuple[list[dict], str, str] | None:
    """The course solution's own rows from the latest passing GPU-run entry of its speed check, the GPU
    they were measured on and the date; None when the record has none."""
    found = [e for e in rec["items"].values()
             if e["id"] == SOLUTION_ID.format(name=name) and e["outcome"] == "passed" and e.get("benchmarks")]
    if not found:
        return None
    e = max(found, key=lambda e: record.run_info(rec, e).get("started", ""))
    info = record.run_info(rec, e)
    return [b for b in e["benchmarks"] if not b.get("peer")], info.get("gpu") or "unknown GPU", info.get("date", "?")


def limit_lines(stdout: str, gpu: str | None, rec: dict, name: str) -> list[str]:
    """At most one line per case the checker timed: the reader's share of the limit, and the solution's
    share on the GPU of its recorded run."""
    lines = []
    recorded = solution_rows(rec, name)
    for row in _yours(stdout):
        mine = share(row, gpu) if gpu else None
        if mine is None:
            lines.append(f"  {row.get('case')}: no datasheet figures for {gpu or 'this GPU'} in course/headline.py, "
                         f"so no share of its limit is shown")
            continue
        text = f"  {row.get('case')}: your kernel reaches {100 * mine[0]:.0f}% {mine[1]}"
        theirs = None
        if recorded is not None:
            rows, where, date = recorded
            same = [r for r in rows if r.get("case") == row.get("case")]
            theirs = share(same[0], where) if same else None
        if theirs is not None:
            text += f"; the course's solution {100 * theirs[0]:.0f}% (GPU record: {where}, {date})"
        else:
            text += "; the course's solution has no recorded run of this case yet"
        lines.append(text)
    return lines
