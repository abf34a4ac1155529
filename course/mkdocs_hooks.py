"""MkDocs hooks: verification badges, generated results tables and visible run markers.

- Each page that has GPU items (GPU blocks, or runs of GPU programs it embeds) gets a badge under
  its title: where its examples last passed ("Verified on NVIDIA H100 80GB HBM3 · CUDA 13.0 · ..."),
  or, in a warning colour, that some have not been verified on a GPU for their current code.
- `<!-- course:results kernels/path/file.cu -->` becomes a table of that program's benchmark
  figures from the GPU record, with the GPU and versions they were measured with.
- `<!--pytest.mark.skip(reason="...")-->` before a block becomes a visible "Not run by the tests"
  note with the reason; `<!--pytest.mark.gpu-->` a small "runs on a GPU" note.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course import programs, record  # noqa: E402

_RESULTS = re.compile(r"^(?P<indent>[ \t]*)<!--\s*course:results\s+(?P<path>\S+)\s*-->\s*$", re.MULTILINE)
_SKIP = re.compile(r"""^(?P<indent>[ \t]*)<!--\s*pytest\.mark\.skip\(reason=(?P<q>["'])(?P<reason>.+?)(?P=q)\)\s*-->\s*$""", re.MULTILINE)
_GPU = re.compile(r"^(?P<indent>[ \t]*)<!--\s*pytest\.mark\.gpu\s*-->\s*$", re.MULTILINE)
_TITLE = re.compile(r"^# .+$", re.MULTILINE)

_record: dict = {}


def on_config(config, **kwargs):
    global _record
    _record = record.load()
    return config


def badge_html(items: list[record.GpuItem], rec: dict) -> str:
    if not items:
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
    return (f'<div class="course-badge course-unverified" role="note">'
            f'<strong>Not verified on a GPU yet:</strong> {missing} of {len(items)} GPU examples on this page '
            f'have no passing GPU record for their current code.</div>')


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if x < 1000 else f"{x:,.0f}"


def results_table(rel_path: str, rec: dict) -> str:
    prog = programs.program_for(rel_path)
    if prog is None:
        raise ValueError(f"course:results names {rel_path!r}, which is not a program under kernels/")
    benches = [r for r in prog.runs() if r.bench]
    if not benches:
        raise ValueError(f"course:results: {rel_path} declares no 'course: bench' run")
    rows, runs = [], []
    for run in benches:
        e = record.entry(rec, run.content_hash())
        if not e or e["outcome"] != "passed":
            return (f'!!! warning "No GPU figures for the current version of `{rel_path}`"\n'
                    f"    The GPU record has no passing benchmark run for this program's current code. "
                    f"Refresh it on a GPU with `{record.REFRESH_STALE}` (see Contributing).\n")
        runs.append(record.describe_run(record.run_info(rec, e)))
        rows += e["benchmarks"]
    peers = {b["case"]: b for b in rows if b.get("peer")}
    has_flops = any(b.get("flops") for b in rows)
    head = "| Case | Implementation | Time (ms) | Bytes moved (MB) | GB/s |" + (" TFLOP/s |" if has_flops else "") + " % of peer |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for b in rows:
        t = b["time_ms"]
        gbs = b["bytes"] / (t * 1e-3) / 1e9 if b.get("bytes") else 0.0
        peer = peers.get(b["case"])
        pct = "peer" if b.get("peer") else (f"{100 * peer['time_ms'] / t:.0f}%" if peer else "")
        cells = [b["case"], b["impl"], _fmt(t), _fmt(b.get("bytes", 0) / 1e6), _fmt(gbs) if gbs else ""]
        if has_flops:
            cells.append(_fmt(b["flops"] / (t * 1e-3) / 1e12) if b.get("flops") else "")
        lines.append("| " + " | ".join(cells + [pct]) + " |")
    where = " ; ".join(dict.fromkeys(runs))
    caption = (f"\n*Measured on {where}. Median of 20 timed repeats after warm-up, L2 flushed between repeats. "
               f"Generated from `records/gpu-record.json` (run `{rel_path}` with `{' '.join(benches[0].args)}`); "
               f"% of peer is the peer's time over this row's time.*\n")
    return "\n".join(lines) + "\n" + caption


def on_page_markdown(markdown, page, config, files, **kwargs):
    src = Path(page.file.abs_src_path)
    items = record.page_gpu_items(src)
    badge = badge_html(items, _record)
    if badge:
        m = _TITLE.search(markdown)
        at = m.end() if m else 0
        markdown = markdown[:at] + "\n\n" + badge + "\n\n" + markdown[at:]
    markdown = _RESULTS.sub(lambda m: _indent(results_table(m["path"], _record), m["indent"]), markdown)
    markdown = _SKIP.sub(lambda m: f'{m["indent"]}<p class="course-run-note course-not-run">Not run by the tests: '
                                   f'{html.escape(m["reason"])}</p>\n', markdown)
    markdown = _GPU.sub(lambda m: f'{m["indent"]}<p class="course-run-note course-needs-gpu">Runs on a GPU; '
                                  f'checked in the GPU record</p>\n', markdown)
    return markdown


def _indent(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in text.splitlines()) + "\n"
