"""MkDocs hooks: verification badges, generated results tables and visible run markers.

- Each page that has GPU items (GPU blocks, or runs of GPU programs it embeds) gets a badge under
  its title: where its examples last passed ("Verified on NVIDIA H100 80GB HBM3 · CUDA 13.0 · ..."),
  or, in a warning colour, that some have not been verified on a GPU for their current code.
- `<!-- course:results kernels/path/file.cu -->` becomes a table of that program's benchmark
  figures from the GPU record, with the GPU and versions they were measured with.
- `<!-- course:plot kernels/path/file.cu x=size y=gbps [series=impl] [logx] [logy] -->` becomes an
  inline SVG chart of the same figures (y: gbps, tflops, time_ms, pct_peer or any numeric field).
- `<!-- course:output kernels/path/file.py [args="--flag"] -->` shows what that program printed in
  its recorded GPU run (the end of it), with the GPU and versions.
- `<!-- claim: kernels/path/file.cu case="..." impl="..." show=pct [vs="..."] [min=90] -->`, inline in
  prose or a table cell, renders one figure read from the record (a time, a bandwidth, a speed-up, a
  share of a peer's speed, any numeric BENCH field) and checks the bound the sentence states: a record
  that breaks it, or lacks the row, is a warning, so `mkdocs build --strict` fails (see claims.py).
- `<!--pytest.mark.skip(reason="...")-->` before a block becomes a visible "Not run by the tests"
  note with the reason; `<!--pytest.mark.gpu-->` a small "runs on a GPU" note.
"""

from __future__ import annotations

import fnmatch
import html
import logging
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course import claims, headline, prereqs, programs, record  # noqa: E402

log = logging.getLogger("mkdocs.plugins.course")

_RESULTS = re.compile(r"^(?P<indent>[ \t]*)<!--\s*course:results\s+(?P<path>[^>]*?)\s*-->\s*$", re.MULTILINE)
_SKIP = re.compile(r"""^(?P<indent>[ \t]*)<!--\s*pytest\.mark\.skip\(reason=(?P<q>["'])(?P<reason>.+?)(?P=q)\)\s*-->\s*$""", re.MULTILINE)
_GPU = re.compile(r"^(?P<indent>[ \t]*)<!--\s*pytest\.mark\.gpu\s*-->\s*$", re.MULTILINE)
_TITLE = re.compile(r"^# .+$", re.MULTILINE)
_PLOT = re.compile(r"^(?P<indent>[ \t]*)<!--\s*course:plot\s+(?P<path>\S+(?:\s+kernels/\S+)*)(?P<opts>[^>]*?)\s*-->\s*$", re.MULTILINE)
_RECORD_SUMMARY = re.compile(r"^<!--\s*course:record-summary\s*-->\s*$", re.MULTILINE)
_OUTPUT = re.compile(r"^(?P<indent>[ \t]*)<!--\s*course:output\s+(?P<path>\S+)(?:\s+args=\"(?P<args>[^\"]*)\")?\s*-->\s*$", re.MULTILINE)

_record: dict = {}
_awaiting: dict = {}


def on_config(config, **kwargs):
    global _record, _awaiting
    _record = record.load()
    _awaiting = record.load_awaiting()
    return config


def cpu_example_count(page: Path) -> int:
    """Blocks the suite runs on every machine, plus runs of the CPU programs the page embeds."""
    blocks = [b for b in record.page_blocks(page)
              if not any(record.is_gpu_mark(m) or m.replace(" ", "").startswith("pytest.mark.skip") for m in b.marks)]
    runs = 0
    for path in record.embedded_files(page.read_text()):
        prog = programs.program_for(path)
        if prog and not prog.gpu:
            runs += len(prog.runs())
    return len(blocks) + runs


def badge_html(items: list[record.GpuItem], rec: dict, cpu_examples: int = 0, awaiting: dict | None = None) -> str:
    if not items:
        if cpu_examples:
            return (f'<div class="course-badge course-cpu" role="note"><strong>Checked on the CPU</strong> by the '
                    f'test suite on every change ({cpu_examples} example{"s" if cpu_examples > 1 else ""}); '
                    f'nothing on this page needs a GPU.</div>')
        return ""
    entries = [record.entry(rec, i.hash) for i in items]
    verified = [e for e in entries if e and e["outcome"] == "passed"]
    if len(verified) == len(items):
        runs = []
        for e in verified:
            text = record.describe_run(record.run_info(rec, e))
            if text not in runs:
                runs.append(text)
        oldest = sorted(runs, key=lambda t: t.rsplit(" · ", 1)[-1])
        detail = f"{len(items)} GPU example{'s' if len(items) > 1 else ''} passed"
        return (f'<div class="course-badge course-verified" role="note">'
                f'<strong>Verified on</strong> {html.escape(" ; ".join(oldest))} '
                f'<span class="course-badge-detail">({detail})</span></div>')
    missing = len(items) - len(verified)
    reasons = sorted({(awaiting or {})[i.hash]["reason"] for i in items if i.hash in (awaiting or {})})
    why = f' Awaiting a GPU run: {html.escape("; ".join(reasons))}.' if reasons else ""
    return (f'<div class="course-badge course-unverified" role="note">'
            f'<strong>Not verified on a GPU yet:</strong> {missing} of {len(items)} GPU examples on this page '
            f'have no passing GPU record for their current code.{why}</div>')


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if x < 1000 else f"{x:,.0f}"


def _missing(rel_path: str, what: str) -> str:
    return (f'!!! warning "No GPU {what} for the current version of `{rel_path}`"\n'
            f"    The GPU record has no passing run of this program's current code. "
            f"Refresh it on a GPU with `{record.REFRESH_STALE}` (see Contributing).\n")


def _bench_rows(rel_paths: str, rec: dict, directive: str):
    """(rows, run descriptions, bench runs) of the passing benchmark runs of one or more programs
    (space-separated paths: a peer measured by another program in the same run joins by `case`), or
    None if any benchmark run of their current code has no passing entry."""
    rows, runs, benches = [], [], []
    for rel_path in rel_paths.split():
        prog = programs.program_for(rel_path)
        if prog is None:
            raise ValueError(f"course:{directive} names {rel_path!r}, which is not a program under kernels/")
        mine = [r for r in prog.runs() if r.bench]
        if not mine:
            raise ValueError(f"course:{directive}: {rel_path} declares no 'course: bench' run")
        try:
            found, described = claims.program_rows(rel_path, rec)  # the same rows a claim reads
        except claims.ClaimError:
            return None
        rows += found
        runs += described
        benches += mine
    return rows, list(dict.fromkeys(runs)), benches


def _derived(b: dict, key: str, peers: dict) -> float | None:
    t = b.get("time_ms")
    if key == "gbps":
        return b["bytes"] / (t * 1e-3) / 1e9 if b.get("bytes") and t else None
    if key == "tflops":
        return b["flops"] / (t * 1e-3) / 1e12 if b.get("flops") and t else None
    if key == "pct_peer":
        peer = peers.get(b["case"])
        return 100 * peer["time_ms"] / t if peer and t else None
    v = b.get(key)
    return float(v) if isinstance(v, (int, float)) else None


_RESULTS_OPTS = {"ours", "peer", "ceiling", "cases", "datasheet", "plot"}


def _parse_results(spec: str) -> tuple[str, dict]:
    """`kernels/a.cu [kernels/b.py] [ours="v*"] [peer="cuBLAS*"] [ceiling="cudaMemcpy*"|none] [cases="glob"]
    [datasheet=off] [plot=off]` (see headline.py for what each does)."""
    opts = {m[1]: m[2] if m[2] is not None else m[3] for m in re.finditer(r'(\w+)=(?:"([^"]*)"|(\S+))', spec)}
    unknown = set(opts) - _RESULTS_OPTS
    if unknown:
        raise ValueError(f"course:results: unknown option(s) {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(_RESULTS_OPTS))})")
    paths = re.sub(r'(\w+)=(?:"[^"]*"|\S+)', "", spec).split()
    return " ".join(paths), opts


def results_table(spec: str, rec: dict, page_plots: frozenset = frozenset()) -> str:
    """The generated results of one or more programs: a headline per case (best version against best
    peer, the ratio, the share of the ceiling), a plot, then the full table folded."""
    rel_path, opts = _parse_results(spec)
    found = _bench_rows(rel_path, rec, "results")
    if found is None:
        return _missing(rel_path, "figures")
    rows, runs, benches = found
    if "cases" in opts:
        rows = [b for b in rows if fnmatch.fnmatchcase(b["case"], opts["cases"])]
    first, _ = claims.program_rows(rel_path.split()[0], rec)
    own = {id(b) for b in rows if any(b is f for f in first)}
    gpu = runs[0].split(" · ")[0] if runs else ""
    for problem in headline.comparison_problems(rows, own, opts):
        log.warning(f"course:results {rel_path}: {problem}")
    top, metric = headline.headline(rows, own, gpu, opts)
    where = " ; ".join(runs)
    parts = []
    if top:
        parts.append(f"**Headline** (the fastest version and the fastest peer of each case, measured on {where}):\n\n"
                     + top + "\n*Speed vs peer is the peer's time over the version's time (above 1: the version is "
                     "faster). Datasheet ceilings are the GPU maker's dense peak rates and bandwidth, not measurements.*\n")
    if opts.get("plot", "on") != "off" and rel_path.split()[0] not in page_plots and metric:
        svg = auto_plot(rel_path, rows, own, opts, metric, runs)
        if svg:
            parts.append(svg)
    parts.append(_full_table(rows, runs, benches, folded=bool(top)))
    return "\n".join(parts)


def _full_table(rows: list[dict], runs: list[str], benches, folded: bool) -> str:
    peers = {b["case"]: b for b in rows if b.get("peer")}
    has_flops = any(b.get("flops") for b in rows)
    head = ("| Case | Implementation | Time (ms) | Medians of the timing processes (ms) | Bytes moved (MB) | GB/s |"
            + (" TFLOP/s |" if has_flops else "") + " % of peer |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for b in rows:
        t = b["time_ms"]
        gbs = b["bytes"] / (t * 1e-3) / 1e9 if b.get("bytes") else 0.0
        peer = peers.get(b["case"])
        pct = "peer" if b.get("peer") else (f"{100 * peer['time_ms'] / t:.0f}%" if peer else "")
        medians = ", ".join(_fmt(m, 4) for m in b.get("medians", []))
        if b.get("unstable"):
            medians += f" (unstable: {b['unstable']})"
        cells = [b["case"], b["impl"], _fmt(t), medians, _fmt(b.get("bytes", 0) / 1e6), _fmt(gbs) if gbs else ""]
        if has_flops:
            cells.append(_fmt(b["flops"] / (t * 1e-3) / 1e12) if b.get("flops") else "")
        lines.append("| " + " | ".join(cells + [pct]) + " |")
    where = " ; ".join(runs)
    caption = (f"\n*Measured on {where}. Each program ran in two processes (a third where they disagreed), and each "
               f"process took the median of its timed repeats after warm-up (the program's source shows how many, and "
               f"whether caches are flushed between them); Time is the median of those medians. "
               f"Generated from `records/gpu-record.json` (runs of {', '.join(f'`{b.id}`' for b in benches)}); "
               f"% of peer is the peer's time over this row's time.*\n")
    text = "\n".join(lines) + "\n" + caption
    if not folded:
        return text
    return '??? note "Every row measured"\n\n' + "\n".join("    " + ln if ln else ln for ln in text.splitlines()) + "\n"


_SIZE_FIELDS = ("size", "n", "seq", "batch", "cols", "taps", "stride", "size_bytes")


def auto_plot(rel_path: str, rows: list[dict], own: set[int], opts: dict, metric: str, runs: list[str]) -> str | None:
    """The plot under a headline: the metric against a size field where the cases differ in size (one
    line per implementation), otherwise one bar chart per case. Peers are dashed, ceilings dotted."""
    by_case = headline.roles(rows, own, opts)
    shown = [b for r in by_case.values() for role in ("ours", "peer", "ceiling") for b in r[role]]
    kind = {id(b): role for r in by_case.values() for role in ("ours", "peer", "ceiling") for b in r[role]}
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


_LABELS = {"gbps": "GB/s", "tflops": "TFLOP/s", "time_ms": "time (ms)", "pct_peer": "% of peer"}
_COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4",
            "#b2df8a", "#fb9a99", "#666666", "#cab2d6"]


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    import math

    if log:
        return [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    step = 10 ** math.floor(math.log10((hi - lo) or 1.0))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def plot_svg(rel_path: str, opts: str, rec: dict, rows: tuple | None = None, roles: dict | None = None) -> str:
    """An inline SVG line chart of a program's recorded benchmark rows: one line per series. Given
    `roles` (row id -> "ours", "peer" or "ceiling"), peers are drawn dashed and ceilings dotted."""
    import math

    options = dict(re.findall(r"(\w+)=(\S+)", opts))
    flags = set(re.findall(r"(?<![=\w])(logx|logy)(?![=\w])", opts))
    xkey, ykey, skey = options.get("x"), options.get("y", "gbps"), options.get("series", "impl")
    if not xkey:
        raise ValueError(f"course:plot {rel_path}: needs x=<numeric BENCH field>")
    found = (*rows, None) if rows else _bench_rows(rel_path, rec, "plot")
    if found is None:
        return _missing(rel_path, "figures to plot")
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
        x, y = _derived(b, xkey, peers), _derived(b, ykey, peers)
        if x is not None and y is not None:
            name = str(b.get(skey, ""))
            series.setdefault(name, []).append((x, y))
            style[name] = (roles or {}).get(id(b), "ours")
    if not series:
        raise ValueError(f"course:plot {rel_path}: no BENCH row has both {xkey} and {ykey}")
    logx, logy = "logx" in flags, "logy" in flags
    xs = [p[0] for pts in series.values() for p in pts]
    ys = [p[1] for pts in series.values() for p in pts]
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = (min(ys), max(ys)) if logy else (0.0, max(ys) * 1.05)
    if xlo == xhi:
        xlo, xhi = xlo * 0.9, xhi * 1.1 or 1.0
    W, H, L, R, T, B = 720, 380, 70, 20, 20, 50
    legend_h = 12 + 18 * len(series)  # the legend goes under the axes: whole names, however long
    fx = (lambda v: math.log10(v)) if logx else (lambda v: v)
    fy = (lambda v: math.log10(v)) if logy else (lambda v: v)
    def X(v): return L + (fx(v) - fx(xlo)) / ((fx(xhi) - fx(xlo)) or 1) * (W - L - R)
    def Y(v): return H - B - (fy(v) - fy(ylo)) / ((fy(yhi) - fy(ylo)) or 1) * (H - T - B)
    ylabel, xlabel = _LABELS.get(ykey, ykey), _LABELS.get(xkey, xkey)
    title = f"{ylabel} against {xlabel} for {rel_path}"
    out = [f'<figure class="course-plot"><svg viewBox="0 0 {W} {H + legend_h}" role="img" aria-labelledby="t-{abs(hash(title))}" '
           f'xmlns="http://www.w3.org/2000/svg" font-size="12" font-family="sans-serif">',
           f'<title id="t-{abs(hash(title))}">{html.escape(title)}</title>',
           f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="currentColor"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="currentColor"/>']
    for t in _ticks(xlo, xhi, logx):
        if xlo <= t <= xhi:
            out.append(f'<line x1="{X(t):.1f}" y1="{H-B}" x2="{X(t):.1f}" y2="{H-B+5}" stroke="currentColor"/>'
                       f'<text x="{X(t):.1f}" y="{H-B+18}" text-anchor="middle" fill="currentColor">{_fmt(t)}</text>')
    for t in _ticks(ylo if logy else 0.0, yhi, logy):
        if ylo <= t <= yhi:
            out.append(f'<line x1="{L-5}" y1="{Y(t):.1f}" x2="{W-R}" y2="{Y(t):.1f}" stroke="currentColor" stroke-opacity="0.15"/>'
                       f'<text x="{L-8}" y="{Y(t)+4:.1f}" text-anchor="end" fill="currentColor">{_fmt(t)}</text>')
    out.append(f'<text x="{(L+W-R)/2}" y="{H-10}" text-anchor="middle" fill="currentColor">{html.escape(xlabel)}</text>')
    out.append(f'<text transform="translate(16,{(T+H-B)/2}) rotate(-90)" text-anchor="middle" fill="currentColor">{html.escape(ylabel)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        pts.sort()
        path = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts)
        dash = {"peer": ' stroke-dasharray="7 4"', "ceiling": ' stroke-dasharray="2 3"'}.get(style[name], "")
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        out += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{colour}"><title>{html.escape(name)}: '
                f'{_fmt(y)} {html.escape(ylabel)} at {html.escape(xlabel)} {_fmt(x)}</title></circle>' for x, y in pts]
        ly = H + 14 + 18 * i
        tag = {"peer": " (peer)", "ceiling": " (ceiling)"}.get(style[name], "")
        out.append(f'<line x1="{L}" y1="{ly-4}" x2="{L+24}" y2="{ly-4}" stroke="{colour}" stroke-width="2"{dash}/>'
                   f'<text x="{L+30}" y="{ly}" fill="currentColor">{html.escape(name[:90] + tag)}'
                   f'<title>{html.escape(name)}</title></text>')
    out.append("</svg>")
    out.append(f"<figcaption>{html.escape(title)}. Measured on {html.escape(' ; '.join(runs))}; generated from "
               f"<code>records/gpu-record.json</code>.</figcaption></figure>")
    return "\n".join(out) + "\n"


def bars_svg(rel_path: str, by_case: dict, metric: str, runs: list[str]) -> str:
    """One horizontal bar chart per case: every version, peer and ceiling, longest bar = best (for time,
    shortest). Each case has its own scale: cases measure different things."""
    label = _LABELS[metric]
    W, L, R, bar, gap = 720, 300, 90, 16, 4
    out, y = [], 8
    colours = {"ours": "#1b9e77", "peer": "#d95f02", "ceiling": "#888888"}
    body = []
    for case, r in by_case.items():
        items = [(b, role) for role in ("ours", "peer", "ceiling") for b in r[role]]
        values = [(_derived(b, metric, {}) or 0.0) for b, _ in items]
        top = max(values) or 1.0
        body.append(f'<text x="4" y="{y + 12}" font-weight="bold" fill="currentColor">{html.escape(case)}</text>')
        y += 20
        for (b, role), v in zip(items, values):
            wdt = (W - L - R) * v / top
            tag = {"peer": " (peer)", "ceiling": " (ceiling)"}.get(role, "")
            name = b["impl"][:44 - len(tag)] + tag
            pattern = ' stroke="currentColor" stroke-dasharray="3 2"' if role != "ours" else ""
            body.append(f'<text x="{L - 6}" y="{y + 12}" text-anchor="end" fill="currentColor">{html.escape(name)}'
                        f'<title>{html.escape(b["impl"])}</title></text>'
                        f'<rect x="{L}" y="{y}" width="{wdt:.1f}" height="{bar}" fill="{colours[role]}"{pattern}>'
                        f'<title>{html.escape(b["impl"])}: {_fmt(v)} {html.escape(label)}</title></rect>'
                        f'<text x="{L + wdt + 4:.1f}" y="{y + 12}" fill="currentColor">{_fmt(v)}</text>')
            y += bar + gap
        y += 10
    title = f"{label} of every implementation, per case, for {rel_path}" + (" (shorter is faster)" if metric == "time_ms" else "")
    tid = f"t-{abs(hash(title))}"
    out.append(f'<figure class="course-plot"><svg viewBox="0 0 {W} {y}" role="img" aria-labelledby="{tid}" '
               f'xmlns="http://www.w3.org/2000/svg" font-size="12" font-family="sans-serif">'
               f'<title id="{tid}">{html.escape(title)}</title>')
    out += body
    out.append("</svg>")
    out.append(f"<figcaption>{html.escape(title)}. Versions in green, peers in orange, ceilings in grey. Measured on "
               f"{html.escape(' ; '.join(runs))}; generated from <code>records/gpu-record.json</code>.</figcaption></figure>")
    return "\n".join(out) + "\n"


def recorded_output(rel_path: str, args: str | None, rec: dict) -> str:
    prog = programs.program_for(rel_path)
    if prog is None:
        raise ValueError(f"course:output names {rel_path!r}, which is not a program under kernels/")
    wanted = tuple(args.split()) if args is not None else None
    runs = [r for r in prog.runs() if (r.args == wanted if wanted is not None else not r.bench)]
    if not runs:
        raise ValueError(f"course:output {rel_path}: no run with arguments {args!r}")
    e = record.entry(rec, runs[0].content_hash())
    if not e or e["outcome"] != "passed" or not e.get("stdout"):
        return _missing(rel_path, "output")
    where = record.describe_run(record.run_info(rec, e))
    command = " ".join([rel_path, *runs[0].args])
    fence = "````" if "```" in e["stdout"] else "```"
    return (f"{fence}text\n{e['stdout'].rstrip()}\n{fence}\n\n*Output of `{command}` recorded on {where} "
            f"(from `records/gpu-record.json`).*\n")


def record_summary(rec: dict, awaiting: dict) -> str:
    """`<!-- course:record-summary -->`: which GPUs and versions the record's items passed on."""
    by_run: dict[str, dict] = {}
    for e in rec["items"].values():
        text = record.describe_run(record.run_info(rec, e))
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


def on_page_markdown(markdown, page, config, files, **kwargs):
    markdown = prereqs.render(markdown, page.file.src_uri)  # the page's "Prerequisites:" line
    src = Path(page.file.abs_src_path)
    items = record.page_gpu_items(src)
    badge = badge_html(items, _record, cpu_example_count(src), _awaiting)
    sanitized = record.sanitizer_summary(src, _record)
    if badge and sanitized:
        badge = badge.replace("</div>", f'<br><span class="course-badge-detail">Memory safety: {html.escape(sanitized)}</span></div>', 1)
    if badge:
        m = _TITLE.search(markdown)
        at = m.end() if m else 0
        markdown = markdown[:at] + "\n\n" + badge + "\n\n" + markdown[at:]
    plotted = frozenset(m["path"].split()[0] for m in _PLOT.finditer(markdown))
    markdown = _RESULTS.sub(lambda m: _indent(results_table(m["path"], _record, plotted), m["indent"]), markdown)
    markdown = _PLOT.sub(lambda m: _indent(plot_svg(m["path"], m["opts"], _record), m["indent"]), markdown)
    markdown = _OUTPUT.sub(lambda m: _indent(recorded_output(m["path"], m["args"], _record), m["indent"]), markdown)
    markdown = _RECORD_SUMMARY.sub(lambda m: record_summary(_record, _awaiting), markdown)
    markdown = claims.render_all(markdown, _record, page.file.src_uri, log.warning, _awaiting)
    markdown = _SKIP.sub(lambda m: f'{m["indent"]}<p class="course-run-note course-not-run">Not run by the tests: '
                                   f'{html.escape(m["reason"])}</p>\n', markdown)
    markdown = _GPU.sub(lambda m: f'{m["indent"]}<p class="course-run-note course-needs-gpu">Runs on a GPU; '
                                  f'checked in the GPU record</p>\n', markdown)
    return markdown


def _indent(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in text.splitlines()) + "\n"
