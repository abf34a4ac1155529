"""The map of the course's chapters (the home page)."""

from __future__ import annotations

from ..svg import BLUE, CARD, GREEN, GREY, MUTED, ORANGE, PURPLE, Svg
from .card import figure


CHAPTERS = {  # key: (label, column, row), placed on a 4 x 4 grid; dashed = optional
    "eco": ("Ecosystem map", 0, 0), "cpp": ("C/C++ refresher", 2, 0),
    "setup": ("Setup", 0, 1), "intro": ("GPU introduction", 1, 1), "first": ("First kernels", 2, 1),
    "mem": ("Memory model", 3, 1), "libs": ("CUDA libraries", 3, 2), "fast": ("Matmul and FFT", 2, 2),
    "attn": ("Attention", 2, 3), "triton": ("Triton", 1, 3), "ext": ("PyTorch extensions", 0, 3),
    "mnist": ("Final project: MNIST", 3, 3),
}


@figure(460, "The chapters: an arrow leads to a chapter that builds on the one it starts from", heading_size=14)
def chapter_map(s: Svg) -> None:
    """How the chapters lead into each other: Setup, GPU introduction, First kernels and the Memory model in a line; the
    memory model leads to the CUDA libraries, which lead to Matmul and FFT; that leads to Attention, to Triton (then
    PyTorch extensions) and, with the libraries and the extensions, to the MNIST final project; the ecosystem map and
    the C/C++ refresher are optional"""
    W, H, x0, gap, y0, vgap = 156, 50, 26, 30, 60, 40
    def pos(key):
        _, c, r = CHAPTERS[key]
        return x0 + c * (W + gap), y0 + r * (H + vgap)
    fills = {"eco": CARD, "cpp": CARD, "setup": GREY, "intro": GREY, "first": BLUE, "mem": BLUE, "libs": GREEN,
             "fast": GREEN, "attn": PURPLE, "triton": PURPLE, "ext": PURPLE, "mnist": ORANGE}
    for key, (label, _, _) in CHAPTERS.items():
        x, y = pos(key)
        if key in ("eco", "cpp"):
            s.rect(x, y, W, H, fill=CARD, dash="5,4")
            s.text(x + W / 2, y + H / 2 + 5, label, 13)
        else:
            s.box(x, y, W, H, label, fills[key], size=13, weight="bold")

    def right(k): x, y = pos(k); return x + W, y + H / 2
    def left(k): x, y = pos(k); return x, y + H / 2
    def top(k, dx=0): x, y = pos(k); return x + W / 2 + dx, y
    def bottom(k, dx=0): x, y = pos(k); return x + W / 2 + dx, y + H

    s.line(*bottom("eco"), top("setup")[0], top("setup")[1] - 2, arrow=True, dash="5,4")
    s.line(*bottom("cpp"), top("first")[0], top("first")[1] - 2, arrow=True, dash="5,4")
    for a, b in (("setup", "intro"), ("intro", "first"), ("first", "mem")):
        ax, ay = right(a)
        bx, by = left(b)
        s.line(ax, ay, bx - 2, by, arrow=True)
    s.line(*bottom("mem"), top("libs")[0], top("libs")[1] - 2, arrow=True)
    s.line(*left("libs"), right("fast")[0] + 2, right("fast")[1], arrow=True)
    s.line(*bottom("fast"), top("attn")[0], top("attn")[1] - 2, arrow=True)
    fx, fy = bottom("fast", -50)
    tx, ty = top("triton", 40)
    s.line(fx, fy, tx, ty - 2, arrow=True)
    s.line(*left("triton"), right("ext")[0] + 2, right("ext")[1], arrow=True)
    fx, fy = bottom("fast", 50)
    mx, my = top("mnist", -40)
    s.line(fx, fy, mx, my - 2, arrow=True)
    s.line(*bottom("libs", 40), top("mnist", 40)[0], top("mnist", 40)[1] - 2, arrow=True)
    ex, ey = bottom("ext")
    mx, my = bottom("mnist")
    low = ey + 22
    s.line(ex, ey, ex, low)
    s.line(ex, low, mx, low)
    s.line(mx, low, mx, my + 2, arrow=True)
    y = 440
    s.text(40, y, "Dashed: optional, read when you need it. Everything from the Memory model on also builds "
           "on it.", 12, anchor="start", fill=MUTED)
