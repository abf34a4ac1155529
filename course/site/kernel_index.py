"""`<!-- course:kernel-index -->`: every file under kernels/, chapter by chapter: what kind of file it
is, the page(s) that embed it (and so teach it), and its last verified result: for a GPU program, what
the GPU record says about each of its runs for the file's current content; for a CPU program, that CI
runs it; for a header, the programs that include it.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from course import items, programs, record
from course.paths import DOCS

_H1 = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def flatten_nav(nav) -> list[str]:
    out: list[str] = []
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        for value in nav.values():
            out += flatten_nav(value)
    elif isinstance(nav, list):
        for item in nav:
            out += flatten_nav(item)
    return out


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "vendor" not in p.parts)


def _page_title(page: Path) -> str:
    m = _H1.search(page.read_text())
    return m.group(1).strip() if m else page.stem.replace("-", " ").capitalize()


def _embedders(nav_order: list[str]) -> dict[str, list[Path]]:
    """kernels/... path -> the pages that embed it, in nav order."""
    order = {p: i for i, p in enumerate(nav_order)}
    found: dict[str, list[Path]] = {}
    for page in _pages():
        for rel in items.embedded_files(page.read_text()):
            found.setdefault(rel, []).append(page)
    for rel, pages in found.items():
        pages.sort(key=lambda p: (order.get(p.relative_to(DOCS).as_posix(), len(order)), p.as_posix()))
    return found


def _kind(prog: programs.Program) -> str:
    if prog.header:
        return "header"
    if prog.compile_only or getattr(prog, "built_by", None):
        return "GPU module" if prog.lang == "cuda" else "module"
    lang = {"python": "Python", "cuda": "CUDA", "cpp": "C++", "c": "C"}[prog.lang]
    return f"{lang}, GPU" if prog.gpu else f"{lang}, CPU"


def _short_run(rec: dict, e: dict) -> str:
    run = record.run_info(rec, e)
    parts = [run.get("gpu") or "unknown GPU"]
    if run.get("cuda_runtime"):
        parts.append(f"CUDA {run['cuda_runtime']}")
    parts.append(run.get("date", "?"))
    return " · ".join(parts)


def _status(cls: str, text: str) -> str:
    return f'<span class="reader-status reader-{cls}">{text}</span>'


def program_result(prog: programs.Program, rec: dict, users: list[programs.Program]) -> str:
    """The 'last verified result' cell for one file under kernels/ (inline HTML)."""
    if prog.header:
        names = [u.rel for u in users]
        if not names:
            return _status("neutral", "header, included by no program")
        if len(names) > 3:
            return _status("neutral", f"included by {len(names)} programs")
        return _status("neutral", "included by " + ", ".join(f"<code>{html.escape(n)}</code>" for n in names))
    if getattr(prog, "built_by", None):
        return _status("neutral", f"built and checked by <code>{html.escape(prog.built_by)}</code>")
    if prog.compile_only:
        return _status("cpu", "compiled in CI (no <code>main</code>: loaded by another program)")
    runs = prog.runs()
    if not prog.gpu:
        return _status("cpu", f"checked in CI ({_count(runs)})")
    entries = [record.entry_for(r, rec) for r in runs]
    passed = [e for e in entries if e and e["outcome"] == "passed"]
    bad = [e for e in entries if e and e["outcome"] != "passed"]
    if len(passed) == len(runs):
        where = " ; ".join(dict.fromkeys(_short_run(rec, e) for e in passed))
        figures = sum(len(e.get("benchmarks") or []) for e in passed)
        extra = f", {figures} benchmark figure{'s' if figures != 1 else ''}" if figures else ""
        return _status("passed", f"passed ({_count(runs)}{extra}) on {html.escape(where)}")
    if bad:
        outcomes = ", ".join(sorted({html.escape(e["outcome"]) for e in bad}))
        return _status("failed", f"last GPU run: {outcomes} ({len(bad)} of {len(runs)} runs)")
    return _status("pending", f"not yet verified on a GPU for its current code "
                              f"({len(runs) - len(passed)} of {len(runs)} runs)")


def _count(runs: list[programs.Run]) -> str:
    checked = sum(1 for r in runs if not r.bench)
    bench = len(runs) - checked
    text = f"{checked} checked run{'s' if checked != 1 else ''}"
    return text + (f" + {bench} benchmark run{'s' if bench != 1 else ''}" if bench else "")


def _link(from_page: Path, to_page: Path) -> str:
    rel = os.path.relpath(to_page, from_page.parent).replace(os.sep, "/")
    title = _page_title(to_page).replace("[", "\\[").replace("]", "\\]").replace("|", "\\|")
    return f"[{title}]({rel})"


def _chapter_title(chapter: str) -> str:
    index = DOCS / chapter / "index.md"
    if index.is_file():
        return _page_title(index)
    return chapter.replace("-", " ").replace("_", " ").capitalize()


def _chapter_order(chapter: str, nav_order: list[str]) -> tuple[int, str]:
    for i, path in enumerate(nav_order):
        if path.startswith(chapter + "/"):
            return (i, chapter)
    return (len(nav_order), chapter)


def kernel_index(page: Path, rec: dict, nav_order: list[str]) -> str:
    """Markdown: one section per kernels/ folder, one table row per file."""
    progs = programs.all_programs()
    embedders = _embedders(nav_order)
    by_chapter: dict[str, list[programs.Program]] = {}
    for prog in progs:
        parts = Path(prog.rel).parts  # ("kernels", chapter, ..., file)
        chapter = parts[1] if len(parts) > 2 else ""
        by_chapter.setdefault(chapter, []).append(prog)
    sources = {p.rel: set(p.sources()) for p in progs if p.runnable}
    gpu = [p for p in progs if p.gpu and p.runnable]
    verified = [p for p in gpu if all(record.passing_entry(r, rec) for r in p.runs())]
    out = [f"The course has {len(progs)} files under `kernels/`: {len(gpu)} GPU programs, of which "
           f"{len(verified)} passed every checked run on a GPU for their current code, and "
           f"{len(progs) - len(gpu)} CPU programs, headers and modules that CI builds and runs.", ""]
    for chapter in sorted(by_chapter, key=lambda c: _chapter_order(c, nav_order)):
        title = _chapter_title(chapter) if chapter else "Other files"
        out += [f"## {title}", "", '<div class="reader-kernel-index" markdown>', "",
                "| File | Kind | Taught on | Last verified result |", "|---|---|---|---|"]
        for prog in by_chapter[chapter]:
            pages = embedders.get(prog.rel, [])
            taught = ", ".join(_link(page, p) for p in pages) if pages else "*(no page embeds it yet)*"
            users = [u for u in progs if u.rel in sources and u is not prog and prog.path in sources[u.rel]]
            out.append(f"| `{prog.rel}` | {_kind(prog)} | {taught} | {program_result(prog, rec, users)} |")
        out += ["", "</div>", ""]
    return "\n".join(out) + "\n"
