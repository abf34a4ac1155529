"""Benchmark rows that hold up: each benchmark is timed in two processes, and the record keeps both.

A single median can be wrong in ways no check inside the program sees: another process on the GPU, a
clock that had not settled, a one-off stall. So a benchmark run (`course: bench`) runs twice, each
time as a fresh process, and every BENCH row keeps both medians (`medians`). A row whose medians
differ by more than `AGREEMENT` is measured again in a third process; a row that still has no two
medians within `AGREEMENT` of each other (or that only one process printed) is marked `unstable`,
and no claim or headline may rest on it (course/claims.py, course/headline.py). The row's `time_ms`
is the median of its medians.

A program may print, beside the time, fields that each process measures for itself: a bandwidth or a
share computed from its own time, a compile time, the accuracy a timed training reached. It declares
them (`course: measured FIELD...`, names or globs such as `stall_*`, course/programs.py), and a row that has them is taken whole from one
process, the one whose median is the lower middle of the medians (`statistics.median_low`: the lower
of two, the middle of three), so that those fields agree with the row's `time_ms`. A numeric field
that differs between processes without being declared fails the run: taken from one process beside a
time merged from several, it would not be the figure of any run.

Programs also declare invariants that must hold within one run (course/programs.py: `course:
invariant`), such as "a causal attention is faster than its non-causal twin". A broken invariant is
measured again like an unstable row; if it still breaks, the run fails with the rows named.
"""

from __future__ import annotations

import fnmatch
import re
import statistics
import time

from . import programs
from .verdicts import Outcome

AGREEMENT = 0.05    # two medians of one row agree when they differ by at most 5% of the smaller
GROWS_SLACK = 0.05  # "grows": a larger size may be at most this much faster (timing noise), no more


def spread(medians: list[float]) -> float:
    """The relative difference of the two closest medians (0 for one median: nothing to compare)."""
    if len(medians) < 2:
        return float("inf")
    s = sorted(medians)
    return min((b - a) / a for a, b in zip(s, s[1:]))


def is_measured(name: str, measured: tuple[str, ...] | list[str]) -> bool:
    """Whether a row field is one the program declares as measured by each process: a declared name, or
    one a declared glob matches (a profiler's fields: `stall_*`)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in measured)


def merge_rows(outputs: list[list[dict]], measured: tuple[str, ...] | list[str] = ()) -> list[dict]:
    """One row per (case, impl), in the first process's order, with every process's median; a row with
    `measured` fields comes whole from the process whose median is the median_low of them."""
    merged: dict[tuple, dict] = {}
    from_process: dict[tuple, list[dict]] = {}
    for rows in outputs:
        for row in rows:
            key = (row.get("case"), row.get("impl"))
            if key not in merged:
                merged[key] = {**row, "medians": []}
            merged[key]["medians"].append(row["time_ms"])
            from_process.setdefault(key, []).append(row)
    for key, row in merged.items():
        if any(is_measured(f, measured) for f in row if f not in ("time_ms", "case", "impl", "medians")):
            chosen = statistics.median_low(row["medians"])
            row.update({k: v for k, v in from_process[key][row["medians"].index(chosen)].items()})
        else:
            row["time_ms"] = float(f"{statistics.median(row['medians']):.6g}")
        if len(row["medians"]) < 2:
            row["unstable"] = "timed by one process only"
        elif spread(row["medians"]) > AGREEMENT:
            row["unstable"] = (f"no two of its medians agree within {AGREEMENT:.0%} "
                               f"({', '.join(f'{m:.4g}' for m in row['medians'])} ms)")
        else:
            row.pop("unstable", None)
    return list(merged.values())


def undeclared_differences(outputs: list[list[dict]], measured: tuple[str, ...] | list[str] = ()) -> list[str]:
    """A sentence for each numeric field, other than the time and the declared `measured` ones, whose
    value differs between the processes that printed its row."""
    values: dict[tuple, list] = {}
    for rows in outputs:
        for row in rows:
            for name, value in row.items():
                if name == "time_ms" or is_measured(name, measured) or isinstance(value, bool) \
                        or not isinstance(value, (int, float)):
                    continue
                values.setdefault((row.get("case"), row.get("impl"), name), []).append(value)
    return [f"field {name!r} of row {impl!r} on {case!r} differs between timing processes ({', '.join(map(repr, v))}): "
            f"declare it with 'course: measured {name}' so that the row is taken whole from one process "
            f"(course/bench.py)" for (case, impl, name), v in values.items() if len(set(v)) > 1]


def _number_blind(case: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "#", str(case))


def broken_invariants(invariants: list[tuple[str, ...]], rows: list[dict]) -> list[str]:
    """What the rows break, one sentence each; an invariant that matches no pair of rows is broken
    too (a declaration that checks nothing is a mistake, not a pass)."""
    problems = []
    for inv in invariants:
        kind = inv[0]
        glob = inv[3] if kind == "faster" else inv[-1]
        mine = [r for r in rows if fnmatch.fnmatchcase(str(r.get("impl")), glob)]
        pairs = 0
        if kind == "faster":
            token, partner, ratio = inv[1], inv[2], inv[4] if len(inv) > 4 else 1.0
            by_key = {(r.get("case"), r.get("impl")): r for r in mine}
            for r in mine:
                words = str(r.get("case")).split()
                if token not in words:
                    continue
                i = words.index(token)
                twin = by_key.get((" ".join(words[:i] + [partner] + words[i + 1:]), r.get("impl")))
                if twin is None:
                    continue
                pairs += 1
                if not r["time_ms"] < ratio * twin["time_ms"]:
                    bound = f"{ratio:g} x " if ratio != 1 else ""
                    problems.append(f"invariant 'faster {token} {partner}': {r['impl']} takes {r['time_ms']:.4g} ms "
                                    f"on {r['case']!r}, not less than {bound}{twin['time_ms']:.4g} ms on {twin['case']!r}")
        elif kind == "grows":
            field = inv[1]
            groups: dict[tuple, list[dict]] = {}
            for r in mine:
                if isinstance(r.get(field), (int, float)):
                    groups.setdefault((r.get("impl"), _number_blind(r.get("case"))), []).append(r)
            for group in groups.values():
                group.sort(key=lambda r: r[field])
                for small, large in zip(group, group[1:]):
                    if large[field] == small[field]:
                        continue
                    pairs += 1
                    if large["time_ms"] < small["time_ms"] * (1 - GROWS_SLACK):
                        problems.append(f"invariant 'grows {field}': {large['impl']} takes {large['time_ms']:.4g} ms "
                                        f"at {field}={large[field]:g} ({large['case']!r}), less than "
                                        f"{small['time_ms']:.4g} ms at {field}={small[field]:g}")
        if pairs == 0:
            problems.append(f"invariant {' '.join(map(str, inv))!r} matched no pair of rows: it checks nothing")
    return problems


def impls_of(rows: list[dict]) -> list[str]:
    """The implementations of `rows`, once each, in order: what a repeat process is asked to time."""
    return list(dict.fromkeys(str(r.get("impl")) for r in rows))


def measure(run: programs.Run, execute=programs.execute) -> Outcome:
    """Run a benchmark twice (a third time for rows that disagree or break an invariant), each in its
    own process, and return one outcome: every process's checks, the merged rows, and the problems of
    any process, plus the invariants still broken at the end."""
    seconds: list[float] = []

    def timed(**kw) -> Outcome:
        began = time.perf_counter()
        out = execute(run, **kw)
        seconds.append(round(time.perf_counter() - began, 2))
        return out

    first = timed(timing_process=1)
    # The repeat times what the first process timed: a program that searches within a time budget
    # (mnist_torch.py's grid) would otherwise reach a different set of rows each time, and its fastest
    # row could end up timed once.
    outcomes = [first, timed(timing_process=2, retime=impls_of(first.benchmarks))]

    def needs_another(rows):
        """The rows a third process times: the unstable ones, or all when an invariant is broken."""
        return rows if broken_invariants(run.program.invariants, rows) else [r for r in rows if r.get("unstable")]

    measured = run.program.measured
    rows = merge_rows([o.benchmarks for o in outcomes], measured)
    again = needs_another(rows)
    if all(o.passed for o in outcomes) and again:
        outcomes.append(timed(timing_process=3, retime=impls_of(again)))
        rows = merge_rows([o.benchmarks for o in outcomes], measured)
    problems = [p for o in outcomes for p in o.problems]
    problems += undeclared_differences([o.benchmarks for o in outcomes], measured)
    problems += broken_invariants(run.program.invariants, rows) if rows else []
    stdout = "".join(f"===== timing process {i + 1} of {len(outcomes)}\n{o.stdout}" for i, o in enumerate(outcomes))
    return Outcome(
        returncode=next((o.returncode for o in outcomes if o.returncode != 0), 0),
        stdout=stdout,
        stderr="".join(o.stderr for o in outcomes),
        checks=[c for o in outcomes for c in o.checks],
        benchmarks=rows,
        problems=list(dict.fromkeys(problems)),
        process_s=seconds,
    )
