"""The course's chapters, read from mkdocs.yml's nav: the one list the home page, its map and the
prerequisites lines are made from.

A chapter is a section of the nav (its first page is its index), or a single page that ABOUT describes
(Conventions). ABOUT holds what only a person can write about a chapter: what a reader can do after it
and an estimate of the time it takes; `table` renders the home page's chapter table from the nav in nav
order, with the total, and names every nav section ABOUT lacks, so a new chapter cannot be left off the
home page. OPTIONAL are the chapters a reader may skip and consult when needed: the chapter map draws
them dashed and a prerequisites line lists their pages apart, as refreshers (course/prereqs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

# A chapter's index page -> (what a reader can do after it, its time in minutes: reading and running its
# examples, exercises not included; an estimate, not a measurement).
ABOUT = {
    "conventions.md": ("read the pages' notes and badges and run any example yourself", 15),
    "ecosystem/index.md": ("place frameworks, compilers, inference engines and CUDA libraries on one map", 120),
    "setup/index.md": ("install the driver and toolkit, query the GPU, launch a first kernel, build for the right "
                       "architecture and measure bandwidth", 120),
    "cpp/index.md": ("read the C and C++ that CUDA code is written in: pointers, types, the preprocessor, builds, "
                     "memory, RAII and templates", 180),
    "gpu-intro/index.md": ("explain why a GPU trades latency for throughput, what an SM holds and how fast each "
                           "level of memory is", 120),
    "first-kernels/index.md": ("write, check, time, debug and profile kernels, from C++ and from Python", 360),
    "memory-model/index.md": ("write a transpose, a reduction and a softmax that run at the copy bandwidth, and "
                              "compare them with PyTorch", 360),
    "libraries/index.md": ("call cuBLAS, cuBLASLt, cuDNN, cuFFT, cuRAND, CUB, CUTLASS and NCCL, check what they "
                           "return and time them fairly", 300),
    "fast-matmul-fft/index.md": ("take an SGEMM and an FFT from the obvious version to one close to the vendor "
                                 "library, with tensor cores at the end", 480),
    "attention/index.md": ("compute attention in one kernel that keeps the score matrix on chip, with the online "
                           "softmax over tiles of keys and values, and check it against PyTorch", 240),
    "triton/index.md": ("write the same kernels in Triton and read what `torch.compile` generates", 240),
    "pytorch-extensions/index.md": ("ship a CUDA or Triton kernel as a differentiable, compilable PyTorch "
                                    "operator", 240),
    "serving/index.md": ("write the kernels of a language model's decode step (decode attention over a paged "
                         "cache, fused small kernels, sampling, INT4 and FP8 GEMMs) and time the whole step "
                         "against PyTorch's ways of running it", 480),
    "mnist/index.md": ("train a convolutional network in your own CUDA code and time it against PyTorch", 360),
    "many-gpus/index.md": ("measure NCCL's collectives, write an all-reduce of your own, overlap a tensor-parallel "
                           "layer's communication and train the final project on every GPU of a machine", 300),
}

# Chapters to consult when needed rather than read in order.
OPTIONAL = frozenset({"ecosystem/index.md", "cpp/index.md"})


@dataclass(frozen=True)
class Chapter:
    title: str                # its title in the nav
    pages: tuple[str, ...]    # docs-relative, in nav order; the first is its index

    @property
    def index(self) -> str:
        return self.pages[0]

    @property
    def folder(self) -> str:
        return self.index.rsplit("/", 1)[0] if "/" in self.index else ""

    @property
    def optional(self) -> bool:
        return self.index in OPTIONAL


def nav(config: Path | None = None) -> list:
    """mkdocs.yml's nav (the last key of the file; it holds no YAML tags, so it loads on its own)."""
    text = (config or ROOT / "mkdocs.yml").read_text()
    return yaml.safe_load(text[text.index("\nnav:"):])["nav"]


def _pages(entry) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [p for value in entry.values() for p in _pages(value)]
    return [p for item in entry for p in _pages(item)]


def sections(nav_entries: list) -> list[Chapter]:
    """Every top-level entry of the nav as a Chapter (a single page is a chapter of one page)."""
    out = []
    for entry in nav_entries:
        title = next(iter(entry)) if isinstance(entry, dict) else entry
        out.append(Chapter(title, tuple(_pages(entry))))
    return out


def chapters(nav_entries: list | None = None) -> list[Chapter]:
    """The chapters: every section of the nav, and every single page ABOUT describes."""
    return [c for c in sections(nav() if nav_entries is None else nav_entries)
            if len(c.pages) > 1 or c.index in ABOUT]


def _hours(minutes: int) -> str:
    return f"{minutes} min" if minutes < 60 else f"{minutes / 60:g} h"


_H1 = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def page_title(rel: str) -> str:
    m = _H1.search((ROOT / "docs" / rel).read_text())
    return m.group(1) if m else rel


def table(nav_entries: list, warn=None) -> str:
    """The home page's chapter table, one row per chapter in nav order, and its total; a nav section that
    ABOUT does not describe is named through `warn` (a strict build then fails)."""
    rows = ["| Chapter | After it you can | Time (estimate) |", "|---|---|---|"]
    total = optional = 0
    for chapter in chapters(nav_entries):
        if chapter.index not in ABOUT:
            if warn:
                warn(f"course/chapters.py: ABOUT has no entry for the nav's chapter {chapter.title!r} "
                     f"({chapter.index}); the home page would leave it out")
            continue
        outcome, minutes = ABOUT[chapter.index]
        name = f"[{page_title(chapter.index)}]({chapter.index})" + (" (optional)" if chapter.optional else "")
        rows.append(f"| {name} | {outcome} | {_hours(minutes)} |")
        total += minutes
        optional += minutes if chapter.optional else 0
    rows.append(f"| **All chapters** | | **about {round(total / 60)} h**, of which {_hours(optional)} optional |")
    return "\n".join(rows) + "\n"
