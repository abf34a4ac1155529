"""Charts of recorded rows: `<!-- course:plot kernels/a.cu x=size y=gbps [series=impl] [logx] [logy] -->`
(a line chart; y: gbps, tflops, time_ms, pct_peer or any numeric field), and the plot under a results
headline (a line chart where the cases differ in size, else one bar chart per case). This module picks
the rows and the series; course/svg.py draws them."""

from __future__ import annotations

import html
import logging
import re

from course import headline, svg
from course.site.rows import bench_rows, derived, missing

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


_LABELS = {"gbps": "GB/s", "tflops": "TFLOP/s", "time_ms": "time (ms)", "pct_peer": "% of peer",
           "size_bytes": "message size (bytes)", "algbw_gbps": "algorithm bandwidth (GB/s)",
           "busbw_gbps": "bus bandwidth (GB/s)", **{f"busbw_gbps_{n}gpus": f"bus bandwidth on {n} GPUs (GB/s)"
                                                   for n in (2, 4, 8)}}


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
    ylabel, xlabel = _LABELS.get(ykey, ykey), _LABELS.get(xkey, xkey)
    title = f"{ylabel} against {xlabel} for {rel_path}"
    ranked = _ranked(series, style, lower_is_better=ykey == "time_ms")
    caption = (f"{_takeaway(series, style, ranked, xlabel, ylabel)}{html.escape(title)}. Measured on "
               f"{html.escape(' ; '.join(runs))}; generated from <code>records/gpu-record.json</code>.")
    return svg.line_chart(series, style, xlabel, ylabel, "logx" in flags, "logy" in flags, title, caption,
                          highlight=_highlighted(ranked, style))


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


def _takeaway(series, style, ranked: list[str], xlabel: str, ylabel: str) -> str:
    """The caption's first sentence: at the largest x, the best version and the best peer."""
    xmax = max(x for pts in series.values() for x, _ in pts)
    def at(name):
        ys = [y for x, y in series[name] if x == xmax]
        return ys[0] if ys else None
    best = {role: next((n for n in ranked if style.get(n, "ours") == role and at(n) is not None), None)
            for role in ("ours", "peer")}
    if not best["ours"]:
        return ""
    unit = html.escape({"time (ms)": "ms"}.get(ylabel, ylabel))
    text = f"At {html.escape(xlabel)} {svg.number(xmax)}, the best version, {html.escape(best['ours'])}, gives " \
           f"{svg.number(at(best['ours']))} {unit}"
    if best["peer"]:
        text += f"; the best peer, {html.escape(best['peer'])}, {svg.number(at(best['peer']))} {unit}"
    return text + ". "


def bars_svg(rel_path: str, by_case: dict, metric: str, runs: list[str]) -> str:
    """One horizontal bar chart per case: every version, peer and reference, longest bar = best (for time,
    shortest). Each case has its own scale: cases measure different things."""
    label = _LABELS[metric]
    groups = {case: [(b["impl"], role, derived(b, metric, {}) or 0.0)
                     for role in ("ours", "peer", "reference") for b in r[role]]
              for case, r in by_case.items()}
    title = f"{label} of every implementation, per case, for {rel_path}" + (" (shorter is faster)" if metric == "time_ms" else "")
    caption = (f"{html.escape(title)}. Versions in green, peers in orange, references in grey. Measured on "
               f"{html.escape(' ; '.join(runs))}; generated from <code>records/gpu-record.json</code>.")
    return svg.bar_chart(groups, label, title, caption)
