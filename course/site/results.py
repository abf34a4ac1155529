"""Generated sections: `<!-- course:results ... -->` (a headline per case, a plot, the full table of a
program's recorded benchmark rows), `<!-- course:output ... -->` (what a program printed in its
recorded run) and `<!-- course:record-summary -->` (which GPUs the record's items passed on)."""

from __future__ import annotations

import fnmatch
import html
import logging
import re

from course import claims, headline, programs, record
from course.site.plots import auto_plot
from course.site.rows import bench_rows, missing, rows_of_first_program
from course.svg import number as _fmt

log = logging.getLogger("mkdocs.plugins.course")

FOLD_ROWS = 12  # a full table longer than this is folded even with no headline above it
_RESULTS_OPTS = {"ours", "peer", "reference", "cases", "datasheet", "plot"}


def _parse_results(spec: str) -> tuple[str, dict]:
    """`kernels/a.cu [kernels/b.py] [ours="v*"] [peer="cuBLAS*"] [reference="cudaMemcpy*"|none] [cases="glob"]
    [datasheet=off] [plot=off]` (see headline.py for what each does)."""
    opts = {m[1]: m[2] if m[2] is not None else m[3] for m in re.finditer(r'(\w+)=(?:"([^"]*)"|(\S+))', spec)}
    unknown = set(opts) - _RESULTS_OPTS
    if unknown:
        raise ValueError(f"course:results: unknown option(s) {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(_RESULTS_OPTS))})")
    paths = re.sub(r'(\w+)=(?:"[^"]*"|\S+)', "", spec).split()
    return " ".join(paths), opts


def results_table(spec: str, rec: dict, page_plots: frozenset = frozenset(), page_goals: tuple = (),
                  awaiting: dict | None = None) -> str:
    """The generated results of one or more programs: the goals the page states about them (page_goals:
    its claims' (path, options) pairs), a headline per case (best version against best peer, the ratio,
    the share of the reference), a plot, then the full table, folded."""
    rel_path, opts = _parse_results(spec)
    found = bench_rows(rel_path, rec, "results")
    if found is None:
        return missing(rel_path, "figures")
    rows, runs, benches = found
    own = rows_of_first_program(rel_path, rows, rec)  # its versions
    if "cases" in opts:
        rows = [b for b in rows if fnmatch.fnmatchcase(b["case"], opts["cases"])]
    gpu = runs[0].split(" · ")[0] if runs else ""
    for problem in headline.comparison_problems(rows, own, opts):
        log.warning(f"course:results {rel_path}: {problem}")
    date = re.search(r"\d{4}-\d{2}-\d{2}", runs[0]) if runs else None
    goals = [g for path, text in page_goals if path in rel_path.split()
             for g in [claims.goal_outcome(path, text, rec, awaiting)] if g]
    goals = [g for i, g in enumerate(goals) if g not in goals[:i]]  # two claims of one goal: one line
    top, metric = headline.headline(rows, own, gpu, opts, date[0] if date else "", goals)
    where = " ; ".join(runs)
    parts = []
    if top:
        parts.append(top + f"\n*Measured on {where}. The result is the peer's time over the version's time (above "
                     "1×: the version is faster). Datasheet ceilings are the GPU maker's dense peak rates and "
                     "bandwidth, not measurements.*\n")
    if opts.get("plot", "on") != "off" and rel_path.split()[0] not in page_plots and metric:
        svg = auto_plot(rel_path, rows, own, opts, metric, runs)
        if svg:
            parts.append(svg)
    # Folded under a headline, and wherever it is long: a page's prose must not wait behind 90 rows.
    parts.append(_full_table(rows, runs, benches, folded=bool(top) or len(rows) > FOLD_ROWS))
    return "\n".join(parts)


def _full_table(rows: list[dict], runs: list[str], benches, folded: bool) -> str:
    peers = {b["case"]: b for b in rows if b.get("peer")}
    has_flops = any(b.get("flops") for b in rows)
    # At most seven columns: Material gives every header cell 5rem, so an eighth makes the table wider
    # than the column at 1280 px and it scrolls. The processes' medians follow the time, in brackets.
    head = ("| Case | Implementation | Time, ms (each process's median) | Bytes moved (MB) | GB/s |"
            + (" TFLOP/s |" if has_flops else "") + " % of peer |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for b in rows:
        t = b["time_ms"]
        gbs = b["bytes"] / (t * 1e-3) / 1e9 if b.get("bytes") else 0.0
        peer = peers.get(b["case"])
        pct = "peer" if b.get("peer") else (f"{100 * peer['time_ms'] / t:.0f}%" if peer else "")
        medians = ", ".join(_fmt(m, 4) for m in b.get("medians", []))
        if b.get("unstable"):
            medians += f"; unstable: {b['unstable']}"
        time = f"{_fmt(t)} ({medians})" if medians else _fmt(t)
        cells = [b["case"], b["impl"], time, _fmt(b.get("bytes", 0) / 1e6), _fmt(gbs) if gbs else ""]
        if has_flops:
            cells.append(_fmt(b["flops"] / (t * 1e-3) / 1e12) if b.get("flops") else "")
        lines.append("| " + " | ".join(cells + [pct]) + " |")
    where = " ; ".join(runs)
    caption = (f"\n*Measured on {where}. Each program ran in two processes (a third where they disagreed), and each "
               f"process took the median of its timed repeats after warm-up (the program's source shows how many, and "
               f"whether caches are flushed between them); the time is the median of those medians, which follow it in brackets. "
               f"Generated from `records/gpu-record.json` (runs of {', '.join(f'`{b.id}`' for b in benches)}); "
               f"% of peer is the peer's time over this row's time.*\n")
    text = "\n".join(lines) + "\n" + caption
    if not folded:
        return text
    return '??? note "Every row measured"\n\n' + "\n".join("    " + ln if ln else ln for ln in text.splitlines()) + "\n"


def recorded_output(rel_path: str, args: str | None, rec: dict) -> str:
    prog = programs.program_for(rel_path)
    if prog is None:
        raise ValueError(f"course:output names {rel_path!r}, which is not a program under kernels/")
    wanted = tuple(args.split()) if args is not None else None
    runs = [r for r in prog.runs() if (r.args == wanted if wanted is not None else not r.bench)]
    if not runs:
        raise ValueError(f"course:output {rel_path}: no run with arguments {args!r}")
    e = record.passing_entry(runs[0], rec)
    if not e or not e.get("stdout"):
        return missing(rel_path, "output")
    where = record.describe_entry(rec, e)
    command = " ".join([rel_path, *runs[0].args])
    fence = "````" if "```" in e["stdout"] else "```"
    return (f"{fence}text\n{e['stdout'].rstrip()}\n{fence}\n\n*Output of `{command}` recorded on {where} "
            f"(from `records/gpu-record.json`).*\n")


def record_summary(rec: dict, awaiting: dict) -> str:
    """`<!-- course:record-summary -->`: which GPUs and versions the record's items passed on."""
    by_run: dict[str, dict] = {}
    for e in rec["items"].values():
        text = record.describe_entry(rec, e)
        row = by_run.setdefault(text, {"passed": 0, "other": 0})
        row["passed" if e["outcome"] == "passed" else "other"] += 1
    lines = ["| GPU · versions · date | Items passed | Items skipped, failed or flagged |", "|---|---:|---:|"]
    lines += [f"| {html.escape(t)} | {r['passed']} | {r['other']} |" for t, r in sorted(by_run.items())]
    if not by_run:
        lines = ["The GPU record is empty: no example has been verified on a GPU yet."]
    text = "\n".join(lines) + "\n"
    if awaiting:
        reasons = sorted({e["reason"] for e in awaiting.values()})
        text += (f"\n{len(awaiting)} GPU item(s) await a GPU run for their current code; their pages say so. "
                 f"Reasons: {html.escape('; '.join(reasons))}.\n")
    return text + "\n*Generated from `records/gpu-record.json` when the site was built.*\n"
