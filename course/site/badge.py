"""The verification badge under a page's title: where its GPU examples last passed, or that some have
not passed on a GPU for their current code; with one sentence on what compute-sanitizer said."""

from __future__ import annotations

import html
from pathlib import Path

from course import items, programs, record


def cpu_example_count(page: Path) -> int:
    """Blocks the suite runs on every machine, plus runs of the CPU programs the page embeds."""
    blocks = [b for b in items.page_blocks(page)
              if not any(items.is_gpu_mark(m) or m.replace(" ", "").startswith("pytest.mark.skip") for m in b.marks)]
    runs = 0
    for path in items.embedded_files(page.read_text()):
        prog = programs.program_for(path)
        if prog and not prog.gpu:
            runs += len(prog.runs())
    return len(blocks) + runs


def badge_html(gpu_items: list[items.GpuItem], rec: dict, cpu_examples: int = 0, awaiting: dict | None = None) -> str:
    if not gpu_items:
        if cpu_examples:
            return (f'<div class="course-badge course-cpu" role="note"><strong>Checked on the CPU</strong> by the '
                    f'test suite on every change ({cpu_examples} example{"s" if cpu_examples > 1 else ""}); '
                    f'nothing on this page needs a GPU.</div>')
        return ""
    entries = [record.entry(rec, i.hash) for i in gpu_items]
    verified = [e for e in entries if e and e["outcome"] == "passed"]
    if len(verified) == len(gpu_items):
        runs = []
        for e in verified:
            text = record.describe_entry(rec, e)
            if text not in runs:
                runs.append(text)
        oldest = sorted(runs, key=lambda t: t.rsplit(" · ", 1)[-1])
        detail = f"{len(gpu_items)} GPU example{'s' if len(gpu_items) > 1 else ''} passed"
        return (f'<div class="course-badge course-verified" role="note">'
                f'<strong>Verified on</strong> {html.escape(" ; ".join(oldest))} '
                f'<span class="course-badge-detail">({detail})</span></div>')
    missing = len(gpu_items) - len(verified)
    reasons = sorted({(awaiting or {})[i.hash]["reason"] for i in gpu_items if i.hash in (awaiting or {})})
    why = f' Awaiting a GPU run: {html.escape("; ".join(reasons))}.' if reasons else ""
    return (f'<div class="course-badge course-unverified" role="note">'
            f'<strong>Not verified on a GPU yet:</strong> {missing} of {len(gpu_items)} GPU examples on this page '
            f'have no passing GPU record for their current code.{why}</div>')


def sanitizer_summary(page: Path, rec: dict) -> str:
    """One sentence on what compute-sanitizer said about the GPU programs a page embeds: clean under
    which tools, which tool reports on purpose and why, which were left out and why."""
    progs = [programs.program_for(p) for p in items.embedded_files(page.read_text())]
    progs = [p for p in progs if p and p.sanitizer_runs() or p and p.sanitizer_skip]
    if not progs:
        return ""
    clean, expected, skipped, missing = set(), [], [], 0
    for prog in progs:
        for srun in prog.sanitizer_runs():
            if not record.passing_entry(srun, rec):
                missing += 1
            elif srun.expected_report:
                expected.append(f"{srun.tool} reports on {Path(prog.rel).name} by design ({srun.expected_report})")
            else:
                clean.add(srun.tool)
        skipped += [f"{tool} not run on {Path(prog.rel).name} ({why})" for tool, why in prog.sanitizer_skip.items()]
    parts = []
    if clean:
        tools = [t for t in programs.SANITIZER_TOOLS if t in clean]
        parts.append(f"compute-sanitizer found nothing in the first checked run of each program under {', '.join(tools)}")
    parts += sorted(set(expected)) + skipped
    if missing:
        parts.append(f"{missing} sanitizer run(s) have no passing record for the current code")
    return "; ".join(parts) + "."
