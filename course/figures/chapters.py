"""The map of the course's chapters (the home page), drawn from the nav and the pages' prerequisites.

The boxes are the nav's chapters (course/chapters.py) and the arrows follow the prereqs lines: chapter A
leads to chapter B when a page of B lists a page of A, less the arrows that follow from others. Only
where each box sits is chosen here (PLACES); a chapter without a place fails the drawing, so a new
chapter cannot be left off the map.
"""

from __future__ import annotations

from .. import chapters as course_chapters
from .. import prereqs
from ..svg import BLUE, CARD, GREEN, GREY, MUTED, ORANGE, PURPLE, Svg
from .card import figure

# A chapter's folder -> (its label, column, row, fill) on a 4-column grid; optional chapters are dashed.
PLACES = {
    "ecosystem": ("Ecosystem map", 0, 3, CARD), "cpp": ("C/C++ refresher", 1, 0, CARD),
    "setup": ("Setup", 0, 1, GREY), "gpu-intro": ("GPU introduction", 1, 1, GREY),
    "first-kernels": ("First kernels", 2, 1, BLUE), "memory-model": ("Memory model", 3, 1, BLUE),
    "libraries": ("CUDA libraries", 3, 2, GREEN), "fast-matmul-fft": ("Matmul and FFT", 2, 2, GREEN),
    "triton": ("Triton", 1, 3, PURPLE), "attention": ("Attention", 2, 3, PURPLE),
    "mnist": ("Final project: MNIST", 3, 3, ORANGE), "pytorch-extensions": ("PyTorch extensions", 0, 4, PURPLE),
    "serving": ("Serving", 1, 4, PURPLE), "many-gpus": ("Many GPUs", 3, 4, ORANGE),
}


def chapter_graph() -> tuple[list[course_chapters.Chapter], list[tuple[str, str]]]:
    """The nav's chapters of more than one page, and the arrows between their folders: A -> B when a page
    of B lists a page of A as a prerequisite, without the arrows implied by a longer path."""
    found = [c for c in course_chapters.chapters() if len(c.pages) > 1]
    folder_of = {page: c.folder for c in found for page in c.pages}
    arrows = set()
    for c in found:
        for page in c.pages:
            if page.endswith(".md"):
                listed = prereqs.parse((course_chapters.ROOT / "docs" / page).read_text()) or []
                arrows |= {(folder_of[r], c.folder) for r in listed if folder_of.get(r, c.folder) != c.folder}

    def reachable(start: str, skip: tuple[str, str]) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            here = todo.pop()
            for a, b in arrows:
                if a == here and (a, b) != skip and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen
    return found, sorted((a, b) for a, b in arrows if b not in reachable(a, (a, b)))


@figure(520, "The chapters: an arrow leads to a chapter that builds on the one it starts from", heading_size=14)
def chapter_map(s: Svg) -> None:
    """How the chapters lead into each other: Setup, GPU introduction, First kernels and the Memory model in a line;
    the memory model leads to the CUDA libraries, which lead to Matmul and FFT; that leads to Attention, to Triton and
    to the MNIST final project; Triton leads to PyTorch extensions and, with Attention, to Serving; the final project
    leads to Many GPUs; the C/C++ refresher (before the GPU introduction) and the ecosystem map (before Triton) are
    optional"""
    found, arrows = chapter_graph()
    missing = [c.folder for c in found if c.folder not in PLACES]
    if missing:
        raise ValueError(f"course/figures/chapters.py: PLACES has no box for the nav's chapters {missing}")
    optional = {c.folder for c in found if c.optional}
    W, H, x0, gap, y0, vgap = 156, 50, 26, 30, 60, 40

    def pos(key):
        _, col, row, _ = PLACES[key]
        return x0 + col * (W + gap), y0 + row * (H + vgap)
    for c in found:
        label, _, _, fill = PLACES[c.folder]
        x, y = pos(c.folder)
        if c.folder in optional:
            s.rect(x, y, W, H, fill=CARD, dash="5,4")
            s.text(x + W / 2, y + H / 2 + 5, label, 13)
        else:
            s.box(x, y, W, H, label, fill, size=13, weight="bold")
    for a, b in arrows:
        (ax, ay), (bx, by) = pos(a), pos(b)
        dash = "5,4" if a in optional else None
        if ay == by:  # side by side
            start, end = (ax + W, bx - 2) if ax < bx else (ax, bx + W + 2)
            s.line(start, ay + H / 2, end, by + H / 2, arrow=True, dash=dash)
        else:  # downwards: leave the bottom and enter the top on the side that faces the other box
            side = (bx > ax) - (bx < ax)
            s.line(ax + W / 2 + side * 50, ay + H, bx + W / 2 - side * 40, by - 2, arrow=True, dash=dash)
    s.text(40, 505, "Dashed: optional, read when you need it. Everything from the Memory model on also builds "
           "on it.", 12, anchor="start", fill=MUTED)
