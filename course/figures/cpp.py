"""The C/C++ refresher: where a variable lives and who frees it."""

from __future__ import annotations

from ..svg import BLUE, CARD, GREEN, GREY, MUTED, ORANGE, PURPLE, STRONG_RED, Svg


def storage_lifetimes() -> str:
    s = Svg(760, 420, "Where memory.c's variables live. Static storage holds calls for the whole run. The stack "
                      "holds main's frame, with the pointer squares, and above it make_squares' frame, with "
                      "local[4] and the pointer heap; that frame is gone when the function returns, so a pointer "
                      "to local would dangle. The heap holds the n doubles malloc returned, which both pointers "
                      "reach, until free. Device memory is a second heap, managed from the host with cudaMalloc "
                      "and cudaFree; the host holds only its address")
    s.heading("Stack, heap, static storage, and the device's heap")
    s.panel(30, 50, 220, 290, "the stack")
    s.rect(46, 84, 188, 96, fill=CARD, dash="5 4")
    s.text(140, 104, "make_squares' frame", 12, weight="bold")
    s.box(58, 114, 80, 28, "local[4]", ORANGE, size=12)
    s.box(146, 114, 76, 28, "heap", BLUE, size=12)
    s.text(140, 166, "gone when it returns", 12, fill=STRONG_RED, weight="bold")
    s.rect(46, 196, 188, 70, fill=GREY)
    s.text(140, 216, "main's frame", 12, weight="bold")
    s.box(96, 226, 88, 28, "squares", BLUE, size=12)
    s.lines(140, 292, ["a frame lives until its call returns;", "8 MiB is typical on Linux"], step=16, size=12, fill=MUTED)
    s.panel(280, 50, 220, 170, "the heap")
    s.box(300, 84, 180, 40, "n doubles", GREEN, size=12, weight="bold", sub="from malloc")
    s.lines(390, 150, ["lives until free,", "whoever holds a pointer;", "as big as the machine allows"],
            step=16, size=12, fill=MUTED)
    s.line(222, 128, 298, 104, arrow=True)
    s.line(184, 240, 298, 116, arrow=True)
    s.panel(280, 240, 220, 100, "static storage")
    s.box(340, 270, 100, 28, "calls", PURPLE, size=12)
    s.text(390, 322, "the whole run", 12, fill=MUTED)
    s.panel(530, 50, 200, 290, "device memory")
    s.box(550, 84, 160, 40, "a device buffer", GREEN, size=12, weight="bold", sub="from cudaMalloc")
    s.lines(630, 150, ["a heap you manage", "from the host:", "cudaMalloc, cudaFree;", "the host holds only",
                       "its address"], step=16, size=12, fill=MUTED)
    s.caption(372, "Return a heap pointer, never the address of a local: the caller now owns it and must free "
                   "it once.", 12)
    s.caption(396, "Every malloc has exactly one free; C++'s RAII makes the destructor do it.", 12)
    return s.render()
