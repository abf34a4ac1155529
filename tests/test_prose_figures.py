"""No measured figure is typed into prose: figures come from the GPU record through page directives.

The guard reads every page's prose (code fences, inline code, maths and HTML comments are not prose;
a `<!-- claim: ... -->` directive is a comment, so the figure it renders never appears in the source)
and looks for numbers with units of time, bandwidth, throughput or share ("2.9 ms", "3 TB/s", "93%"),
multipliers ("3x", "1.5×", "three times faster", "twice as fast"), and profiler-style counts ("63
registers", "4 bytes spill"). A hit passes only when it is labelled:
- its sentence says "datasheet" (a vendor's figure, labelled so for the reader), or
- a line of its sentence ends with `<!-- figure: datasheet -->`, `<!-- figure: arithmetic -->` (worked
  arithmetic from stated inputs, as in an exercise answer), `<!-- figure: goal -->` (a target, not a
  result) or `<!-- figure: hypothetical -->` (an example figure in a question).
Every other hit fails with the page and line: state it with a claim directive, or delete it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))

MARKER = re.compile(r"<!--\s*figure:\s*(datasheet|arithmetic|goal|hypothetical)\s*-->")
_NUM = r"(?<![\w.])\d[\d,]*(?:\.\d+)?"
_WORD_NUM = r"(?:\d+(?:\.\d+)?|two|three|four|five|six|seven|eight|nine|ten|twenty|hundred|thousand|several|many)"
FIGURE = re.compile(
    rf"{_NUM}\s?(?:ms|µs|us|ns|GB/s|GiB/s|TB/s|MB/s|TFLOP/s|GFLOP/s|TFLOPS|GFLOPS|FLOP/s)(?![\w/])"
    rf"|{_NUM}\s+s\b(?!')"
    rf"|{_NUM}\s?%"
    rf"|{_NUM}\s?[x×](?![\w])(?!\s*(?:\d|[A-Za-z]\b))"  # "3x faster", not the tile "64 x N"
    rf"|\b{_WORD_NUM}\s+times\s+(?:faster|slower|quicker|as\s+fast|as\s+slow|higher|lower|the\s+speed|the\s+throughput)"
    rf"|\btwice\s+as\s+(?:fast|slow|quick)|\bhalf\s+as\s+fast"
    rf"|{_NUM}\s+(?:registers|bytes\s+spill|spilled)\b",
    re.IGNORECASE,
)
# Not prose: fenced blocks (any indentation), inline code, maths, HTML comments, link targets.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}).*?^(?P=indent)(?P=fence)[ \t]*$", re.DOTALL | re.MULTILINE)
_STRIP = [re.compile(p, re.DOTALL) for p in (r"<!--.*?-->", r"`[^`\n]*`", r"\\\(.*?\\\)", r"\\\[.*?\\\]",
                                               r"\$\$.*?\$\$", r"\]\([^)\s]*\)", r"<[^>\n]+>")]
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z(*\[])")


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def prose(text: str) -> str:
    """The page with everything that is not prose replaced by spaces (offsets and lines kept)."""
    text = _FENCE.sub(_blank, text)
    for pattern in _STRIP:
        text = pattern.sub(_blank, text)
    return text


def unlabelled_figures(text: str) -> list[tuple[int, str, str]]:
    """(line number, the figure, its sentence) of every unlabelled figure in a page's prose."""
    raw_lines = text.splitlines()
    clean = prose(text)
    line_starts = [m.start() for m in re.finditer(r"^", clean, re.MULTILINE)]

    def line_of(offset: int) -> int:
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    found = []
    # Sentences never cross a blank line or a table row's end.
    for block in re.finditer(r"(?:^(?!\s*$).*\n?)+", clean, re.MULTILINE):
        rows = [block] if not block.group(0).lstrip().startswith("|") else list(re.finditer(r"^.*$", block.group(0), re.MULTILINE))
        for part in rows:
            base = block.start() + (part.start() if part is not block else 0)
            body = part.group(0)
            bounds = [0] + [m.end() for m in _SENTENCE_END.finditer(body)] + [len(body)]
            for a, b in zip(bounds, bounds[1:]):
                sentence = body[a:b]
                hits = list(FIGURE.finditer(sentence))
                if not hits or "datasheet" in sentence.lower():
                    continue
                first, last = line_of(base + a), line_of(base + max(a, b - 1))
                if any(MARKER.search(raw_lines[n - 1]) for n in range(first, last + 1) if n - 1 < len(raw_lines)):
                    continue
                for h in hits:
                    found.append((line_of(base + a + h.start()), h.group(0).strip(), " ".join(sentence.split())))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_unlabelled_figures_in_prose(page):
    hits = unlabelled_figures(page.read_text())
    rel = page.relative_to(ROOT).as_posix()
    assert not hits, "figures typed into prose (state them with <!-- claim: ... --> or label them):\n" + "\n".join(
        f"  {rel}:{line}: {fig!r} in: {sentence[:160]}" for line, fig, sentence in hits)


def test_guard_catches_and_passes_what_it_should():
    bad = "v10 runs in 2.9 ms.\n\nIt is 3x faster than v9, and three times faster than cuBLAS.\n\n| v10 | 93% |\n"
    assert [f for _, f, _ in unlabelled_figures(bad)] == ["2.9 ms", "3x", "three times faster", "93%"]
    good = ("The datasheet gives 3.35 TB/s.\n\nAt 50 GB/s that takes 16 ms. <!-- figure: arithmetic -->\n\n"
            "v10 reaches <!-- claim: kernels/matmul/sgemm.cu case=\"c\" impl=\"v10\" show=pct --> of cuBLAS.\n\n"
            "```text\n2.9 ms\n```\n\nA tile of 64 x 64 floats; `3x` in code; \\(4 \\times 2\\) ms in maths.\n")
    assert unlabelled_figures(good) == []
