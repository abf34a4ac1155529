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


def _box(kind: str, summary: str, details: list[str]) -> str:
    """The box under a page's title: one line, and what backs it folded under it (a phone reader reaches
    the page's first sentence on the first screen; the runs, versions and reasons are a tap away)."""
    body = "".join(f"<p>{d}</p>" for d in details if d)
    if not body:
        return f'<div class="course-badge {kind}" role="note">{summary}</div>'
    return f'<details class="course-badge {kind}" role="note"><summary>{summary}</summary>{body}</details>'


def badge_html(gpu_items: list[items.GpuItem], rec: dict, cpu_examples: int = 0, awaiting: dict | None = None,
               sanitized: str = "") -> str:
    """The verification box: whether the page's GPU examples passed on a GPU for their current code, where,
    and (`sanitized`, sanitizer_summary) what compute-sanitizer said."""
    safety = f"Memory safety: {html.escape(sanitized)}" if sanitized else ""
    if not gpu_items:
        if cpu_examples:
            return _box("course-cpu", f'<strong>Checked on the CPU</strong> by the test suite on every change '
                        f'({cpu_examples} example{"s" if cpu_examples > 1 else ""}); nothing on this page needs a GPU.',
                        [safety])
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
        gpus = list(dict.fromkeys(t.split(" · ")[0] for t in oldest))
        detail = f"{len(gpu_items)} GPU example{'s' if len(gpu_items) > 1 else ''} passed"
        return _box("course-verified", f'<strong>Verified on</strong> {html.escape(" and ".join(gpus))} '
                    f'<span class="course-badge-detail">({detail})</span>',
                    [f"Runs: {html.escape(' ; '.join(oldest))}.", safety])
    missing = len(gpu_items) - len(verified)
    reasons = sorted({(awaiting or {})[i.hash]["reason"] for i in gpu_items if i.hash in (awaiting or {})})
    why = f'Awaiting a GPU run: {html.escape("; ".join(reasons))}' if reasons else ""
    return _box("course-unverified", f'<strong>Not verified on a GPU yet:</strong> {missing} of {len(gpu_items)} '
                f'GPU examples on this page await a passing run of their current code.', [why, safety])


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
        skipped += [(why, tool, Path(prog.rel).name) for tool, why in prog.sanitizer_skip.items()]
    parts = []
    if clean:
        tools = [t for t in programs.SANITIZER_TOOLS if t in clean]
        parts.append(f"compute-sanitizer found nothing in the first checked run of each program under {', '.join(tools)}")
    parts += sorted(set(expected))
    # One sentence per reason, with a count: four tools left out of two programs for one reason is one fact.
    for why in dict.fromkeys(w for w, _, _ in skipped):
        left = [(tool, name) for w, tool, name in skipped if w == why]
        tools = [t for t in programs.SANITIZER_TOOLS if any(t == tool for tool, _ in left)]
        names = list(dict.fromkeys(name for _, name in left))
        parts.append(f"{_words(tools)} not run on {_words(names)} ({len(left)} run{'s' if len(left) > 1 else ''}: {why})")
    if missing:
        parts.append(f"{missing} sanitizer run(s) have no passing record for the current code")
    return "; ".join(parts) + "."


def _words(names: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
