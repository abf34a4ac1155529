"""Claims: figures in prose that are read from the GPU record and checked when the site is built.

A page states a measured figure with a directive, inline in a sentence or a table cell:

    v10 reaches <!-- claim: kernels/matmul/sgemm.cu case="4096^3" impl="v10" show=pct min=90 --> of
    cuBLAS's speed.

- The program's rows are the BENCH lines of its passing `course: bench` runs for its current code
  (as `<!-- course:results -->` reads them).
- `case` and `impl` pick a row; a `*` in either is a glob, and the fastest matching row is taken
  (`vs="torch*"`: the fastest PyTorch configuration in that run).
- `show` is what is rendered: `time` (ms), `gbps`, `tflops`, `speedup` (time of `vs` over time of
  `impl`, as "1.58×"), `pct` (the same as a percentage: impl's speed as a share of vs's), or
  `field:NAME` for any numeric field of the row, which carries no unit unless `unit` names one
  (`unit=%` for a field that is a percentage: "70.1%", and its goal "(goal ≥ 80%: missed)").
- `vs` defaults to the case's peer row; `vs_case` compares with a row of another case, and
  `vs_program` with a row of another program (a framework's benchmark beside the course's, say).
- A comparison (`speedup`, `pct`) reads both rows from one sitting on one GPU (course.record.where):
  rows of two runs, even of the same machine kind, are never compared. A row the record marks
  `unstable` (its two timing processes disagreed, course/bench.py) supports no claim at all.
- `min` and `max` are the bound the sentence asserts ("faster than": show=speedup min=1). A record that
  breaks it, or that lacks a row, is reported through `warn` (the MkDocs hook's log warning, so the
  strict build fails) and the page shows the claim as unsupported.
- `goal_min` / `goal_max` state a target: the figure is followed by "(goal ≥ X: met)" or "missed",
  which never fails the build, so a missed goal is reported rather than hidden; or "parity" when the
  figure lies within its rows' measured spread of the goal (the two timing processes disagree by
  more than the margin), which establishes neither.
"""

from __future__ import annotations

import fnmatch
import html
import re

from . import bench, metrics, programs, record
from . import directives

_OPT = re.compile(r'(\w+)=(?:"([^"]*)"|(\S+))')
KNOWN = {"case", "impl", "show", "vs", "vs_case", "vs_program", "min", "max", "goal_min", "goal_max", "unit"}
UNITS = {"time": " ms", "gbps": " GB/s", "tflops": " TFLOP/s", "speedup": "×", "pct": "%"}


class ClaimError(Exception):
    """The claim is malformed, or the record does not support it."""


class AwaitingGpuRun(Exception):
    """The program's benchmark has no run for its current code and is openly declared as awaiting one
    (records/awaiting-gpu.json): the page says so instead of stating a figure, and the build goes on."""


def parse_options(text: str) -> dict:
    opts = {m[1]: m[2] if m[2] is not None else m[3] for m in _OPT.finditer(text)}
    leftover = _OPT.sub("", text).strip()
    if leftover:
        raise ClaimError(f"cannot read {leftover!r} (options are key=value or key=\"value\")")
    unknown = set(opts) - KNOWN
    if unknown:
        raise ClaimError(f"unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(KNOWN))})")
    for key in ("case", "impl", "show"):
        if key not in opts:
            raise ClaimError(f"needs {key}=")
    if "unit" in opts and not opts["show"].startswith("field:"):
        raise ClaimError(f"unit= is for show=field:NAME; show={opts['show']} carries its own unit")
    return opts


def program_rows(rel_path: str, rec: dict, awaiting: dict | None = None,
                 skipped: list | None = None) -> tuple[list[dict], list[str]]:
    """BENCH rows of the program's passing bench runs for its current code, and the runs' descriptions
    (course/record.py: passing_bench_rows); runs declared as awaiting go to `skipped` when it is given."""
    prog = programs.program_for(rel_path)
    if prog is None:
        raise ClaimError(f"{rel_path} is not a program under kernels/")
    if not [r for r in prog.runs() if r.bench]:
        raise ClaimError(f"{rel_path} declares no 'course: bench' run")
    try:
        return record.passing_bench_rows(prog, rec, awaiting, skipped)
    except record.NotRecorded as e:
        if e.awaiting is not None:
            raise AwaitingGpuRun(f"{e.run.id}: {e.awaiting}") from None
        raise ClaimError(str(e)) from None


def comparable(a: dict, b: dict) -> None:
    """Raises ClaimError unless rows a and b were measured in one sitting on one GPU."""
    if a.get("_where") != b.get("_where"):
        raise ClaimError(f"compares rows of two runs: {a['impl']} on {a['case']!r} ({a.get('_where_text')}) "
                         f"with {b['impl']} on {b['case']!r} ({b.get('_where_text')}); a comparison needs "
                         f"both rows from one sitting on one GPU (re-run both programs together: .ci/gpu-run.sh)")


def stable(row: dict) -> None:
    """Raises ClaimError if the row's timing did not reproduce (course/bench.py)."""
    if row.get("unstable"):
        raise ClaimError(f"rests on an unstable row: {row['impl']} on {row['case']!r} ({row['unstable']})")


def pick(rows: list[dict], case: str, impl: str) -> dict:
    """The row of `case` and `impl`; with a glob in either, the fastest matching row."""
    found = [b for b in rows if fnmatch.fnmatchcase(str(b.get("case")), case)
             and fnmatch.fnmatchcase(str(b.get("impl")), impl)]
    if not found:
        raise ClaimError(f"no BENCH row with case {case!r} and impl {impl!r}")
    if len(found) > 1 and "*" not in case + impl:
        raise ClaimError(f"{len(found)} BENCH rows have case {case!r} and impl {impl!r}")
    return min(found, key=lambda b: b["time_ms"])


def compared_row(opts: dict, vs_rows: list[dict]) -> dict:
    """The row a `speedup` or `pct` claim compares with: `vs` in the `vs_case` (default: the claim's case),
    else that case's one peer row."""
    vs_case = opts.get("vs_case", opts["case"])
    if "vs" in opts:
        return pick(vs_rows, vs_case, opts["vs"])
    peers = [b for b in vs_rows if fnmatch.fnmatchcase(str(b.get("case")), vs_case) and b.get("peer")]
    if len(peers) != 1:
        raise ClaimError(f"case {vs_case!r} has {len(peers)} peer rows: name one with vs=")
    return peers[0]


def goal_status(value: float, goal_lo: float | None, goal_hi: float | None, spread: float) -> str:
    """"met", "missed", or "parity" when the figure lies within its own measured spread of the goal: a
    margin smaller than the disagreement of the timing processes establishes neither (`spread`: the
    relative spread of the rows the figure is made of, figure_spread)."""
    target = goal_lo if goal_lo is not None else goal_hi
    if target and abs(value - target) <= spread * abs(target):
        return "parity"
    met = (goal_lo is None or value >= goal_lo) and (goal_hi is None or value <= goal_hi)
    return "met" if met else "missed"


def figure_spread(opts: dict, rows: list[dict], vs_rows: list[dict] | None = None) -> float:
    """The relative spread of a timed figure: its row's (course/bench.py: spread, the two closest
    medians of its processes), plus the compared row's for a ratio. 0 for a recorded field that is not
    a time (an accuracy, a count) or a row timed in one process."""
    show = opts["show"]
    if show.startswith("field:"):
        return 0.0
    def one(row: dict) -> float:
        s = bench.spread(row.get("medians") or [])
        return 0.0 if s == float("inf") else s
    total = one(pick(rows, opts["case"], opts["impl"]))
    if show in ("speedup", "pct"):
        total += one(compared_row(opts, rows if vs_rows is None else vs_rows))
    return total


def value_of(opts: dict, rows: list[dict], vs_rows: list[dict] | None = None) -> tuple[float, str, str]:
    """(the figure, its unit, a sentence saying where it comes from). vs_rows: the rows `vs` is looked
    up in, when they come from another program."""
    show = opts["show"]
    vs_rows = rows if vs_rows is None else vs_rows
    row = pick(rows, opts["case"], opts["impl"])
    if not show.startswith("field:") or show == "field:time_ms":
        stable(row)
    what = f"{row['impl']} on {row['case']}: {row['time_ms']:.4g} ms"
    if show == "time":
        return row["time_ms"], UNITS[show], what
    if show == "gbps":
        if not row.get("bytes"):
            raise ClaimError(f"row {row['impl']!r} of {row['case']!r} has no bytes")
        return row["bytes"] / (row["time_ms"] * 1e-3) / 1e9, UNITS[show], what
    if show == "tflops":
        if not row.get("flops"):
            raise ClaimError(f"row {row['impl']!r} of {row['case']!r} has no flops")
        return row["flops"] / (row["time_ms"] * 1e-3) / 1e12, UNITS[show], what
    if show in ("speedup", "pct"):
        other = compared_row(opts, vs_rows)
        stable(other)
        comparable(row, other)
        ratio = other["time_ms"] / row["time_ms"]
        what += f", against {other['impl']} on {other['case']}: {other['time_ms']:.4g} ms"
        return (ratio if show == "speedup" else 100 * ratio), UNITS[show], what
    if show.startswith("field:"):
        name = show[len("field:"):]
        v = row.get(name)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ClaimError(f"row {row['impl']!r} of {row['case']!r} has no numeric field {name!r}")
        return float(v), opts.get("unit", ""), what
    raise ClaimError(f"show={show!r}: use time, gbps, tflops, speedup, pct or field:NAME")


def fmt(value: float, show: str) -> str:
    if show == "pct":  # one decimal near 100%: 99.6% must not read as 100%
        return f"{value:.1f}" if value < 10 or 95 <= value <= 105 else f"{value:.0f}"
    if show == "speedup":  # the same quantity as a ratio: 0.996 must not read as 1.00
        return f"{value:.3f}" if 0.95 <= value <= 1.05 else f"{value:.2f}" if value < 10 else f"{value:.1f}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if show.startswith("field:"):  # a recorded quantity as printed: 98.97 must not round to 99
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"
    return f"{value:.3g}"


def _bounds(opts: dict) -> tuple[float | None, float | None, float | None, float | None]:
    def num(key):
        if key not in opts:
            return None
        try:
            return float(opts[key])
        except ValueError:
            raise ClaimError(f"{key}={opts[key]!r} is not a number") from None
    return num("min"), num("max"), num("goal_min"), num("goal_max")


def _may_hold(missing, rec: dict, opts: dict) -> bool:
    """Whether an awaiting run may hold a row the claim reads: the cases it printed when it last passed,
    or else the case patterns its declaration names ("cases" in records/awaiting-gpu.json), match the
    claim's case or vs case; with neither, nobody knows, so it may."""
    rows = record.earlier_rows(missing.run, rec)
    printed = [str(b.get("case")) for b in rows] if rows is not None else missing.cases
    if not printed:
        return True
    cases = {opts["case"], opts.get("vs_case", opts["case"])}
    # Either side may be a pattern: a claim's "step, batch *", a declaration's "time to 99%*".
    return any(fnmatch.fnmatchcase(p, c) or fnmatch.fnmatchcase(c, p) for p in printed for c in cases)


def render(path: str, opts_text: str, rec: dict, awaiting: dict | None = None) -> str:
    """The HTML of one claim; raises ClaimError when it is malformed or unsupported, AwaitingGpuRun
    when its program is declared as awaiting a GPU run."""
    opts = parse_options(opts_text)
    lo, hi, goal_lo, goal_hi = _bounds(opts)
    skipped: list = []  # bench runs declared as awaiting: the claim awaits them only if its rows are theirs
    rows, runs = program_rows(path, rec, awaiting, skipped)
    vs_rows = None
    if "vs_program" in opts:
        vs_rows, vs_runs = program_rows(opts["vs_program"], rec, awaiting, skipped)
        runs = list(dict.fromkeys(runs + vs_runs))
    awaited = [e for e in skipped if _may_hold(e, rec, opts)]
    if awaited:  # the claim may rest on a row the awaiting run would give (the fastest of a glob, say)
        raise AwaitingGpuRun("; ".join(f"{e.run.id}: {e.awaiting}" for e in awaited))
    value, unit, what = value_of(opts, rows, vs_rows)
    shown = fmt(value, opts["show"]) + unit
    if lo is not None and not value >= lo:
        raise ClaimError(f"the record gives {shown} ({what}), below the stated minimum {opts['min']}")
    if hi is not None and not value <= hi:
        raise ClaimError(f"the record gives {shown} ({what}), above the stated maximum {opts['max']}")
    goal = ""
    if goal_lo is not None or goal_hi is not None:
        spread = figure_spread(opts, rows, vs_rows)
        status = goal_status(value, goal_lo, goal_hi, spread)
        target = f"≥ {opts['goal_min']}" if goal_lo is not None else f"≤ {opts['goal_max']}"
        why = (f' title="within the rows\' measured spread ({100 * spread:.1f}%) of the goal: neither met nor missed"'
               if status == "parity" else "")
        goal = (f' <span class="course-goal course-goal-{status}"{why}>(goal {target}{unit.strip() and unit}: '
                f'{status})</span>')
    title = f"{what}. Measured on {' ; '.join(runs)}; from records/gpu-record.json ({path})."
    # tabindex: a tap (or Tab) focuses the figure and reader.css shows where it comes from, as hovering does
    return (f'<span class="course-claim" tabindex="0" title="{html.escape(title)}" '
            f'data-provenance="{html.escape(title)}">{html.escape(shown)}</span>'
            f'{goal}')


def goal_outcome(path: str, opts_text: str, rec: dict, awaiting: dict | None = None) -> dict | None:
    """A claim's stated goal, met or missed, as a sentence a results headline lists (course/headline.py:
    goals_paragraph): {"text", "met"}; None for a claim with no goal or one the record cannot answer
    (the claim itself reports that where it stands)."""
    try:
        opts = parse_options(opts_text)
        _, _, goal_lo, goal_hi = _bounds(opts)
        if goal_lo is None and goal_hi is None:
            return None
        rows, _ = program_rows(path, rec, awaiting)
        vs_rows = program_rows(opts["vs_program"], rec, awaiting)[0] if "vs_program" in opts else rows
        value, unit, _ = value_of(opts, rows, vs_rows)
    except (ClaimError, AwaitingGpuRun):
        return None
    row = pick(rows, opts["case"], opts["impl"])
    show = opts["show"]
    shown = fmt(value, show) + unit
    if show in ("speedup", "pct"):
        other = compared_row(opts, vs_rows)
        what = f"{shown} the speed of {other['impl']}" if show == "speedup" else f"{shown} of the speed of {other['impl']}"
    elif show.startswith("field:"):
        name = show[len("field:"):]
        what = f"{metrics.METRICS[name].words if name in metrics.METRICS else name} {shown}"
    else:
        what = shown
    status = goal_status(value, goal_lo, goal_hi, figure_spread(opts, rows, vs_rows))
    target = f"≥ {opts['goal_min']}" if goal_lo is not None else f"≤ {opts['goal_max']}"
    return {"text": f"{row['impl']} at {row['case']}: {what} (goal {target}{unit.strip() and unit})",
            "met": status == "met", "status": status}


def render_one(d: directives.Directive, rec: dict, page: str, warn, awaiting: dict | None = None) -> str:
    """The HTML of one claim directive (course/directives.py); an unsupported claim is reported
    through warn(message) with the page and the line."""
    try:
        return render(d.args["path"], d.args["opts"], rec, awaiting)
    except AwaitingGpuRun as e:
        return (f'<span class="course-claim course-claim-awaiting" title="{html.escape(str(e))}">'
                f'[not measured yet: awaiting a GPU run]</span>')
    except ClaimError as e:
        warn(f"{page}:{d.line}: claim not supported: {e}")
        return (f'<span class="course-claim course-claim-broken" title="{html.escape(str(e))}">'
                f'[claim not supported by the GPU record]</span>')


def render_all(markdown: str, rec: dict, page: str, warn, awaiting: dict | None = None) -> str:
    """Replace every claim in a page (a claim shown as an example inside a code fence is text, not a
    claim); each unsupported one is reported through warn(message)."""
    return directives.render(markdown, {"claim:": lambda d: render_one(d, rec, page, warn, awaiting)})


def find(text: str) -> list[directives.Directive]:
    """The claims of a text: their args are `path` and `opts`."""
    return directives.find(text, {"claim:"})
