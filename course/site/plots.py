"""Charts of recorded rows: `<!-- course:plot kernels/a.cu x=size y=gbps [series=impl] [logx] [logy] -->`
(a line chart; y: gbps, tflops, time_ms, pct_peer or any numeric field), and the plot under a results
headline (a line chart where the cases differ in size, else one bar chart per case). This module picks
the rows and the series; course/svg.py draws them."""

from __future__ import annotations

import html
import logging
import re

from course import headline, metrics, svg
from course.site.rows import bench_rows, derived, missing, rows_of_first_program

log = logging.getLogger("mkdocs.plugins.course")

_SIZE_FIELDS = ("size", "n", "seq", "batch", "cols", "taps", "stride", "size_bytes")


def auto_plot(rel_path: str, rows: list[dict], own: set[int], opts: dict, metric: str, runs: list[str]) -> str | None:
    """The plot under a headline: the metric against a size field where the cases differ in size (one
    line per implementation), otherwise one bar chart per case. Peers are dashed, references dotted."""
    by_case = headline.roles(rows, own, opts)
    shown = [b for r in by_case.values() for role in ("ours", "peer", "reference") for b in r[role]]
    kind = {id(b): role for r in by_case.values() for role in ("ours", "peer", "reference") for b in r[role]}
    if metric != "time_ms" and not all(b.get("flops" if metric == "tflops" else "bytes") for b in shown):
        metric = "time_ms"
    size = next((f for f in _SIZE_FIELDS if all(isinstance(b.get(f), (int, float)) for b in shown)
                 and len({b[f] for b in shown}) > 1 and len({b[f] for b in shown}) == len(by_case)), None)
    if size:
        xs = [b[size] for b in shown]
        logx = " logx" if min(xs) > 0 and max(xs) / min(xs) > 8 else ""
        return plot_svg(rel_path, f" x={size} y={metric}{logx}", {}, rows=(shown, runs), roles=kind)
    if len(by_case) > 6:
        return None
    return bars_svg(rel_path, by_case, metric, runs)


def plot_svg(rel_path: str, opts: str, rec: dict, rows: tuple | None = None, roles: dict | None = None) -> str:
    """An inline SVG line chart of a program's recorded benchmark rows: one line per series. Given
    `roles` (row id -> "ours", "peer" or "reference"), peers are drawn dashed and references dotted."""
    options = dict(re.findall(r"(\w+)=(\S+)", opts))
    flags = set(re.findall(r"(?<![=\w])(logx|logy)(?![=\w])", opts))
    xkey, ykey, skey = options.get("x"), options.get("y", "gbps"), options.get("series", "impl")
    if not xkey:
        raise ValueError(f"course:plot {rel_path}: needs x=<numeric BENCH field>")
    found = (*rows, None) if rows else bench_rows(rel_path, rec, "plot")
    if found is None:
        return missing(rel_path, "figures to plot")
    rows, runs, _ = found
    for case in dict.fromkeys(b["case"] for b in rows):
        places = {b.get("_where") for b in rows if b["case"] == case}
        if len(places) > 1:
            log.warning(f"course:plot {rel_path}: case {case!r} draws rows of {len(places)} runs side by side; "
                        f"a plot compares rows of one sitting on one GPU")
    if roles is None:  # as a results section reads them: a second program's rows and marked rows are peers
        first = rows_of_first_program(rel_path, rows, rec)
        roles = {id(b): role for r in headline.roles(rows, first, {}).values() for role, bs in r.items() for b in bs}
    peers = {b["case"]: b for b in rows if b.get("peer")}
    series: dict[str, list[tuple[float, float]]] = {}
    style: dict[str, str] = {}
    for b in rows:
        x, y = derived(b, xkey, peers), derived(b, ykey, peers)
        if x is not None and y is not None:
            name = str(b.get(skey, ""))
            series.setdefault(name, []).append((x, y))
            style[name] = (roles or {}).get(id(b), "ours")
    if not series:
        raise ValueError(f"course:plot {rel_path}: no BENCH row has both {xkey} and {ykey}")
    x, y = metrics.metric(xkey), metrics.metric(ykey)
    if not y.better:
        raise ValueError(f"course:plot {rel_path}: y={ykey} is a size ({y.words}), not a result: no line can be "
                         f"called best (course/metrics.py)")
    ylabel = y.axis() + f" · {y.direction()}"
    title = f"{y.words} against {x.words}: {' and '.join(rel_path.split())}"
    ranked = _ranked(series, style, lower_is_better=y.better == "lower")
    caption = (f"{_takeaway(series, style, ranked, x, y)}{html.escape(_upper_first(y.axis()))} against "
               f"{html.escape(x.axis())}, {html.escape(y.direction())}: {html.escape(' and '.join(rel_path.split()))}. "
               f"{_role_key(set(style.values()))}Measured on {html.escape(' ; '.join(runs))}; generated from "
               f"<code>records/gpu-record.json</code>.")
    return svg.line_chart(series, style, x.axis(), ylabel, "logx" in flags, "logy" in flags, title, caption,
                          highlight=_highlighted(ranked, style), binary=(x.unit == "bytes", y.unit == "bytes"),
                          fmt_x=lambda v: _with_unit(x, v), fmt_y=y.value)


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _with_unit(m: metrics.Metric, v: float) -> str:
    return m.value(v) if m.unit else svg.number(v)


def _role_key(roles: set[str]) -> str:
    """How the chart tells the roles apart, for the roles it draws only."""
    if roles <= {"ours"}:
        return ""
    parts = [{"ours": "versions solid", "peer": "peers dashed", "reference": "references dotted"}[r]
             for r in ("ours", "peer", "reference") if r in roles]
    return "Lines: " + ", ".join(parts) + ". "


def _ranked(series: dict[str, list[tuple[float, float]]], style: dict[str, str], lower_is_better: bool) -> list[str]:
    """Series names, best first, by their value at the largest x they share with the most others."""
    xmax = max(x for pts in series.values() for x, _ in pts)
    def score(name):
        at = [y for x, y in series[name] if x == xmax] or [y for _, y in sorted(series[name])[-1:]]
        return (min(at) if lower_is_better else -max(at)) if at else float("inf")
    return sorted(series, key=lambda n: (n not in [m for m in series if any(x == xmax for x, _ in series[m])], score(n)))


def _highlighted(ranked: list[str], style: dict[str, str]) -> set[str]:
    """At most svg.HIGHLIGHTED series in colour: the best three versions, the best two peers, the
    reference, then the next best of any role."""
    quota = {"ours": 3, "peer": 2, "reference": 1}
    chosen = []
    for name in ranked:
        if quota.get(style.get(name, "ours"), 0) > 0:
            quota[style.get(name, "ours")] -= 1
            chosen.append(name)
    chosen += [n for n in ranked if n not in chosen]
    return set(chosen[:svg.HIGHLIGHTED])


def _takeaway(series, style, ranked: list[str], x: metrics.Metric, y: metrics.Metric) -> str:
    """The caption's first sentence: at the largest x, the best version and the best peer, best as the
    metric says (course/metrics.py: the least time, the most bandwidth)."""
    xmax = max(px for pts in series.values() for px, _ in pts)
    def at(name):
        ys = [py for px, py in series[name] if px == xmax]
        return ys[0] if ys else None
    best = {role: next((n for n in ranked if style.get(n, "ours") == role and at(n) is not None), None)
            for role in ("ours", "peer")}
    named = [f"{y.best.format(role=role)} is {html.escape(best[key])}, at {html.escape(y.value(at(best[key])))}"
             for key, role in (("ours", "version"), ("peer", "peer")) if best[key]]
    if not named:
        return ""
    return f"At {html.escape(x.words)} {html.escape(_with_unit(x, xmax))}, " + "; ".join(named) + ". "


def bars_svg(rel_path: str, by_case: dict, metric: str, runs: list[str]) -> str:
    """One horizontal bar chart per case: every version, peer and reference, each bar as long as its
    value. Each case has its own scale: cases measure different things. The best version of each case
    (by the metric's direction, course/metrics.py) is named bold."""
    m = metrics.metric(metric)
    groups = {case: [(b["impl"], role, derived(b, metric, {}) or 0.0)
                     for role in ("ours", "peer", "reference") for b in r[role]]
              for case, r in by_case.items()}
    pick = min if m.better == "lower" else max
    best = {case: pick(((v, n) for n, role, v in bars if role == "ours" and v), default=(0, None))[1]
            for case, bars in groups.items()}
    title = f"{m.words} of every implementation, per case: {' and '.join(rel_path.split())}"
    roles = {role for bars in groups.values() for _, role, _ in bars}
    key = ", ".join({"ours": "versions in green", "peer": "peers in orange, outlined",
                     "reference": "references in grey, outlined"}[r] for r in ("ours", "peer", "reference") if r in roles)
    caption = (f"{html.escape(_upper_first(m.axis()))} of every implementation, per case, {html.escape(m.direction())} "
               f"(each case on its own scale; the best version in bold): {html.escape(' and '.join(rel_path.split()))}. "
               f"{_upper_first(key)}. Measured on {html.escape(' ; '.join(runs))}; generated from "
               f"<code>records/gpu-record.json</code>.")
    return svg.bar_chart(groups, title, caption, best=best, fmt=m.value)
