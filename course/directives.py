"""The directives pages write as HTML comments, read by one parser and dispatched from one table.

    <!-- prereqs: setup/first-kernel.md ... -->              the page's prerequisites (course/prereqs.py)
    <!-- course:results kernels/a.cu [kernels/b.py] [opts] -->  a generated results section
    <!-- course:plot kernels/a.cu x=size y=gbps [...] -->      a chart of recorded rows
    <!-- course:output kernels/a.py [args="--flag"] -->       a program's recorded output
    <!-- course:record-summary -->                             which GPUs the record's items passed on
    <!-- course:sitting-time -->                               how long re-verifying the course took
    <!-- course:kernel-index -->                               every file under kernels/, chapter by chapter
    <!-- course:chapters -->                                   the home page's chapter table, from the nav
    <!-- course:clone -->                                      the command that clones the repository
    <!-- course:cpu-exercises -->                              the exercises that run without a GPU
    <!-- course:exercises first-kernels -->                    inline: "seven exercises", from the registry
    <!-- course:profile-card LABEL [vs=OTHER] -->              a kernel's Nsight Compute card (course/profile_cards.py)
    <!-- claim: kernels/a.cu case="..." impl="..." show=... --> one recorded figure, inline in prose
    <!--pytest.mark.skip(reason="...")-->                     a visible "not run by the tests" note
    <!--pytest.mark.gpu-->                                     a visible "runs on a GPU" note

Every form but a claim and an exercise count stands on a line of its own. KINDS says, per directive, what its arguments look
like (a directive whose arguments do not match is left alone, an invisible comment), whether it may be
indented (inside an admonition or a tab), and at which stage the site hook (course/site/hooks.py)
renders it. Directives inside fenced code blocks are examples, not directives.

The parser lives below the site package because the harness reads pages too: the GPU run finds the
programs that a page's results and claims need (course/gpu_run.py), and course/claims.py checks claims.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# A fenced code block (``` or ~~~, at any indentation).
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}).*?^(?P=indent)(?P=fence)[ \t]*$", re.DOTALL | re.MULTILINE)
# Every directive: its name, and its arguments up to the first "-->"; `lead` and `trail` are set when
# it stands alone on its line (lead: its indentation).
_DIRECTIVE = re.compile(r"(?P<lead>^[ \t]*)?<!--\s*(?P<name>course:[\w-]+|claim:|prereqs:|pytest\.mark\.\w+)"
                        r"(?P<args>.*?)-->(?P<trail>[ \t]*$)?", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Kind:
    args: re.Pattern       # the arguments (fullmatch); their named groups are what a renderer reads
    stage: str             # "claims", "page" (the prereqs line), "generated" (sections from the record), "notes"
    line: bool = True      # stands on a line of its own
    indented: bool = True  # may be indented
    # Also takes the blank lines after it, all but one line end (how these directives were always
    # replaced; a page renders to the same text).
    swallow_blank_lines: bool = True
    first_only: bool = False


KINDS: dict[str, Kind] = {
    "prereqs:": Kind(re.compile(r"\s*(?P<list>[^\n]*?)\s*"), "page", indented=False, swallow_blank_lines=False,
                     first_only=True),
    "course:results": Kind(re.compile(r"\s+(?P<path>[^>]*?)\s*"), "generated"),
    "course:plot": Kind(re.compile(r"\s+(?P<path>\S+(?:\s+kernels/\S+)*)(?P<opts>[^>]*?)\s*"), "generated"),
    "course:output": Kind(re.compile(r"\s+(?P<path>\S+)(?:\s+args=\"(?P<args>[^\"]*)\")?\s*"), "generated"),
    "course:record-summary": Kind(re.compile(r"\s*"), "generated", indented=False),
    "course:sitting-time": Kind(re.compile(r"\s*"), "generated", indented=False),
    "course:kernel-index": Kind(re.compile(r"\s*"), "generated", swallow_blank_lines=False),
    "course:chapters": Kind(re.compile(r"\s*"), "generated", indented=False, swallow_blank_lines=False),
    "course:clone": Kind(re.compile(r"\s*"), "generated", indented=False, swallow_blank_lines=False),
    "course:cpu-exercises": Kind(re.compile(r"\s*"), "generated", indented=False, swallow_blank_lines=False),
    "course:exercises": Kind(re.compile(r"\s+(?P<chapter>[\w-]+)\s*"), "generated", line=False,
                             swallow_blank_lines=False),
    "course:profile-card": Kind(re.compile(r"\s+(?P<label>[\w.-]+)(?:\s+vs=(?P<vs>[\w.-]+))?\s*"), "generated"),
    "claim:": Kind(re.compile(r"\s*(?P<path>\S+)(?P<opts>.*)", re.DOTALL), "claims", line=False),
    "pytest.mark.skip": Kind(re.compile(r"""\(reason=(?P<q>["'])(?P<reason>.+?)(?P=q)\)\s*"""), "notes"),
    "pytest.mark.gpu": Kind(re.compile(r"\s*"), "notes"),
}


@dataclass(frozen=True)
class Directive:
    name: str
    args: dict             # the named groups of its Kind's pattern
    indent: str            # its line's indentation (line directives)
    start: int             # where it starts in the text (for a line directive, its line)
    end: int               # where its replacement ends
    line: int              # the line it starts on (1 for the first)


def find(text: str, names: set[str] | None = None) -> list[Directive]:
    """The directives of a text (of the given names), in order, outside fenced code blocks."""
    fences = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    found, seen = [], set()
    for m in _DIRECTIVE.finditer(text):
        name = m["name"]
        kind = KINDS.get(name)
        if kind is None or (names is not None and name not in names) or any(a <= m.start() < b for a, b in fences):
            continue
        args = kind.args.fullmatch(m["args"])
        alone = m["lead"] is not None and m["trail"] is not None
        if args is None or (kind.line and not alone) or (kind.line and not kind.indented and m["lead"]):
            continue
        if kind.first_only and name in seen:
            continue
        seen.add(name)
        start = m.start() if kind.line or m["lead"] is None else m.end("lead")
        end = m.end()
        if kind.swallow_blank_lines:
            end = _blank_lines_end(text, end)
        found.append(Directive(name, args.groupdict(), m["lead"] or "", start, end, text.count("\n", 0, start) + 1))
    return found


def _blank_lines_end(text: str, at: int) -> int:
    """Past the whitespace after `at`, up to (not including) the last line end before the next text;
    at the end of the text, past all of it."""
    stop = at
    while stop < len(text) and text[stop].isspace():
        stop += 1
    if stop == len(text):
        return stop
    last = text.rfind("\n", at, stop)
    return last if last >= 0 else at


def render(text: str, renderers: dict[str, Callable[[Directive], str | None]]) -> str:
    """Replace each directive named in `renderers` by what its renderer returns (None: leave it)."""
    out, at = [], 0
    for d in find(text, set(renderers)):
        if d.start < at:
            continue
        new = renderers[d.name](d)
        if new is None:
            continue
        out += [text[at:d.start], new]
        at = d.end
    return "".join(out) + text[at:]


def stage(name: str) -> set[str]:
    """The directives rendered at one stage of the site hook."""
    return {n for n, k in KINDS.items() if k.stage == name}
