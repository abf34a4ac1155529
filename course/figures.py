"""The course's figures, drawn as SVG by code: `python -m course.figures` writes docs/assets/figures/*.svg.

tests/test_figures.py checks that the committed files are exactly what this script produces, so a
figure is changed here, never by hand. Each figure is a light card (its own opaque background) with
dark text and mid-tone fills: it reads the same in the light and dark palettes and in print, whatever
the page around it. Hardware figures are the H100 SXM's from NVIDIA's Hopper architecture whitepaper
and the H100 datasheet, and say so; no measured number is drawn (those come from the GPU record).
course/svg.py writes the SVG (Svg and the palette), for these figures and for the site's charts.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from .svg import (BLUE, CARD, GREEN, GREY, INK, MUTED, ORANGE, PURPLE, RED, STRONG_BLUE,  # noqa: F401
                  STRONG_GREEN, STRONG_RED, Svg)

OUT = Path(__file__).resolve().parent.parent / "docs" / "assets" / "figures"


def h100_sm() -> str:
    s = Svg(760, 560, "One streaming multiprocessor (SM) of the H100, after NVIDIA's Hopper whitepaper")
    s.heading("One SM of the H100 (Hopper, compute capability 9.0); the H100 SXM has 132")
    s.rect(20, 40, 720, 470, fill=CARD, width=1.5)
    s.box(40, 52, 680, 26, "L1 instruction cache", GREY)
    pw, ph = 330, 180  # the four partitions, a 2 x 2 grid
    for i in range(4):
        x = 40 + (i % 2) * (pw + 20)
        y = 88 + (i // 2) * (ph + 10)
        s.rect(x, y, pw, ph, fill="#f7f9fc", width=1.2)
        s.text(x + 8, y + 16, f"Partition {i}", 12, anchor="start", weight="bold")
        s.box(x + 100, y + 5, 222, 18, "L0 instruction cache", GREY, size=11)
        s.box(x + 8, y + 28, 314, 20, "Warp scheduler (one warp's instruction per clock)", ORANGE, size=11)
        s.box(x + 8, y + 52, 314, 24, "Register file: 16,384 x 32-bit (64 KB)", BLUE, size=11)
        s.box(x + 8, y + 80, 74, 44, "INT32", GREEN, size=11, sub="x16")
        s.box(x + 86, y + 80, 74, 44, "FP32", GREEN, size=11, sub="x32")
        s.box(x + 164, y + 80, 74, 44, "FP64", GREEN, size=11, sub="x16")
        s.box(x + 242, y + 80, 80, 44, "Tensor core", PURPLE, size=11, sub="4th gen")
        s.box(x + 8, y + 130, 232, 22, "LD/ST units (loads and stores)", GREY, size=11)
        s.box(x + 244, y + 130, 78, 22, "SFU", GREY, size=11)
        s.text(x + pw / 2, y + 170, "up to 16 resident warps scheduled here", 10, fill=MUTED)
    s.box(40, 466, 300, 34, "Tensor Memory Accelerator (TMA)", PURPLE, size=12)
    s.box(350, 466, 370, 34, "256 KB L1 data cache / shared memory", BLUE, size=12, weight="bold")
    s.text(380, 532, "Per SM: 65,536 registers, up to 228 KB of the 256 KB as shared memory, up to 64 resident warps.",
           11, fill=MUTED)
    s.caption(550, "Datasheet facts: NVIDIA H100 Tensor Core GPU Architecture whitepaper.")
    return s.render()


def memory_hierarchy() -> str:
    s = Svg(760, 420, "The H100's memory hierarchy, from registers to host memory, with datasheet sizes")
    s.heading("Memory hierarchy of the H100 SXM: smaller and faster at the top")
    levels = [
        ("Registers", "private to a thread", "64K x 32-bit per SM (256 KB)", BLUE),
        ("Shared memory / L1 cache", "shared by a block, on the SM", "256 KB per SM, up to 228 KB shared", BLUE),
        ("L2 cache", "shared by all 132 SMs", "50 MB", GREEN),
        ("Global memory (HBM3)", "every thread, and the host by copies", "80 GB, 3.35 TB/s (datasheet)", ORANGE),
        ("Host memory", "across PCIe, from the CPU side", "the CPU's DRAM", GREY),
    ]
    top, step = 46, 66
    for i, (name, who, size, fill) in enumerate(levels):
        inset = 150 - i * 32
        x, w = 40 + inset, 680 - 2 * inset
        y = top + i * step
        s.rect(x, y, w, step - 10, fill=fill, width=1.2)
        s.text(380, y + 22, name, 14, weight="bold")
        s.text(380, y + 42, f"{who}; {size}", 12, fill=INK)
    s.line(28, top + 6, 28, top + 5 * step - 14, arrow=True)
    s.text(20, top + 5 * step / 2, "slower, larger", 11, fill=MUTED, anchor="middle")
    s.items[-1] = s.items[-1].replace("<text ", f'<text transform="rotate(-90 20 {top + 5 * step / 2:g})" ')
    s.caption(400, "Sizes and the HBM3 bandwidth are datasheet figures (H100 SXM); measured bandwidths "
               "are on the pages' results tables.")
    return s.render()


def thread_hierarchy() -> str:
    s = Svg(760, 330, "Threads are grouped into warps of 32, warps into blocks, blocks into a grid; "
                      "each block runs on one SM")
    s.heading("Threads, warps, blocks, grid, SMs")
    # A warp: 32 threads.
    s.text(90, 56, "warp = 32 threads", 12, weight="bold")
    for t in range(32):
        s.rect(20 + (t % 8) * 17, 66 + (t // 8) * 17, 14, 14, fill=GREEN, rx=2, width=0.8)
    s.line(165, 100, 200, 100, arrow=True)
    # A block: 4 warps.
    s.text(290, 56, "block = 4 warps (128 threads)", 12, weight="bold")
    s.rect(205, 64, 170, 82, fill=CARD, width=1.2)
    for w in range(4):
        s.box(212, 70 + w * 18, 156, 15, f"warp {w}", GREEN, size=10)
    s.text(290, 164, "shares shared memory, can", 11, fill=MUTED)
    s.text(290, 178, "__syncthreads()", 11, fill=MUTED)
    s.line(380, 100, 415, 100, arrow=True)
    # A grid: 3 x 2 blocks.
    s.text(560, 56, "grid = every block of one launch", 12, weight="bold")
    for b in range(6):
        bx, by = 420 + (b % 3) * 96, 66 + (b // 3) * 44
        s.box(bx, by, 88, 38, f"block ({b % 3},{b // 3})", BLUE, size=11)
    # SMs.
    s.text(380, 212, "The hardware hands each block to one SM; an SM runs several blocks at once, "
           "as its registers and shared memory allow", 12)
    for m in range(4):
        x = 60 + m * 170
        s.rect(x, 226, 150, 64, fill=ORANGE, width=1.2)
        s.text(x + 75, 244, f"SM {m}", 12, weight="bold")
        held = [b for b in range(6) if b % 4 == m]
        for k, b in enumerate(held):
            s.box(x + 8 + k * 70, 252, 64, 28, f"block ({b % 3},{b // 3})", BLUE, size=10)
    s.caption(314, "Blocks run in any order and never wait for one another; the warps of a block issue "
               "instructions independently.")
    return s.render()


def grid_over_matrix() -> str:
    s = Svg(760, 400, "A grid of 16 x 16 blocks covering a 70 x 50 matrix: the last column and row of "
                      "blocks stick out past the matrix, so their outside threads must do nothing")
    s.heading("A grid of 16 x 16 blocks covering a matrix of 50 rows x 70 columns")
    cell = 4  # pixels per element
    ox, oy = 60, 60
    cols, rows, b = 70, 50, 16
    gx, gy = math.ceil(cols / b), math.ceil(rows / b)
    for by in range(gy):
        for bx in range(gx):
            x, y = ox + bx * b * cell, oy + by * b * cell
            partial = (bx + 1) * b > cols or (by + 1) * b > rows
            s.rect(x, y, b * cell, b * cell, fill=ORANGE if partial else BLUE, width=1.0, rx=0)
            s.text(x + b * cell / 2, y + b * cell / 2 + 4, f"({bx},{by})", 11)
    s.rect(ox, oy, cols * cell, rows * cell, fill="none", stroke=STRONG_RED, width=2.5, rx=0)
    s.text(ox + cols * cell / 2, oy - 8, "matrix: 70 columns (x)", 12, fill=STRONG_RED, weight="bold")
    s.text(ox - 10, oy + rows * cell / 2, "50 rows (y)", 12, fill=STRONG_RED, weight="bold", anchor="end")
    s.items[-1] = s.items[-1].replace("<text ", f'<text transform="rotate(-90 {ox - 14} {oy + rows * cell / 2})" ')
    s.items[-1] = s.items[-1].replace('text-anchor="end"', 'text-anchor="middle"')
    lx = ox + gx * b * cell + 30
    s.text(lx, 80, "gridDim = (5, 4): ceil(70/16), ceil(50/16)", 12, anchor="start")
    s.text(lx, 100, "blockDim = (16, 16)", 12, anchor="start")
    s.rect(lx, 120, 16, 16, fill=BLUE, rx=0)
    s.text(lx + 24, 133, "block wholly inside the matrix", 12, anchor="start")
    s.rect(lx, 146, 16, 16, fill=ORANGE, rx=0)
    s.text(lx + 24, 159, "boundary block: partly outside", 12, anchor="start")
    s.text(lx, 196, "col = blockIdx.x * blockDim.x + threadIdx.x", 11, anchor="start", fill=INK)
    s.text(lx, 214, "row = blockIdx.y * blockDim.y + threadIdx.y", 11, anchor="start", fill=INK)
    s.text(lx, 238, "if (row < rows && col < cols) { ... }", 11, anchor="start", weight="bold")
    s.text(lx, 256, "keeps the outside threads from", 11, anchor="start", fill=MUTED)
    s.text(lx, 272, "reading or writing past the edge", 11, anchor="start", fill=MUTED)
    s.caption(380, "80 x 64 threads are launched for 70 x 50 elements: the orange blocks' threads past "
               "the red edge must skip their work.")
    return s.render()


def coalescing() -> str:
    s = Svg(760, 400, "A warp's 32 threads reading consecutive 4-byte floats touch one 128-byte segment; "
                      "reading with a stride of 32 floats touches 32 segments")
    s.heading("How a warp reads global memory: 32 threads, 4-byte floats, 32-byte sectors")

    def row(y, stride, title, verdict, colour):
        s.text(40, y, title, 13, anchor="start", weight="bold")
        tx0, tw = 84, 19.5
        for t in range(32):
            s.rect(tx0 + t * tw, y + 10, tw - 3, 16, fill=GREEN, rx=2, width=0.6)
        s.text(tx0 - 6, y + 23, "threads", 10, anchor="end", fill=MUTED)
        my = y + 84
        if stride == 1:
            for seg in range(4):
                s.rect(tx0 + seg * 8 * tw, my, 8 * tw - 3, 22, fill=BLUE, width=1.0, rx=2)
                s.text(tx0 + seg * 8 * tw + 4 * tw, my + 15, f"sector {seg}: 32 B", 10)
            for t in range(32):
                s.line(tx0 + t * tw + tw / 2 - 1.5, y + 27, tx0 + t * tw + tw / 2 - 1.5, my - 1, stroke=STRONG_BLUE,
                       width=0.8)
            s.text(tx0 + 16 * tw, my + 40, "one 128-byte segment (4 sectors) serves the whole warp", 11, fill=MUTED)
        else:
            for k in range(8):
                x = tx0 + k * 76
                s.rect(x, my, 70, 22, fill=RED, width=1.0, rx=2)
                s.text(x + 35, my + 15, f"line {k}", 10)
            s.text(tx0 + 8 * 76 + 4, my + 15, "...", 14, anchor="start")
            for t in range(32):
                k = min(t, 8)
                tx = tx0 + t * tw + tw / 2 - 1.5
                if t < 8:
                    s.line(tx, y + 27, tx0 + k * 76 + 10, my - 1, stroke=STRONG_RED, width=0.8)
            s.text(tx0 + 16 * tw, my + 40, "every thread lands in its own 128-byte line: 32 sectors fetched, "
                   "4 bytes of each used", 11, fill=MUTED)
        s.text(720, y, verdict, 12, anchor="end", fill=colour, weight="bold")

    row(60, 1, "a[threadIdx.x]  (stride 1)", "128 B moved for 128 B used", STRONG_GREEN)
    row(220, 32, "a[32 * threadIdx.x]  (stride 32 floats = 128 B)", "1024 B moved for 128 B used", STRONG_RED)
    s.caption(388, "Memory moves in 32-byte sectors; the load of a warp costs as many sectors as its "
               "addresses touch.")
    return s.render()


def bank_conflicts() -> str:
    s = Svg(760, 420, "Shared-memory bank conflicts: 32 banks of 4-byte words; stride 1 hits 32 banks, "
                      "stride 2 hits 16 banks twice each, stride 32 hits one bank 32 times, padding "
                      "a 32-wide tile to 33 spreads a column over all 32 banks")
    s.heading("Shared memory: 32 banks, one 4-byte word per bank per clock")
    cases = [
        ("stride 1: s[threadIdx.x]", 1, 0, "no conflict: 1 pass", STRONG_GREEN),
        ("stride 2: s[2 * threadIdx.x]", 2, 0, "2-way conflict: 2 passes", STRONG_RED),
        ("stride 32: a column of float s[32][32]", 32, 0, "32-way conflict: 32 passes", STRONG_RED),
        ("padded: a column of float s[32][33]", 33, 0, "no conflict: 1 pass", STRONG_GREEN),
    ]
    x0, cw = 40, 21
    for i, (title, stride, _, verdict, colour) in enumerate(cases):
        y = 54 + i * 88
        s.text(x0, y, title, 13, anchor="start", weight="bold")
        s.text(720, y, verdict, 12, anchor="end", fill=colour, weight="bold")
        hits = [0] * 32
        for t in range(32):
            hits[(t * stride) % 32] += 1
        for bank in range(32):
            fill = GREY if hits[bank] == 0 else (GREEN if hits[bank] == 1 else RED)
            s.rect(x0 + bank * cw, y + 10, cw - 2, 34, fill=fill, rx=2, width=0.7)
            if hits[bank]:
                s.text(x0 + bank * cw + (cw - 2) / 2, y + 32, str(hits[bank]), 10)
        s.text(x0, y + 58, "bank 0", 10, anchor="start", fill=MUTED)
        s.text(x0 + 32 * cw - 2, y + 58, "bank 31", 10, anchor="end", fill=MUTED)
        s.text(x0 + 16 * cw, y + 58, "number in a bank = threads of the warp whose word lies in it", 10,
               fill=MUTED)
    s.caption(408, "Bank of a 4-byte word = (its index) mod 32. Threads reading the same word share it "
               "(a broadcast), which is no conflict.")
    return s.render()


def matmul_tiling() -> str:
    s = Svg(760, 440, "Tiled matrix multiplication: a block loads a tile of A and a tile of B into shared "
                      "memory, accumulates their product into its tile of C, and steps along K")
    s.heading("Tiling: each block computes one tile of C = A x B, stepping through K")
    # B above C, A to the left of C.
    ax, ay, aw, ah = 160, 200, 120, 180    # A: M x K (K = 4 tiles)
    bx, by, bw, bh = 320, 50, 240, 120     # B: K x N (the same K)
    cx, cy = 320, 200                       # C: M x N (bw x ah)
    t = 30
    s.rect(ax, ay, aw, ah, fill=GREY, width=1.2, rx=0)
    s.rect(bx, by, bw, bh, fill=GREY, width=1.2, rx=0)
    s.rect(cx, cy, bw, ah, fill=GREY, width=1.2, rx=0)
    s.text(ax + aw / 2, ay + ah + 18, "A (M x K)", 13, weight="bold")
    s.text(bx + bw + 8, by + bh / 2, "B (K x N)", 13, weight="bold", anchor="start")
    s.text(cx + bw + 8, cy + ah / 2, "C (M x N)", 13, weight="bold", anchor="start")
    row, col = 2, 3  # the C tile this block owns
    for k in range(aw // t):
        s.rect(ax + k * t, ay + row * t, t, t, fill=BLUE if k != 2 else STRONG_BLUE, width=0.8, rx=0)
    for k in range(bh // t):
        s.rect(bx + col * t, by + k * t, t, t, fill=ORANGE if k != 2 else "#d9822b", width=0.8, rx=0)
    s.rect(cx + col * t, cy + row * t, t, t, fill=GREEN, stroke=STRONG_GREEN, width=2.5, rx=0)
    s.line(ax + 2 * t + t / 2, ay + row * t - 2, ax + 2 * t + t / 2, ay - 20, dash="3,3")
    s.text(ax + 2 * t + t / 2 - 4, ay - 24, "tile k of A's row strip", 11, anchor="end", fill=MUTED)
    s.line(bx - 2, by + 2 * t + t / 2, bx - 40, by + 2 * t + t / 2, dash="3,3")
    s.text(bx - 44, by + 2 * t + t / 2 - 6, "tile k of B's column strip", 11, anchor="end", fill=MUTED)
    s.line(ax + aw, ay + row * t + t / 2, cx + col * t - 2, cy + row * t + t / 2, stroke=STRONG_BLUE, arrow=True)
    s.line(bx + col * t + t / 2, by + bh, bx + col * t + t / 2, cy + row * t - 2, stroke="#b36b1f", arrow=True)
    s.text(580, 150, "for each k:", 12, anchor="start", weight="bold")
    s.text(580, 168, "load both tiles to shared", 11, anchor="start")
    s.text(580, 184, "__syncthreads()", 11, anchor="start")
    s.text(580, 200, "C tile += A tile x B tile", 11, anchor="start")
    s.text(580, 216, "__syncthreads()", 11, anchor="start")
    s.caption(428, "A block reads each element of its strips of A and B from global memory once; its threads "
               "then reuse it from shared memory.")
    return s.render()


def online_softmax() -> str:
    s = Svg(760, 380, "The online softmax: one pass over a row keeps a running maximum m and a running sum d "
                      "of exp(x - m); when a chunk raises the maximum, the sum so far is rescaled")
    s.heading("Online softmax: a running maximum m and a running sum d, one pass over the row")
    chunks = ["chunk 1", "chunk 2", "chunk 3"]
    for i, c in enumerate(chunks):
        x = 60 + i * 220
        s.rect(x, 50, 200, 34, fill=BLUE, width=1.0)
        for k in range(1, 8):
            s.line(x + k * 25, 50, x + k * 25, 84, stroke=MUTED, width=0.5)
        s.text(x + 100, 104, c, 12, weight="bold")
    s.text(40, 72, "x", 14, anchor="end", italic=True)
    for i in range(3):
        x = 60 + i * 220
        s.line(x + 100, 110, x + 100, 142, arrow=True)
        s.rect(x, 146, 200, 108, fill=GREEN if i else GREY, width=1.2)
        s.text(x + 100, 166, f"after chunk {i + 1}", 12, weight="bold")
        s.text(x + 100, 190, "m' = max(m, max of chunk)", 11)
        s.text(x + 100, 210, "d' = d * exp(m - m')", 11)
        s.text(x + 100, 228, "+ sum of exp(x - m') over chunk", 11)
        s.text(x + 100, 246, "(start: m = -inf, d = 0)" if i == 0 else "(rescale only if m grew)", 10, fill=MUTED)
        if i < 2:
            s.line(x + 202, 200, x + 218, 200, arrow=True)
    s.rect(60, 278, 640, 46, fill=ORANGE, width=1.2)
    s.text(380, 298, "Then one more pass writes y = exp(x - m) / d: two passes over memory instead of three", 12,
           weight="bold")
    s.text(380, 315, "(max, then sum, then write). A row that is all -inf keeps m = -inf: guard it, "
           "or exp(-inf - (-inf)) is NaN.", 11)
    s.caption(360, "Merging two partial states (m1, d1) and (m2, d2): m = max(m1, m2), "
               "d = d1 * exp(m1 - m) + d2 * exp(m2 - m).")
    return s.render()


def _grid(s, x, y, w, h, cols, rows, stroke=MUTED, width=0.5):
    """Thin lines dividing the rectangle (x, y, w, h) into cols x rows cells."""
    for c in range(1, cols):
        s.line(x + c * w / cols, y, x + c * w / cols, y + h, stroke=stroke, width=width)
    for r in range(1, rows):
        s.line(x, y + r * h / rows, x + w, y + r * h / rows, stroke=stroke, width=width)


def sgemm_register_blocking() -> str:
    s = Svg(760, 450, "v5, 2D register blocking: 256 threads each own an 8 x 8 tile of the block's 128 x 128 "
                      "tile of C; for each k a thread loads 8 values of A from a column of As and 8 of B from "
                      "a row of Bs into registers and does their 64 multiply-adds, an outer product")
    s.text(380, 26, "v5: each thread keeps an 8 x 8 tile of C in registers (BM = BN = 128, BK = 8, TM = TN = 8)",
           14, weight="bold")
    # The block tile of C, 128 x 128 drawn 256 px: one thread tile (8 x 8) is 16 px.
    cx, cy, side, bk = 90, 110, 240, 48
    trow, tcol, k = 5, 9, 3
    cell = side / 16
    s.rect(cx, cy - bk - 12, side, bk, fill=ORANGE, rx=0)                    # Bs: BK x BN
    _grid(s, cx, cy - bk - 12, side, bk, 1, 8)
    s.rect(cx + tcol * cell, cy - bk - 12 + k * bk / 8, cell, bk / 8, fill="#d9822b", rx=0, width=1.2)
    s.text(cx + side + 8, cy - bk / 2 - 8, "Bs [BK][BN]", 12, anchor="start", weight="bold")
    s.rect(cx - bk - 12, cy, bk, side, fill=BLUE, rx=0)                      # As: BM x BK
    _grid(s, cx - bk - 12, cy, bk, side, 8, 1)
    s.rect(cx - bk - 12 + k * bk / 8, cy + trow * cell, bk / 8, cell, fill=STRONG_BLUE, rx=0, width=1.2)
    s.text(cx - bk / 2 - 12, cy + side + 18, "As [BM][BK]", 12, weight="bold")
    s.rect(cx, cy, side, side, fill=GREY, rx=0, width=1.2)
    _grid(s, cx, cy, side, side, 16, 16)
    s.rect(cx + tcol * cell, cy + trow * cell, cell, cell, fill=GREEN, stroke=STRONG_GREEN, width=2.5, rx=0)
    s.text(cx + side / 2, cy + side + 18, "C block tile: 16 x 16 thread tiles", 12, weight="bold")
    s.text(cx + side / 2, cy + side + 36, "thread tid: trow = tid / 16, tcol = tid % 16", 12)
    # One thread's registers: a_reg (column), b_reg (row), acc (8 x 8), their outer product.
    rx0, ry0, r = 500, 130, 22
    s.text(rx0 + 4 * r, 72, "one thread, one k", 13, weight="bold")
    s.rect(rx0, ry0 - r - 10, 8 * r, r, fill=ORANGE, rx=0)
    _grid(s, rx0, ry0 - r - 10, 8 * r, r, 8, 1)
    s.text(rx0 + 4 * r, ry0 - r - 16, "b_reg[8] = Bs[k][tcol * 8 + j]", 12)
    s.rect(rx0 - r - 10, ry0, r, 8 * r, fill=BLUE, rx=0)
    _grid(s, rx0 - r - 10, ry0, r, 8 * r, 1, 8)
    s.text(rx0 - r - 14, ry0 + 8 * r + 18, "a_reg[8] = As[trow * 8 + i][k]", 12, anchor="start")
    s.rect(rx0, ry0, 8 * r, 8 * r, fill=GREEN, rx=0)
    _grid(s, rx0, ry0, 8 * r, 8 * r, 8, 8)
    s.text(rx0 - r - 14, ry0 + 8 * r + 36, "acc[8][8] += a_reg[i] * b_reg[j]", 12, anchor="start")
    s.text(rx0 - r - 14, ry0 + 8 * r + 54, "16 loads, 64 multiply-adds", 12, anchor="start", weight="bold")
    s.line(cx + tcol * cell + cell, cy + trow * cell + cell / 2, rx0 - r - 14, ry0 + 4 * r, stroke=STRONG_GREEN,
           arrow=True, dash="4,3")
    s.text(380, 432, "The block walks K in steps of BK = 8: load As and Bs, __syncthreads(), eight outer "
           "products, __syncthreads().", 12, fill=MUTED, italic=True)
    return s.render()


def sgemm_warp_tiling() -> str:
    s = Svg(760, 470, "v7, warp tiling with the first configuration: a 128 x 128 block tile is four 64 x 64 "
                      "warp tiles; a warp covers its tile in four passes of 64 x 16, each pass 32 threads of "
                      "8 x 4 results; per k a thread loads 8 floats of As and 16 of Bs and updates 8 x 16 "
                      "accumulators")
    s.text(380, 26, "v7: block tile, warp tiles, thread tiles (BM = BN = 128, WM = WN = 64, TM = 8, TN = 4)",
           14, weight="bold")
    # Panel 1: the block tile (128 px per 64 elements would be too big: 200 px for 128).
    bx, by, side, strip = 70, 120, 200, 30
    s.text(bx + side / 2, 56, "block: 4 warps (128 threads)", 13, weight="bold")
    s.rect(bx, by - strip - 10, side, strip, fill=ORANGE, rx=0)
    s.rect(bx + side / 2, by - strip - 10, side / 2, strip, fill="#d9822b", rx=0, width=1.2)
    s.text(bx + side / 2, by - strip - 18, "Bs: BK x BN", 12)
    s.rect(bx - strip - 10, by, strip, side, fill=BLUE, rx=0)
    s.rect(bx - strip - 10, by, strip, side / 2, fill=STRONG_BLUE, rx=0, width=1.2)
    s.text(bx - strip - 14, by + side / 4 + 4, "As", 12, anchor="end")
    for w in range(4):
        wr, wc = w // 2, w % 2
        fill = GREEN if w == 1 else GREY
        s.rect(bx + wc * side / 2, by + wr * side / 2, side / 2, side / 2, fill=fill, rx=0, width=1.2,
               stroke=STRONG_GREEN if w == 1 else INK)
        s.text(bx + wc * side / 2 + side / 4, by + wr * side / 2 + side / 4 + 4, f"warp {w}", 12)
        s.text(bx + wc * side / 2 + side / 4, by + wr * side / 2 + side / 4 + 20, f"({wr}, {wc})", 12)
    s.text(bx + side / 2, by + side + 18, "(wrow, wcol) = (warp / 2, warp % 2)", 12)
    s.text(bx + side / 2, by + side + 36, "As: BK x BM (k-major), BK = 16", 12)
    # Panel 2: warp 1's tile, 64 x 64 drawn 224 px: WNI = 4 passes of 64 x 16, 8 x 4 thread blocks each.
    wx, wy, ws = 330, 120, 224
    s.text(wx + ws / 2, 56, "warp tile 64 x 64: 4 passes", 13, weight="bold")
    s.line(bx + side, by, wx - 4, wy, stroke=STRONG_GREEN, dash="4,3")
    s.line(bx + side, by + side / 2, wx - 4, wy + ws, stroke=STRONG_GREEN, dash="4,3")
    pw = ws / 4
    for wn in range(4):
        s.rect(wx + wn * pw, wy, pw, ws, fill=GREEN, rx=0, width=1.2)
        _grid(s, wx + wn * pw, wy, pw, ws, 4, 8)
        s.rect(wx + wn * pw + 1 * pw / 4, wy + 2 * ws / 8, pw / 4, ws / 8, fill=PURPLE, stroke=INK, width=2, rx=0)
        s.text(wx + wn * pw + pw / 2, wy - 8, f"wn = {wn}", 12)
    s.text(wx + ws / 2, wy + ws + 18, "a pass: 64 x 16, 8 x 4 lanes of 8 x 4 each", 12)
    s.text(wx + ws / 2, wy + ws + 36, "lane 9: trow = 9 / 4 = 2, tcol = 9 % 4 = 1", 12)
    # Panel 3: lane 9's registers for one k.
    tx, ty, c = 614, 150, 7
    s.text(680, 56, "lane 9, one k", 13, weight="bold")
    s.rect(tx, ty - c - 12, 16 * c, c, fill=ORANGE, rx=0)
    _grid(s, tx, ty - c - 12, 16 * c, c, 4, 1, stroke=INK, width=1)
    s.text(tx + 8 * c, ty - c - 18, "b_reg[16]: 4 float4", 12)
    s.rect(tx - c - 8, ty, c, 8 * c, fill=BLUE, rx=0)
    s.text(tx - c - 12, ty + 4 * c + 4, "a_reg[8]", 12, anchor="end")
    s.rect(tx, ty, 16 * c, 8 * c, fill=PURPLE, rx=0)
    _grid(s, tx, ty, 16 * c, 8 * c, 4, 1, stroke=INK, width=1)
    s.text(tx + 8 * c, ty + 8 * c + 18, "acc[8][16]", 12)
    s.text(tx + 8 * c, ty + 8 * c + 34, "128 results", 12)
    s.text(tx + 8 * c, ty + 8 * c + 50, "24 loads, 128 FMAs", 12, weight="bold")
    # The reads, in the kernel's own indices.
    y0 = 406
    s.text(30, y0, "a_reg[i] = As[k * BM + wrow * WM + trow * TM + i]     (two float4 loads)", 12, anchor="start")
    s.text(30, y0 + 20, "b_reg[wn * TN + j] = Bs[k * BN + wcol * WN + wn * 16 + tcol * TN + j]     "
           "(a float4 a pass)", 12, anchor="start")
    s.text(380, y0 + 52, "A warp's lanes read As 8 floats apart and Bs 4 apart; equal addresses are broadcast.",
           12, fill=MUTED, italic=True)
    return s.render()


def flash_tile_loop() -> str:
    s = Svg(760, 470, "The FlashAttention v2 tile loop: a block of 4 warps holds 64 query rows of Q in "
                      "registers, 16 per warp; tiles of 64 keys and values stream through two shared-memory "
                      "stages; for each tile every warp updates its running maximum m, running sum l and "
                      "accumulator o, and divides o by l once at the end")
    s.text(380, 26, "The tile loop of flash v2: Q stays, K and V stream past it", 15, weight="bold")
    # Global memory: K and V of one head, tiles of 64 keys.
    gx, gy, tw = 300, 72, 48
    s.text(gx - 10, gy + 18, "K, V in global memory", 12, anchor="end", weight="bold")
    s.text(gx - 10, gy + 34, "(one head)", 12, anchor="end")
    for j in range(8):
        fill = "#d9822b" if j == 3 else (ORANGE if j < 3 else GREY)
        s.rect(gx + j * tw, gy, tw - 4, 40, fill=fill, rx=2, width=0.8)
        s.text(gx + j * tw + tw / 2 - 2, gy + 25, f"tile {j}" if j < 7 else "...", 12)
    s.text(gx + 4 * tw, gy - 10, "tiles of kBlockN = 64 keys (and their 64 values); n = 3 is in use", 12)
    # Shared memory: two stages.
    sx, sy = 300, 152
    s.rect(sx - 10, sy - 12, 390, 96, fill="#f7f9fc", width=1.0)
    s.text(sx, sy + 4, "shared memory: two stages (rows padded to d + 8)", 12, anchor="start", weight="bold")
    s.box(sx, sy + 16, 170, 52, "stage n & 1: tile n", ORANGE, size=12)
    s.box(sx + 200, sy + 16, 170, 52, "stage (n+1) & 1: tile n+1", GREY, size=12)
    s.text(sx + 85, sy + 62, "being read", 12, fill=MUTED)
    s.text(sx + 285, sy + 62, "cp.async landing", 12, fill=MUTED)
    s.line(gx + 3 * tw + 20, gy + 42, sx + 85, sy + 14, arrow=True)
    s.line(gx + 4 * tw + 20, gy + 42, sx + 285, sy + 14, arrow=True, dash="4,3")
    # The block: 4 warps, 16 query rows each, Q in registers.
    qx, qy = 40, 150
    s.text(qx + 95, qy - 22, "block: 64 query rows", 13, weight="bold")
    for w in range(4):
        s.box(qx, qy + w * 40, 190, 34, f"warp {w}: Q rows {16 * w}-{16 * w + 15}", BLUE, size=12)
    s.text(qx + 95, qy + 178, "Q loaded once into registers", 12)
    s.text(qx + 95, qy + 194, "(the mma's A-operand layout)", 12)
    # The update per tile, for one warp's 16 rows.
    ux, uy = 290, 268
    s.rect(ux, uy, 450, 140, fill=GREEN, width=1.2)
    s.text(ux + 12, uy + 20, "each warp, for tile n (its 16 rows x 64 keys):", 12, anchor="start", weight="bold")
    steps = ["S = Q K^T (masked scores: -inf)",
             "m' = max(m, row max of S);  alpha = exp2(m - m')",
             "P = exp2(S - m');  l = alpha * l + row sum of P",
             "o = alpha * o + P V   (P stays in registers)",
             "m = m'; then wait for tile n + 1"]
    for i, text in enumerate(steps):
        s.text(ux + 24, uy + 44 + i * 20, f"{i + 1}. {text}", 12, anchor="start")
    s.line(qx + 190, qy + 60, ux - 2, uy + 40, stroke=STRONG_BLUE, arrow=True)
    s.line(sx + 85, sy + 70, sx + 85, uy - 2, arrow=True)
    s.rect(40, 420, 700, 30, fill=ORANGE, width=1.0)
    s.text(390, 440, "After the last tile: O = o / l (one division per row) and logsumexp = m + ln l for the "
           "backward", 12)
    s.text(40, 372, "running, per row:", 12, anchor="start", weight="bold")
    s.text(40, 390, "m (max), l (sum), o (fp32)", 12, anchor="start")
    return s.render()


def hopper_pipeline() -> str:
    s = Svg(760, 540, "The warp-specialised Hopper GEMM (v2 to v5): a producer warpgroup's elected thread "
                      "waits on empty[s], sets the expected bytes on full[s] and issues TMA loads of A and B "
                      "into a ring of four shared-memory stages; two consumer warpgroups wait on full[s], "
                      "issue wgmma from the stage and arrive on empty[s] when done; k-step it uses stage "
                      "it % 4 with phase parity (it / 4) & 1")
    s.text(380, 26, "The producer/consumer ring: TMA fills stages, wgmma drains them (STAGES = 4)", 15,
           weight="bold")
    # Producer.
    s.box(40, 50, 680, 50, "Producer: warpgroup 0 (setmaxnreg.dec to 40); one elected thread",
          ORANGE, size=13, weight="bold", sub=None)
    s.text(380, 120, "for k-step it:  s = it % 4;  wait empty[s] (parity ((it / 4) & 1) ^ 1);  "
           "expect 48 KiB on full[s];  TMA A, B -> stage s", 12)
    # The ring of stages.
    y = 150
    for st in range(4):
        x = 40 + st * 175
        s.rect(x, y, 160, 150, fill="#f7f9fc", width=1.2)
        s.text(x + 80, y + 18, f"stage {st}", 13, weight="bold")
        s.box(x + 10, y + 28, 140, 28, "A: 128 x 64 bf16", BLUE, size=12)
        s.box(x + 10, y + 60, 140, 28, "B: 256 x 64 bf16", BLUE, size=12)
        s.box(x + 10, y + 98, 66, 36, f"full[{st}]", GREEN, size=12)
        s.box(x + 84, y + 98, 66, 36, f"empty[{st}]", RED, size=12)
        s.line(x + 80, 128, x + 80, y - 2, arrow=True, stroke="#b36b1f", width=1.5)
        s.line(x + 80, y + 150, x + 80, 318, stroke=STRONG_BLUE, width=1.5)
    s.line(120, 318, 645, 318, stroke=STRONG_BLUE, width=1.5)   # every stage feeds both consumers
    for x in (205, 555):
        s.line(x, 318, x, 338, arrow=True, stroke=STRONG_BLUE, width=1.5)
    # Consumers.
    s.box(40, 340, 330, 48, "Consumer: warpgroup 1, tile rows 0-63", PURPLE, size=13, weight="bold")
    s.box(390, 340, 330, 48, "Consumer: warpgroup 2, tile rows 64-127", PURPLE, size=13, weight="bold")
    lines = ["for k-step it:  wait full[s] (parity (it / 4) & 1);  4 x wgmma 64 x 256 x 16 from stage s;  commit;",
             "wgmma_wait<1>: the batch of it - 1 is done, so each warp arrives on empty[previous stage].",
             "setmaxnreg.inc to 232: the 64 x 256 fp32 accumulator is 128 registers a thread.",
             "Arrivals expected: full[s] 1 (the producer) plus the TMA's 48 KiB; empty[s] 8 (one per consumer warp).",
             "Phases: it = 0-3 use stages 0-3 in phase 0, it = 4-7 the same stages in phase 1, it = 8-11 phase 0 ..."]
    for i, text in enumerate(lines):
        s.text(40, 410 + i * 20, text, 12, anchor="start")
    s.text(380, 522, "The counter it runs on across tiles, never reset: the same slot and parity sequence "
           "in the producer and in the consumers.", 12, fill=MUTED, italic=True)
    return s.render()


def reduction_tree() -> str:
    s = Svg(760, 530, "Two ways a block of 256 threads sums its values: version 2 halves the active threads "
                      "eight times in shared memory (thread t < s adds partial[t + s], then a barrier); "
                      "version 3 sums each warp with five shuffle steps (offsets 16, 8, 4, 2, 1, all 32 "
                      "lanes active), writes 8 warp sums to shared memory, and warp 0 shuffles them")
    s.text(380, 26, "Reducing a block of 256 values: a tree in shared memory, or warp shuffles", 15,
           weight="bold")
    # Version 2: the first steps drawn for 16 of the slots, then the table of steps.
    s.text(40, 56, "Version 2: partial[t] += partial[t + s] for t < s, then __syncthreads()", 13,
           anchor="start", weight="bold")
    x0, cw, n = 40, 26, 16
    rows = [("load", n), ("s = 8", 8), ("s = 4", 4), ("s = 2", 2), ("s = 1", 1)]
    for r, (label, active) in enumerate(rows):
        y = 70 + r * 36
        s.text(x0 + n * cw + 10, y + 17, label if r == 0 else f"{label}: threads 0-{active - 1}" if active > 1
               else f"{label}: thread 0", 12, anchor="start")
        for t in range(n):
            live = t < active
            s.rect(x0 + t * cw, y, cw - 4, 22, fill=(BLUE if r == 0 else GREEN) if live else GREY, rx=2, width=0.7)
            if r == 0:
                s.text(x0 + t * cw + (cw - 4) / 2, y + 16, str(t), 12)
        if r:
            for t in range(active):
                s.line(x0 + (t + active) * cw + (cw - 4) / 2, y - 13, x0 + t * cw + (cw - 4) / 2 + 3, y - 1,
                       stroke=STRONG_GREEN, width=0.9)
    s.text(40, 270, "drawn for 16 slots; with 256: s = 128, 64, 32, 16, 8, 4, 2, 1, eight steps, each "
           "ending at a barrier,", 12, anchor="start")
    s.text(40, 288, "and the active threads halve each step (from s = 16 down, fewer than a warp's 32 "
           "are busy)", 12, anchor="start")
    # Version 3: warp shuffles (xor butterfly over 32 lanes), then warp 0 over the 8 warp sums.
    s.text(40, 328, "Version 3: v += __shfl_xor_sync(0xffffffff, v, offset), offset = 16, 8, 4, 2, 1", 13,
           anchor="start", weight="bold")
    lx, lw = 40, 19
    for r, off in enumerate([16, 8]):
        y = 346 + r * 44
        for lane in range(32):
            s.rect(lx + lane * lw, y, lw - 4, 18, fill=PURPLE, rx=2, width=0.6)
        for lane in range(0, 32, 1):
            partner = lane ^ off
            if lane < partner and lane < 4:
                s.line(lx + lane * lw + 8, y + 19, lx + partner * lw + 8, y + 42, stroke=STRONG_BLUE, width=0.8)
                s.line(lx + partner * lw + 8, y + 19, lx + lane * lw + 8, y + 42, stroke=STRONG_BLUE, width=0.8)
        s.text(lx + 32 * lw + 4, y + 14, f"offset {off}", 12, anchor="start")
    y = 346 + 2 * 44
    for lane in range(32):
        s.rect(lx + lane * lw, y, lw - 4, 18, fill=PURPLE, rx=2, width=0.6)
    s.text(lx + 32 * lw + 4, y + 14, "... 4, 2, 1", 12, anchor="start")
    s.text(40, 478, "Every lane of every step is active: after 5 steps each lane holds its warp's sum. Lane 0 "
           "of the 8 warps", 12, anchor="start")
    s.text(40, 496, "writes warp_sums[warp], one __syncthreads(), then warp 0 shuffles the 8 sums the same way.",
           12, anchor="start")
    s.text(380, 514, "(exchanges drawn for lanes 0-3 and their partners only)", 12, fill=MUTED, italic=True)
    return s.render()


def matmul_naive() -> str:
    s = Svg(760, 420, "The naive matrix multiply: the thread at (row, col) reads row `row` of A and column "
                      "`col` of B and writes C[row][col]; a warp is 32 neighbouring columns of one row, so its "
                      "loads of B are 32 consecutive floats and its load of A is one float for all 32 lanes")
    s.text(380, 26, "matmul_naive: one thread per element of C, blocks of 32 x 8 threads", 15, weight="bold")
    ax, ay, aw, ah = 60, 160, 180, 150     # A: M x K
    bx, by, bw, bh = 290, 40, 240, 100     # B: K x N
    cx, cy = 290, 160                       # C: M x N
    row_y, col_x, l = 80, 130, 60           # where the highlighted row, column and step l fall
    s.rect(ax, ay, aw, ah, fill=GREY, rx=0, width=1.2)
    s.rect(bx, by, bw, bh, fill=GREY, rx=0, width=1.2)
    s.rect(cx, cy, bw, ah, fill=GREY, rx=0, width=1.2)
    s.text(ax + aw / 2, ay + ah + 20, "A (M x K)", 13, weight="bold")
    s.text(bx + bw + 10, by + bh / 2 + 4, "B (K x N)", 13, weight="bold", anchor="start")
    s.text(cx + bw / 2, cy + ah + 20, "C (M x N)", 13, weight="bold")
    s.rect(ax, ay + row_y, aw, 6, fill=BLUE, rx=0, width=0.8)                 # row `row` of A
    s.rect(ax + l, ay + row_y, 6, 6, fill=STRONG_BLUE, rx=0, width=0.8)      # A[row][l]
    s.rect(bx + col_x - 8, by, 38, bh, fill=ORANGE, rx=0, width=0.8)         # the warp's 32 columns of B
    s.rect(bx + col_x - 8, by + l * bh / aw, 38, 6, fill="#d9822b", rx=0, width=0.8)  # row l of them
    s.rect(cx + col_x - 8, cy + row_y, 38, 6, fill=GREEN, stroke=STRONG_GREEN, width=1.5, rx=0)  # the warp's C
    s.line(ax + aw + 4, ay + row_y + 3, cx + col_x - 12, cy + row_y + 3, stroke=STRONG_BLUE, arrow=True)
    s.line(bx + col_x + 11, by + bh + 4, bx + col_x + 11, cy + row_y - 4, stroke="#b36b1f", arrow=True)
    tx = 560
    s.text(tx, 190, "a warp: threadIdx.x 0-31", 12, anchor="start", weight="bold")
    s.text(tx, 208, "32 neighbouring columns", 12, anchor="start")
    s.text(tx, 224, "of one row of C", 12, anchor="start")
    s.text(tx, 250, "at each step l it loads", 12, anchor="start", weight="bold")
    s.text(tx, 268, "A[row * k + l]: one float,", 12, anchor="start")
    s.text(tx, 284, "the same for all 32 lanes", 12, anchor="start")
    s.text(tx, 302, "B[l * n + col]: 32", 12, anchor="start")
    s.text(tx, 318, "consecutive floats (coalesced)", 12, anchor="start")
    s.text(40, 370, "col = blockIdx.x * blockDim.x + threadIdx.x;   row = blockIdx.y * blockDim.y + threadIdx.y", 12,
           anchor="start")
    s.text(40, 390, "acc += A[row * k + l] * B[l * n + col] for l = 0 .. k - 1;   then C[row * n + col] = acc", 12,
           anchor="start")
    s.text(380, 412, "Every thread loads 2k floats for 2k operations; neighbours re-read what the others read.", 12,
           fill=MUTED, italic=True)
    return s.render()


def transpose_tile() -> str:
    s = Svg(760, 400, "Transpose through a shared-memory tile: a block reads a 32 x 32 tile of the input row by "
                      "row (coalesced) into tile[j][x], waits at a barrier, and writes the output tile at the "
                      "mirrored position row by row (coalesced), reading the shared tile by columns, tile[x][j]")
    s.text(380, 26, "Version 2: the transposing happens in shared memory, both global sides walk rows", 15,
           weight="bold")
    n, c = 8, 18  # drawn as 8 x 8 cells, each standing for 4 x 4 elements of the 32 x 32 tile
    def tile(x, y, fill, highlight_row=None, highlight_col=None, hl=BLUE):
        s.rect(x, y, n * c, n * c, fill=fill, rx=0, width=1.2)
        _grid(s, x, y, n * c, n * c, n, n)
        if highlight_row is not None:
            s.rect(x, y + highlight_row * c, n * c, c, fill=hl, rx=0, width=1.5)
        if highlight_col is not None:
            s.rect(x + highlight_col * c, y, c, n * c, fill=hl, rx=0, width=1.5)
    tile(40, 90, GREY, highlight_row=2)
    s.text(40 + n * c / 2, 76, "input tile of A", 13, weight="bold")
    s.text(40 + n * c / 2, 90 + n * c + 20, "rows r0 + j, columns c0 + x", 12)
    tile(300, 90, PURPLE, highlight_col=2, hl=ORANGE)
    s.rect(300, 90 + 2 * c, n * c, c, fill="none", stroke=STRONG_BLUE, width=2, rx=0)
    s.text(300 + n * c / 2, 76, "__shared__ float tile[32][32]", 13, weight="bold")
    s.text(300 + n * c / 2, 90 + n * c + 20, "written as tile[j][x] (a row),", 12)
    s.text(300 + n * c / 2, 90 + n * c + 36, "read as tile[x][j] (a column)", 12)
    tile(560, 90, GREY, highlight_row=2, hl=ORANGE)
    s.text(560 + n * c / 2, 76, "output tile of B", 13, weight="bold")
    s.text(560 + n * c / 2, 90 + n * c + 20, "rows c0 + j, columns r0 + x", 12)
    s.line(40 + n * c + 6, 90 + 2.5 * c, 300 - 6, 90 + 2.5 * c, stroke=STRONG_BLUE, arrow=True, width=1.5)
    s.text(250, 90 + 2.5 * c - 8, "read row", 12, anchor="end")
    s.line(300 + 2.5 * c, 90 + n * c + 44, 300 + 2.5 * c, 90 + n * c + 60, stroke="#b36b1f")
    s.line(300 + 2.5 * c, 90 + n * c + 60, 560 + n * c / 2, 90 + n * c + 60, stroke="#b36b1f")
    s.line(560 + n * c / 2, 90 + n * c + 60, 560 + n * c / 2, 90 + n * c + 28, stroke="#b36b1f", arrow=True)
    s.text(470, 90 + n * c + 76, "write column as a row", 12)
    s.text(40, 352, "__syncthreads() between the two phases: every element is in the tile before any is read.", 12,
           anchor="start")
    s.text(40, 372, "A warp is one row j of 32 lanes x; in phase 2 it reads column j of the tile: one bank, "
           "32 times.", 12, anchor="start")
    s.text(380, 392, "Drawn as 8 x 8 cells; each cell stands for 4 x 4 of the tile's 32 x 32 floats.", 12,
           fill=MUTED, italic=True)
    return s.render()


def attention_three_kernels() -> str:
    s = Svg(760, 440, "The three-kernel attention: a batched GEMM writes the fp32 scores S = Q K^T to global "
                      "memory, a kernel masks them in place, the softmax reads S and writes fp32 P, a kernel "
                      "converts P to bf16, and a second batched GEMM reads P and V and writes O; S and P are "
                      "seq x seq per head and go through global memory each time")
    s.text(380, 26, "Three kernels and two glue kernels: S and P pass between them through global memory", 15,
           weight="bold")
    y = 70
    s.box(40, y, 130, 50, "Q, K (bf16)", BLUE, size=13, weight="bold")
    steps = [("cuBLAS GEMM", "S = scale * Q K^T"), ("apply_mask", "S = -inf where hidden"),
             ("softmax_block", "P = softmax(S)"), ("to_bf16", "P in bf16"), ("cuBLAS GEMM", "O = P V")]
    data = [("S (fp32)", ORANGE), ("S (fp32)", ORANGE), ("P (fp32)", ORANGE), ("P (bf16)", ORANGE), ("O (bf16)", GREEN)]
    for i, ((kern, what), (d, fill)) in enumerate(zip(steps, data)):
        x = 40 + (i % 3) * 240 if i < 3 else 40 + (4 - i) * 240 + 240
        row = 0 if i < 3 else 1
        ky = 150 + row * 140
        s.box(x, ky, 200, 34, kern, PURPLE, size=13, weight="bold")
        s.text(x + 100, ky + 52, what, 12)
        s.box(x + 40, ky + 64, 120, 30, d, fill, size=12)
    s.line(105, y + 52, 140, 148, arrow=True)
    s.line(240, 167, 278, 167, arrow=True)      # GEMM -> mask
    s.line(480, 167, 518, 167, arrow=True)      # mask -> softmax
    s.line(620, 244, 620, 288, arrow=True)      # softmax -> to_bf16 (below)
    s.line(518, 307, 480, 307, arrow=True)      # to_bf16 -> GEMM
    s.box(40, 290, 200, 34, "V (bf16)", BLUE, size=13, weight="bold")
    s.line(240, 307, 278, 307, arrow=True)
    s.text(380, 412, "S and P hold seq x seq values for each of the batch x heads: they grow with the square of "
           "the sequence,", 12)
    s.text(380, 430, "while Q, K, V and O grow with it. A fused kernel never writes S or P.",
           12)
    return s.render()


def occupancy() -> str:
    s = Svg(760, 420, "How registers per thread limit the blocks of 256 threads on a Hopper SM: its 65,536 "
                      "registers hold 8 blocks at 32 registers a thread, 4 at 64, 2 at 128 and 1 at 255 "
                      "(rounded up to 256); 100 KiB of shared memory per block allows 2 blocks in 228 KiB")
    s.text(380, 26, "What fits on one Hopper SM: blocks of 256 threads (compute capability 9.0)", 15,
           weight="bold")
    x0, width, y = 272, 448, 62
    s.text(x0, y, "register file: 65,536 registers", 12, anchor="start", weight="bold")
    rows = [(32, 8), (64, 4), (128, 2), (255, 1)]
    for i, (r, blocks) in enumerate(rows):
        yy = 76 + i * 52
        per_block = -(-r // 8) * 8 * 256
        s.text(40, yy + 11, f"{r} registers a thread", 13, anchor="start", weight="bold")
        s.text(40, yy + 27, f"{per_block:,} a block: {blocks} block{'s' if blocks > 1 else ''}", 12, anchor="start")
        s.text(40, yy + 43, f"= {blocks * 8} of 64 warps ({blocks * 8 / 64:.3g} occupancy)".replace("0.125", "12.5%")
               .replace("0.25", "25%").replace("0.5", "50%").replace("(1 occ", "(100% occ"), 12, anchor="start")
        s.rect(x0, yy, width, 36, fill=GREY, rx=0, width=1.0)
        bw = width * per_block / 65536
        for b in range(blocks):
            s.rect(x0 + b * bw, yy, bw, 36, fill=BLUE if b % 2 == 0 else GREEN, rx=0, width=1.0)
    yy = 76 + 4 * 52 + 20
    s.text(x0, yy - 6, "shared memory: up to 228 KiB, 1 KiB reserved per block", 12, anchor="start", weight="bold")
    s.rect(x0, yy, width, 36, fill=GREY, rx=0, width=1.0)
    for b in range(2):
        s.rect(x0 + b * width * 101 / 228, yy, width * 101 / 228, 36, fill=ORANGE, rx=0, width=1.0)
    s.text(40, yy + 17, "100 KiB shared a block", 13, anchor="start", weight="bold")
    s.text(40, yy + 33, "2 blocks, whatever the registers", 12, anchor="start")
    s.text(380, 362, "A warp's registers are allocated in units of 256 (8 a thread), so r is rounded up to a "
           "multiple of 8;", 12)
    s.text(380, 380, "the threads (2,048), blocks (32) and shared memory limits apply too: the smallest wins.", 12)
    s.text(380, 404, "Limits from NVIDIA's H100 datasheet and the CUDA Programming Guide's table; "
           "nothing here is measured.", 12, fill=MUTED, italic=True)
    return s.render()


def row_column_major() -> str:
    s = Svg(760, 400, "One buffer of six floats read two ways: row-major as a 2 x 3 matrix, element (i, j) at "
                      "i * 3 + j, and column-major with leading dimension 3 as a 3 x 2 matrix, element (i, j) at "
                      "i + j * 3, which is the transpose; so cuBLAS, asked for C^T = B^T A^T with the operands "
                      "swapped, writes row-major C = A B")
    s.text(380, 26, "The same bytes, two layouts: a row-major matrix read column-major is its transpose", 15,
           weight="bold")
    bx, by, c = 200, 56, 60
    s.text(bx - 12, by + 26, "memory", 13, anchor="end", weight="bold")
    for k in range(6):
        s.box(bx + k * c, by, c - 4, 40, str(k), BLUE if k < 3 else GREEN, size=14)
    s.text(bx + 3 * c - 2, by + 58, "offsets 0 to 5 of one float buffer", 12)
    # Row-major 2 x 3.
    rx, ry = 80, 170
    s.text(rx + 1.5 * c, ry - 14, "row-major, 2 x 3, ld = 3", 13, weight="bold")
    for i in range(2):
        for j in range(3):
            s.box(rx + j * c, ry + i * 44, c - 4, 40, str(i * 3 + j), BLUE if i == 0 else GREEN, size=14)
    s.text(rx + 1.5 * c, ry + 112, "(i, j) at i * ld + j", 12)
    # Column-major 3 x 2.
    cx, cy = 500, 150
    s.text(cx + c, cy - 14, "column-major, 3 x 2, ld = 3", 13, weight="bold")
    for i in range(3):
        for j in range(2):
            s.box(cx + j * c, cy + i * 44, c - 4, 40, str(i + j * 3), BLUE if j == 0 else GREEN, size=14)
    s.text(cx + c, cy + 156, "(i, j) at i + j * ld: the transpose", 12)
    s.line(rx + 3 * c + 10, ry + 42, cx - 14, ry + 42, arrow=True)
    s.text((rx + 3 * c + cx) / 2, ry + 34, "read by cuBLAS", 12)
    s.rect(40, 330, 680, 52, fill=ORANGE, width=1.0)
    s.text(380, 351, "Row-major A (m x k), B (k x n) look like A^T and B^T to cuBLAS; asking for C^T = B^T A^T", 12)
    s.text(380, 369, "(operands swapped, n x m) writes C^T column-major, which is C = A B row-major.", 12)
    return s.render()


def grid_stride() -> str:
    s = Svg(760, 330, "A grid-stride loop drawn small: a grid of 2 blocks of 4 threads (stride 8) covers 21 "
                      "elements in three passes; thread t handles elements t, t + 8 and t + 16, and the last "
                      "pass stops at i < n")
    s.text(380, 26, "v2's grid-stride loop, drawn small: 2 blocks x 4 threads, stride = 8, n = 21", 15,
           weight="bold")
    n, G, c, x0 = 21, 8, 26, 70
    fills = [BLUE, GREEN]
    for p in range(3):
        y = 60 + p * 62
        s.text(x0 - 10, y + 20, f"pass {p}", 12, anchor="end", weight="bold")
        for i in range(24):
            x = x0 + i * c
            inside = i < n
            ours = p * G <= i < (p + 1) * G
            fill = (fills[(i % G) // 4] if ours else CARD) if inside else GREY
            s.rect(x, y, c - 3, 28, fill=fill, rx=2, width=0.8, dash=None if inside else "3,2")
            if ours:
                s.text(x + (c - 3) / 2, y + 19, str(i), 12)
        for t in range(G):
            i = p * G + t
            if i < n:
                s.text(x0 + i * c + (c - 3) / 2, y + 44, f"t{t}", 12, fill=MUTED)
    s.text(x0 + 21 * c, 60 + 2 * 62 + 44, "t5-t7: i >= n", 12, anchor="start", fill=MUTED)
    s.rect(x0, 262, 16, 16, fill=BLUE, rx=0)
    s.text(x0 + 24, 275, "block 0 (threads t0-t3)", 12, anchor="start")
    s.rect(x0 + 220, 262, 16, 16, fill=GREEN, rx=0)
    s.text(x0 + 244, 275, "block 1 (threads t4-t7)", 12, anchor="start")
    s.text(380, 310, "i starts at blockIdx.x * blockDim.x + threadIdx.x and steps by gridDim.x * blockDim.x: "
           "each pass is coalesced.", 12, fill=MUTED, italic=True)
    return s.render()


def histogram_atomics() -> str:
    s = Svg(760, 440, "Left: a lost update: two threads both load the count 5, both add one and both store 6, "
                      "so one of the two increments is lost. Right: privatisation: each block counts into its "
                      "own 256 bins in shared memory with shared-memory atomics, then adds its 256 totals to "
                      "the global histogram with 256 global atomics")
    s.text(380, 26, "Why bins[v]++ loses counts, and how a histogram avoids contention", 15, weight="bold")
    # Left: the race, as two columns of steps in time order.
    s.text(40, 60, "bins[v]++ from two threads", 13, anchor="start", weight="bold")
    s.text(110, 84, "thread A", 12, weight="bold")
    s.text(250, 84, "thread B", 12, weight="bold")
    steps = [("load 5", None), (None, "load 5"), ("add: 6", None), (None, "add: 6"), ("store 6", None),
             (None, "store 6")]
    for i, (a, b) in enumerate(steps):
        y = 96 + i * 34
        if a:
            s.box(50, y, 120, 26, a, BLUE, size=12)
        if b:
            s.box(190, y, 120, 26, b, GREEN, size=12)
    s.line(34, 100, 34, 96 + 6 * 34 - 8, arrow=True)
    s.text(34, 92, "time", 12)
    s.rect(50, 312, 260, 44, fill=RED, width=1.0)
    s.text(180, 330, "two increments, the count is 6:", 12)
    s.text(180, 348, "one is lost. atomicAdd prevents it", 12)
    # Right: privatisation.
    x0 = 370
    s.text(x0, 60, "privatised: atomics in shared memory", 13, anchor="start", weight="bold")
    for b in range(3):
        y = 76 + b * 78
        s.rect(x0, y, 230, 64, fill="#f7f9fc", width=1.0)
        s.text(x0 + 10, y + 18, f"block {b}: 256 threads", 12, anchor="start", weight="bold")
        s.box(x0 + 10, y + 28, 210, 28, "__shared__ local[256]", ORANGE, size=12)
        s.line(x0 + 232, y + 42, x0 + 276, 190, arrow=True)
    s.text(x0 + 115, 76 + 3 * 78 + 4, "...", 14)
    s.box(x0 + 280, 150, 90, 80, "bins[256]", GREEN, size=12, weight="bold")
    s.text(x0 + 325, 248, "global", 12)
    steps = ["1. zero local, __syncthreads()", "2. atomicAdd(&local[v], 1) per byte",
             "3. __syncthreads(), then 256 atomicAdds", "    of local[b] into bins[b], per block"]
    for i, t in enumerate(steps):
        s.text(x0, 338 + i * 18, t, 12, anchor="start")
    s.text(380, 424, "Shared-memory atomics are handled in the SM, and only one block's threads contend for "
           "each copy.", 12, fill=MUTED, italic=True)
    return s.render()


def async_copies() -> str:
    s = Svg(760, 430, "Left: a tile of 64 x 16 blurred outputs needs a 68 x 20 input tile, a halo of 2 pixels. "
                      "Right: three ways the input tile reaches shared memory: through each thread's registers "
                      "and a barrier; with cp.async, each thread's copies bypassing registers with several "
                      "stages in flight; with TMA, one thread handing the whole box to the copy engine and an "
                      "mbarrier counting the bytes")
    s.text(380, 26, "How a tile reaches shared memory: synchronous, cp.async, TMA", 15, weight="bold")
    # The tile: 68 x 20 input drawn 3 px per pixel... 204 x 60 is too flat; 2.6 px wide, 6 px tall.
    tx, ty, pw, ph = 40, 80, 2.7, 6
    s.text(tx + 68 * pw / 2, 64, "one tile (kRadius = 2)", 13, weight="bold")
    s.rect(tx, ty, 68 * pw, 20 * ph, fill=ORANGE, rx=0, width=1.2)
    s.rect(tx + 2 * pw, ty + 2 * ph, 64 * pw, 16 * ph, fill=GREEN, rx=0, width=1.2)
    s.text(tx + 68 * pw / 2, ty + 10 * ph + 5, "64 x 16 outputs", 12)
    s.text(tx + 68 * pw / 2, ty + 20 * ph + 18, "input 68 x 20: a 2-pixel halo", 12)
    s.text(tx + 68 * pw / 2, ty + 20 * ph + 36, "zero outside the image", 12)
    # The three paths.
    x0, rows = 260, [
        ("synchronous", ["global", "registers", "shared"], "every thread loads, stores, __syncthreads()", BLUE),
        ("cp.async", ["global", "shared"], "each thread's copies skip its registers; kStages buffers", GREEN),
        ("TMA", ["global", "copy engine", "shared"], "one thread issues the box; an mbarrier counts bytes", PURPLE),
    ]
    for i, (name, hops, note, fill) in enumerate(rows):
        y = 60 + i * 104
        s.text(x0, y + 14, name, 13, anchor="start", weight="bold")
        n = len(hops)
        bw = 110
        span = 460
        for j, h in enumerate(hops):
            x = x0 + (j * (span - bw) / (n - 1))
            s.box(x, y + 24, bw, 32, h, fill if h not in ("global",) else GREY, size=12)
            if j:
                px = x0 + ((j - 1) * (span - bw) / (n - 1)) + bw
                s.line(px + 2, y + 40, x - 2, y + 40, arrow=True)
        s.text(x0, y + 78, note, 12, anchor="start")
    s.text(380, 374, "Asynchronous copies let a block compute on one tile while the next tiles are on their "
           "way,", 12)
    s.text(380, 392, "instead of waiting at the barrier for its own loads.", 12)
    s.text(380, 418, "cp.async: compute capability 8.0 and newer; TMA: 9.0 and newer (CUDA C++ Programming Guide).",
           12, fill=MUTED, italic=True)
    return s.render()


def cluster_softmax() -> str:
    s = Svg(760, 420, "A long row split over a cluster of 8 blocks: block rank r keeps slice r of the row in "
                      "registers, reduces it to one maximum in its shared memory, and after cluster.sync() "
                      "every block reads all 8 partial maxima through distributed shared memory; the sum is "
                      "combined the same way, then each block writes its own slice")
    s.text(380, 26, "Softmax over a long row with a cluster of 8 blocks and distributed shared memory", 15,
           weight="bold")
    x0, bw = 40, 85
    s.text(x0, 58, "row blockIdx.y, split into 8 contiguous slices", 12, anchor="start", weight="bold")
    for r in range(8):
        x = x0 + r * bw
        s.box(x, 66, bw - 5, 30, f"slice {r}", BLUE, size=12)
        s.rect(x, 126, bw - 5, 100, fill="#f7f9fc", width=1.0)
        s.text(x + (bw - 5) / 2, 144, f"block {r}", 12, weight="bold")
        s.text(x + (bw - 5) / 2, 162, "registers", 12)
        s.box(x + 8, 176, bw - 21, 36, "mine", ORANGE, size=12)
        s.line(x + (bw - 5) / 2, 98, x + (bw - 5) / 2, 124, arrow=True)
    # DSMEM reads: block 2 reads every block's `mine`.
    reader = 2
    rx = x0 + reader * bw + (bw - 5) / 2
    for r in range(8):
        if r != reader:
            x = x0 + r * bw + (bw - 5) / 2
            s.line(x, 214, rx + (r - reader) * 3, 252, stroke=STRONG_BLUE, width=1.0)
    s.box(rx - 90, 254, 180, 30, "block 2 reads all 8", GREEN, size=12)
    s.text(rx + 100, 266, "map_shared_rank(mine, lane): lane r of a warp", 12, anchor="start")
    s.text(rx + 100, 282, "reads block r's mine through DSMEM", 12, anchor="start")
    steps = ["1. each block: the max of its slice -> mine, one float in its shared memory;  cluster.sync()",
             "2. every warp: cluster_allreduce<max> over the 8 blocks' mine: the row maximum",
             "3. the same for the sum of exp(x - max);  4. each block writes its own slice",
             "The last barrier is split (barrier_arrive, barrier_wait): no block leaves while others read it."]
    for i, t in enumerate(steps):
        s.text(40, 316 + i * 20, t, 12, anchor="start")
    s.text(380, 406, "Drawn for block 2; every block reads the 8 partials the same way.", 12, fill=MUTED,
           italic=True)
    return s.render()


def grid_sync() -> str:
    s = Svg(760, 400, "The cooperative reduction: every block of a grid that fits on the GPU at once sums its "
                      "chunk and writes partials[b]; at grid.sync() every block waits until all have arrived; "
                      "then block 0 adds the partials in block order and writes out, and the other blocks "
                      "return")
    s.text(380, 26, "One launch, one grid barrier: reduce_grid_sync", 15, weight="bold")
    nb, x0, bw = 6, 40, 114
    s.text(x0, 58, "phase 1: block b sums its chunk, thread 0 writes partials[b]", 12, anchor="start",
           weight="bold")
    for b in range(nb):
        x = x0 + b * bw
        label = f"block {b}" if b < nb - 1 else "block B - 1"
        s.box(x, 68, bw - 10, 30, f"chunk {b}" if b < nb - 1 else "chunk B - 1", BLUE, size=12)
        s.box(x, 116, bw - 10, 36, label, GREEN, size=12)
        s.line(x + (bw - 10) / 2, 100, x + (bw - 10) / 2, 114, arrow=True)
        s.box(x, 170, bw - 10, 28, f"partials[{b}]" if b < nb - 1 else "partials[B-1]", ORANGE, size=12)
        s.line(x + (bw - 10) / 2, 154, x + (bw - 10) / 2, 168, arrow=True)
    s.rect(x0, 214, nb * bw - 10, 24, fill=PURPLE, width=1.2)
    s.text(x0 + (nb * bw - 10) / 2, 231, "grid.sync(): every block waits here until all B have arrived", 12,
           weight="bold")
    s.text(x0, 268, "phase 2: block 0 adds partials[0 .. B-1] in block order and writes *out; the others return",
           12, anchor="start", weight="bold")
    s.box(x0, 280, bw - 10, 32, "block 0", GREEN, size=12)
    s.line(x0 + bw, 296, x0 + 2 * bw - 20, 296, arrow=True)
    s.box(x0 + 2 * bw - 16, 280, 80, 32, "*out", ORANGE, size=12)
    s.text(40, 344, "Legal only in a cooperative launch, which fails if B exceeds the blocks that fit on the "
           "GPU together", 12, anchor="start")
    s.text(40, 362, "(blocks per SM x SMs): a block still waiting for an SM could never reach the barrier.", 12,
           anchor="start")
    s.text(380, 388, "Drawn with six blocks; B is the grid's size, chosen from the kernel's occupancy.", 12,
           fill=MUTED, italic=True)
    return s.render()


def timing_ways() -> str:
    s = Svg(760, 420, "What each of the four timings covers, on a host lane and a GPU lane: the host clock "
                      "without synchronisation stops right after the launch call; the first synchronised launch "
                      "also includes loading the kernel's code and cold caches; a warm synchronised timing adds "
                      "launch latency and the time for the host to notice completion; two CUDA events bracket "
                      "the kernel on the GPU's own timeline")
    s.text(380, 26, "What each way of timing measures (schematic, not to scale)", 15, weight="bold")
    L, R = 170, 730
    def lane(y, name):
        s.text(40, y + 18, name, 13, anchor="start", weight="bold")
        s.line(L, y + 28, R, y + 28, stroke=MUTED)
    lane(56, "host")
    lane(116, "GPU")
    s.box(180, 62, 70, 22, "launch", ORANGE, size=12)
    s.box(620, 62, 100, 22, "sync returns", ORANGE, size=12)
    s.box(260, 122, 110, 22, "load code (1st)", GREY, size=12)
    s.box(380, 122, 200, 22, "kernel", BLUE, size=12, weight="bold")
    s.rect(374, 116, 4, 34, fill=STRONG_GREEN, stroke=STRONG_GREEN, rx=0)
    s.rect(582, 116, 4, 34, fill=STRONG_GREEN, stroke=STRONG_GREEN, rx=0)
    s.text(376, 166, "event", 12, fill=INK)
    s.text(584, 166, "event", 12, fill=INK)
    rows = [(1, "host clock, no sync", 180, 250, "the launch call only", STRONG_RED),
            (2, "host clock + sync, first launch", 180, 720, "launch, code loading, cold caches, kernel, sync",
             STRONG_RED),
            (3, "host clock + sync, warm", 180, 720, "launch latency + kernel + the host noticing",
             "#b36b1f"),
            (4, "CUDA events", 376, 584, "the kernel on the GPU's own clock", STRONG_GREEN)]
    for i, (k, name, a, b, what, colour) in enumerate(rows):
        y = 200 + i * 50
        s.text(40, y + 4, f"{k}. {name}", 12, anchor="start", weight="bold")
        s.line(a, y + 16, b, y + 16, stroke=colour, width=3)
        s.line(a, y + 10, a, y + 22, stroke=colour, width=2)
        s.line(b, y + 10, b, y + 22, stroke=colour, width=2)
        s.text(a, y + 36, what, 12, anchor="start")
    s.text(380, 408, "In 3 the load-code box is gone (warm), but the host's share remains around the kernel.",
           12, fill=MUTED, italic=True)
    return s.render()


def unified_memory() -> str:
    s = Svg(760, 400, "On-demand migration of managed memory: cudaMallocManaged reserves addresses; the host's "
                      "first writes place the pages in host memory; a kernel touching them faults, and the driver "
                      "migrates the pages to device memory while the faulting warps wait; when the host reads "
                      "them again they migrate back; cudaMemPrefetchAsync moves a range ahead in large transfers")
    s.text(380, 26, "Managed memory on Linux: pages move on demand, one fault at a time", 15, weight="bold")
    s.box(40, 50, 680, 30, "1. cudaMallocManaged: one range of virtual addresses, no physical pages yet", GREY,
          size=12)
    s.rect(40, 100, 300, 190, fill="#f7f9fc", width=1.2)
    s.text(190, 120, "host memory (CPU)", 13, weight="bold")
    s.rect(420, 100, 300, 190, fill="#f7f9fc", width=1.2)
    s.text(570, 120, "device memory (GPU)", 13, weight="bold")
    for k in range(8):
        s.rect(60 + k * 34, 136, 28, 28, fill=CARD if k < 3 else BLUE, rx=2, width=0.8,
               dash="3,2" if k < 3 else None)
        s.rect(440 + k * 34, 136, 28, 28, fill=GREEN if k < 3 else CARD, rx=2, width=0.8,
               dash=None if k < 3 else "3,2")
    s.text(190, 184, "2. the host writes first:", 12)
    s.text(190, 200, "the pages are placed here", 12)
    s.text(570, 184, "3. the kernel faults on a page:", 12)
    s.text(570, 200, "the warps wait, the driver migrates", 12)
    s.text(570, 216, "it (and some neighbours) and maps it", 12)
    s.line(342, 150, 418, 150, arrow=True, stroke=STRONG_BLUE, width=2)
    s.text(380, 142, "fault", 12)
    s.line(418, 250, 342, 250, arrow=True, stroke="#b36b1f", width=2)
    s.text(380, 242, "fault", 12)
    s.text(190, 262, "4. the host reads the result:", 12)
    s.text(190, 278, "the CPU faults, pages come back", 12)
    s.rect(40, 310, 680, 46, fill=ORANGE, width=1.0)
    s.text(380, 329, "cudaMemPrefetchAsync(ptr, bytes, location, flags, stream) moves a range before it is", 12)
    s.text(380, 347, "needed, in large transfers, instead of fault by fault inside the kernel.", 12)
    s.text(380, 386, "Windows, WSL and some Tegra devices have no on-demand migration: see the note on the page.",
           12, fill=MUTED, italic=True)
    return s.render()


def loop_order() -> str:
    s = Svg(760, 360, "Loop order on the CPU: in ijk the inner loop walks down a column of B, one float from each "
                      "row, so each cache line fetched delivers one useful float; in ikj the inner loop walks "
                      "along a row of B and a row of C, so every float of each cache line is used")
    s.text(380, 26, "The inner loop's walk through B, stored row-major", 15, weight="bold")
    def matrix(x, y, walk_row, title, verdict, colour):
        n, c = 12, 16
        s.text(x + n * c / 2, y - 12, title, 13, weight="bold")
        s.rect(x, y, n * c, n * c, fill=GREY, rx=0, width=1.2)
        for r in range(n):
            s.line(x, y + r * c, x + n * c, y + r * c, stroke=MUTED, width=0.4)
        if walk_row:
            s.rect(x, y + 3 * c, n * c, c, fill=GREEN, rx=0, width=1.0)
            s.line(x + 4, y + 3.5 * c, x + n * c - 4, y + 3.5 * c, arrow=True, stroke=STRONG_GREEN, width=1.5)
        else:
            for r in range(n):
                s.rect(x + 4 * c, y + r * c, 4 * c, c, fill=RED, rx=0, width=0.6)  # the line each float brings
            s.rect(x + 5 * c, y, c, n * c, fill=ORANGE, rx=0, width=1.2)
            s.line(x + 5.5 * c, y + 4, x + 5.5 * c, y + n * c - 4, arrow=True, stroke="#b36b1f", width=1.5)
        s.text(x + n * c / 2, y + n * c + 22, verdict, 12, fill=colour, weight="bold")
    matrix(80, 70, False, "ijk: inner loop over k", "a cache line fetched for every float", STRONG_RED)
    matrix(470, 70, True, "ikj: inner loop over j", "every float of each cache line used", STRONG_GREEN)
    s.text(176, 312, "B[k * N + j], k = 0, 1, 2 ...: N floats apart", 12)
    s.text(566, 312, "B[k * N + j] and C[i * N + j], j = 0, 1, 2 ...", 12)
    s.text(380, 346, "The same arithmetic in both; only the order in which memory is walked differs.", 12,
           fill=MUTED, italic=True)
    return s.render()


def l2_persistence() -> str:
    s = Svg(760, 380, "L2 persistence: the kernel streams x and out once while gathering from a small table; "
                      "without a set-aside the streaming data evicts the table from L2 and its reads go to "
                      "DRAM; with part of L2 set aside and an access policy window marking the table's "
                      "accesses persisting, the table stays in L2")
    s.text(380, 26, "Keeping a hot table in L2 while a large array streams past", 15, weight="bold")
    def panel(x, title, set_aside):
        s.text(x + 160, 58, title, 13, weight="bold")
        s.rect(x, 70, 320, 90, fill="#f7f9fc", width=1.2)
        s.text(x + 10, 88, "L2", 13, anchor="start", weight="bold")
        if set_aside:
            s.rect(x + 10, 96, 110, 56, fill=GREEN, width=1.0)
            s.text(x + 65, 120, "set-aside:", 12)
            s.text(x + 65, 138, "table (persisting)", 12)
            for k in range(5):
                s.rect(x + 130 + k * 36, 110, 30, 30, fill=BLUE, rx=2, width=0.8)
            s.text(x + 220, 104, "x, out lines come and go", 12)
        else:
            for k in range(8):
                s.rect(x + 10 + k * 38, 110, 32, 30, fill=BLUE if k != 3 else GREEN, rx=2, width=0.8)
            s.text(x + 160, 104, "x, out lines evict the table's", 12)
        s.rect(x, 210, 320, 44, fill=GREY, width=1.2)
        s.text(x + 160, 237, "DRAM (HBM): x, out, table", 12, weight="bold")
        s.line(x + 250, 208, x + 250, 162, arrow=True, stroke=STRONG_BLUE, width=1.5)
        s.text(x + 256, 190, "stream", 12, anchor="start")
        if set_aside:
            s.text(x + 65, 190, "table lines stay in L2", 12, fill=STRONG_GREEN, weight="bold")
        else:
            s.line(x + 80, 208, x + 80, 162, arrow=True, stroke=STRONG_RED, width=1.5)
            s.text(x + 86, 190, "table misses:", 12, anchor="start", fill=STRONG_RED, weight="bold")
            s.text(x + 86, 204, "32-byte sector for 4 bytes", 12, anchor="start", fill=STRONG_RED)
    panel(30, "normal accesses", False)
    panel(410, "set-aside + access policy window", True)
    s.text(40, 290, "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes): the set-aside, device-wide",
           12, anchor="start")
    s.text(40, 308, "cudaAccessPolicyWindow { base_ptr = table, num_bytes, hitRatio, hitProp = persisting }: "
           "per launch", 12, anchor="start")
    s.text(40, 326, "cudaCtxResetPersistingL2Cache(): persisting lines back to normal", 12, anchor="start")
    s.text(380, 362, "Available from compute capability 8.0; disabled in MIG mode (CUDA C++ Programming Guide 13.0).",
           12, fill=MUTED, italic=True)
    return s.render()


def flash_backward() -> str:
    s = Svg(760, 460, "The tensor-core backward (v2): a block of 8 warps owns a tile of 128 keys, K and V in "
                      "shared memory for the whole loop, each warp 16 keys with dK and dV in mma accumulators; "
                      "query tiles of 64 rows stream through with Q, dO, the logsumexp and delta; per tile each "
                      "warp recomputes P transposed, adds P^T dO to dV and dS^T Q to dK, and the block adds "
                      "dS K to an fp32 dQ buffer with atomicAdd")
    s.text(380, 26, "Backward v2: the keys stay, the queries stream (transposed to the forward)", 15,
           weight="bold")
    # Query tiles streaming.
    s.text(40, 60, "query tiles of kV2Rows = 64: Q, dO, logsumexp L, delta", 12, anchor="start", weight="bold")
    for i in range(6):
        fill = "#d9822b" if i == 2 else (ORANGE if i < 2 else GREY)
        s.box(40 + i * 80, 70, 72, 32, f"tile {i}" if i < 5 else "...", fill, size=12)
    s.line(40 + 2 * 80 + 36, 104, 300, 140, arrow=True)
    # The block.
    s.rect(40, 142, 420, 160, fill="#f7f9fc", width=1.2)
    s.text(50, 160, "block: 8 warps, keys j .. j + 127 (kV2Keys = 128)", 12, anchor="start", weight="bold")
    s.box(50, 170, 190, 30, "K_j, V_j in shared (once)", BLUE, size=12)
    s.box(250, 170, 200, 30, "Q, dO of the current tile", ORANGE, size=12)
    for w in range(8):
        s.box(50 + w * 50, 214, 44, 40, f"w{w}", GREEN, size=12)
    s.text(250, 274, "warp w: keys 16w .. 16w + 15; dK, dV in registers", 12)
    s.text(250, 292, "(fp32 mma accumulators) for the whole loop", 12)
    # Per tile, per warp.
    x = 480
    s.text(x, 160, "each warp, per query tile:", 12, anchor="start", weight="bold")
    steps = ["S^T = K_j Q^T (16 keys x 64 rows)", "P^T = exp(S^T scaled - L)", "dV += P^T dO",
             "dP^T = V_j dO^T", "dS^T = P^T o (dP^T - delta)", "dK += dS^T Q", "dS^T -> shared"]
    for i, t in enumerate(steps):
        s.text(x + 8, 180 + i * 18, f"{i + 1}. {t}", 12, anchor="start")
    s.rect(40, 330, 680, 50, fill=PURPLE, width=1.0)
    s.text(380, 350, "then the block: dQ of the tile += dS K_j, added to an fp32 buffer with atomicAdd", 12)
    s.text(380, 368, "(other blocks add their keys' parts); a last kernel scales it and rounds to bf16", 12)
    s.text(380, 410, "P and dS are rounded to bf16 before their products; a fully masked row (L = +inf) gives P = 0.",
           12)
    s.text(380, 440, "o: element-wise product. Tiles wholly before the block's first key are skipped under a "
           "causal mask.", 12, fill=MUTED, italic=True)
    return s.render()


def attention_shapes() -> str:
    s = Svg(760, 330, "The shapes of one attention head: Q, K and V are N x d; the scores S = Q K^T / sqrt(d) "
                      "and the probabilities P = softmax(S) are N x N; the output O = P V is N x d again")
    s.text(380, 26, "One head: the inputs and output are N x d, the scores in between N x N", 15, weight="bold")
    y, d, N = 70, 36, 150   # drawn widths: d columns, N rows
    def mat(x, w, h, name, sub, fill):
        s.rect(x, y, w, h, fill=fill, rx=0, width=1.2)
        s.text(x + w / 2, y + h + 20, name, 13, weight="bold")
        s.text(x + w / 2, y + h + 38, sub, 12)
    mat(40, d, N, "Q", "N x d", BLUE)
    s.text(96, y + N / 2 + 5, "x", 14)
    mat(110, N, d, "K^T", "d x N", BLUE)
    s.text(282, y + N / 2 + 5, "->", 14)
    mat(300, N, N, "S = Q K^T / sqrt(d)", "N x N, masked entries -inf", ORANGE)
    s.text(472, y + N / 2 + 5, "->", 14)
    mat(490, N, N, "P = softmax(S)", "N x N, softmax of each row", ORANGE)
    s.text(660, y + N / 2 + 5, "x V", 14)
    mat(690, d, N, "O = P V", "N x d", GREEN)
    s.text(380, 300, "Doubling N doubles Q, K, V and O but quadruples S and P: the fused kernels never store "
           "them.", 12, fill=MUTED, italic=True)
    return s.render()


def profiling_tools() -> str:
    s = Svg(760, 380, "The two NVIDIA profilers: Nsight Systems draws the whole program on one timeline, with "
                      "NVTX ranges, the CPU thread's API calls and the GPU's copies, kernels and gaps; Nsight "
                      "Compute takes one kernel launch from it and reports its throughputs against the peaks "
                      "(speed of light), its occupancy and where its warps stall")
    s.text(380, 26, "Timeline first (Nsight Systems), then one kernel in depth (Nsight Compute)", 15,
           weight="bold")
    s.rect(30, 44, 700, 168, fill="#f7f9fc", width=1.2)
    s.text(44, 64, "nsys: the whole program, one timeline (schematic)", 13, anchor="start", weight="bold")
    lanes = [("NVTX", 80), ("CPU thread", 116), ("GPU", 152)]
    for name, y in lanes:
        s.text(44, y + 16, name, 12, anchor="start", weight="bold")
        s.line(140, y + 24, 716, y + 24, stroke=MUTED, width=0.6)
    s.box(150, 80, 270, 22, "range \"setup\"", PURPLE, size=12)
    s.box(430, 80, 280, 22, "range \"compute\"", PURPLE, size=12)
    for x, w, label in ((150, 80, "malloc"), (240, 70, "memcpy"), (436, 58, "launch"), (500, 58, "launch"),
                        (620, 80, "sync")):
        s.box(x, 116, w, 22, label, ORANGE, size=12)
    s.box(250, 152, 120, 22, "copy H to D", GREY, size=12)
    s.box(452, 152, 60, 22, "k1", BLUE, size=12)
    s.box(530, 152, 120, 22, "k2", BLUE, size=12, weight="bold")
    s.text(521, 194, "gap", 12, fill=MUTED)
    s.rect(528, 150, 124, 26, fill="none", stroke=STRONG_RED, width=2, rx=3)
    s.line(590, 178, 390, 236, arrow=True, stroke=STRONG_RED, width=1.5)
    s.rect(30, 238, 700, 126, fill="#f7f9fc", width=1.2)
    s.text(44, 258, "ncu: one launch of k2, in detail", 13, anchor="start", weight="bold")
    for i, (name, what) in enumerate((("Speed Of Light", "each unit against its peak"),
                                      ("Occupancy", "resident warps, their limit"),
                                      ("Warp State", "what warps wait for"),
                                      ("Source Counters", "the same, per line"))):
        x = 44 + (i % 2) * 344
        y = 272 + (i // 2) * 44
        s.box(x, y, 130, 34, name, GREEN, size=12, weight="bold")
        s.text(x + 138, y + 22, what, 12, anchor="start")
    return s.render()


def host_device_copies() -> str:
    s = Svg(760, 360, "Three copies the bandwidth page times: from pageable host memory the driver first copies "
                      "into a pinned staging buffer and the GPU's copy engine reads that; from pinned memory the "
                      "copy engine reads directly across PCIe; a device-to-device copy reads and writes device "
                      "memory, so it moves twice the buffer's size")
    s.text(380, 26, "Pageable, pinned and device-to-device copies", 15, weight="bold")
    s.rect(30, 50, 300, 250, fill="#f7f9fc", width=1.2)
    s.text(180, 70, "host (CPU memory)", 13, weight="bold")
    s.rect(430, 50, 300, 250, fill="#f7f9fc", width=1.2)
    s.text(580, 70, "device (GPU memory)", 13, weight="bold")
    s.box(50, 84, 150, 40, "pageable (malloc)", GREY, size=12)
    s.box(50, 150, 150, 40, "pinned staging", ORANGE, size=12)
    s.line(125, 126, 125, 148, arrow=True)
    s.text(135, 141, "the driver copies", 12, anchor="start")
    s.box(50, 220, 190, 40, "pinned (cudaMallocHost)", ORANGE, size=12)
    s.box(450, 150, 120, 40, "copy engine", PURPLE, size=12)
    s.line(202, 170, 448, 170, arrow=True, stroke=STRONG_BLUE, width=1.5)
    s.line(242, 240, 448, 180, arrow=True, stroke=STRONG_BLUE, width=1.5)
    s.text(380, 160, "PCIe (DMA)", 12)
    s.box(590, 150, 120, 40, "buffer", BLUE, size=12)
    s.line(572, 170, 588, 170, arrow=True)
    s.box(590, 220, 120, 40, "copy of it", BLUE, size=12)
    s.line(650, 192, 650, 218, arrow=True, stroke=STRONG_GREEN, width=1.5)
    s.text(644, 210, "read + write", 12, anchor="end")
    s.text(380, 326, "A device-to-device copy of B bytes moves 2 x B bytes through device memory: the copy "
           "bandwidth counts both.", 12)
    s.text(380, 346, "Pinned memory is also what asynchronous copies need; pin what you transfer often.", 12,
           fill=MUTED, italic=True)
    return s.render()


def fat_binary() -> str:
    s = Svg(760, 380, "What the driver loads from a fat binary holding SASS for sm_75, sm_80 and sm_90 and PTX "
                      "for compute_90: a Turing GPU (7.5) runs the sm_75 SASS, an A100 (8.0) and an 8.6 or 8.9 "
                      "GPU the sm_80 SASS, an H100 (9.0) the sm_90 SASS, and a Blackwell GPU (10.0 or 12.0) "
                      "JIT-compiles the compute_90 PTX")
    s.text(380, 26, "One fat binary, many GPUs: matching SASS, or else the newest PTX, JIT-compiled", 15,
           weight="bold")
    s.rect(30, 50, 250, 270, fill="#f7f9fc", width=1.2)
    s.text(155, 70, "the binary", 13, weight="bold")
    images = [("SASS sm_75", BLUE, 86), ("SASS sm_80", BLUE, 146), ("SASS sm_90", BLUE, 206),
              ("PTX compute_90", ORANGE, 266)]
    for label, fill, y in images:
        s.box(50, y, 210, 40, label, fill, size=13, weight="bold")
    gpus = [("Turing (7.5): sm_75 SASS", 80, 86), ("A100 (8.0): sm_80 SASS", 126, 146),
            ("8.6, 8.9 (consumer): sm_80 SASS", 172, 146), ("H100, H200 (9.0): sm_90 SASS", 218, 206),
            ("Blackwell (10.0, 12.0): PTX, JIT", 272, 266)]
    for name, y, target in gpus:
        s.box(440, y, 290, 36, name, GREEN if "JIT" not in name else ORANGE, size=12)
        s.line(438, y + 18, 262, target + 20, arrow=True, stroke=STRONG_BLUE if "JIT" not in name else "#b36b1f",
               width=1.2)
    s.text(380, 340, "SASS runs on its own major version at the same or a higher minor; PTX runs on any GPU of "
           "at least its", 12)
    s.text(380, 358, "compute capability. Built with -gencode for sm_75, sm_80, sm_90 and compute_90 (page's "
           "example).", 12)
    return s.render()


def kernels_from_python() -> str:
    s = Svg(760, 330, "One kernel file, two compilers: transpose.cuh, reduction.cuh and softmax.cuh are included "
                      "by the C++ programs, which nvcc compiles, and compiled at run time by NVRTC through CuPy "
                      "in the Python program; cupy.from_dlpack gives CuPy a view of a PyTorch tensor's memory, "
                      "so the course's kernels and PyTorch's work on the same bytes, timed the same way")
    s.text(380, 26, "The chapter's kernels inside a PyTorch process: the same files, the same tensors", 15,
           weight="bold")
    s.rect(40, 60, 220, 60, fill=BLUE)
    s.text(150, 85, "transpose.cuh, reduction.cuh,", 12)
    s.text(150, 103, "softmax.cuh (include nothing)", 12)
    s.box(320, 50, 180, 36, "nvcc: C++ programs", GREY, size=12)
    s.box(320, 100, 180, 36, "NVRTC via CuPy", GREEN, size=12)
    s.line(262, 80, 318, 68, arrow=True)
    s.line(262, 96, 318, 118, arrow=True)
    s.text(510, 72, "the earlier pages' timings", 12, anchor="start")
    s.rect(40, 170, 680, 120, fill="#f7f9fc", width=1.2)
    s.text(56, 190, "one Python process", 13, anchor="start", weight="bold")
    s.box(60, 206, 200, 40, "course kernel (CuPy)", GREEN, size=12)
    s.box(500, 206, 200, 40, "PyTorch: eager, compiled", PURPLE, size=12)
    s.box(300, 206, 160, 40, "one tensor's memory", ORANGE, size=12, weight="bold")
    s.line(262, 226, 298, 226, arrow=True)
    s.line(498, 226, 462, 226, arrow=True)
    s.text(380, 270, "cupy.from_dlpack: a view, no copy", 12)
    s.line(410, 138, 160, 204, arrow=True, dash="4,3")
    s.text(380, 318, "All timed the same way, beside a copy of the same bytes; each PyTorch configuration is "
           "checked first.", 12, fill=MUTED, italic=True)
    return s.render()


def scan_and_cub() -> str:
    s = Svg(760, 360, "Top: reduce, inclusive scan and exclusive scan of the values 3 1 4 1 5 9 2 6: the sum "
                      "31; the running sums 3 4 8 9 14 23 25 31; and the same shifted right with a leading 0. "
                      "Bottom: CUB's two-phase call: first with a null temporary pointer, which only writes "
                      "the scratch size, then allocate, then the same call again to do the work")
    s.text(380, 26, "Reduce and scan, and CUB's two-phase call", 15, weight="bold")
    x = [3, 1, 4, 1, 5, 9, 2, 6]
    inc = [sum(x[:i + 1]) for i in range(8)]
    exc = [0] + inc[:-1]
    rows = [("x", x, BLUE), ("inclusive scan", inc, GREEN), ("exclusive scan", exc, GREEN)]
    for r, (name, vals, fill) in enumerate(rows):
        y = 52 + r * 44
        s.text(200, y + 20, name, 12, anchor="end", weight="bold")
        for i, v in enumerate(vals):
            s.box(212 + i * 44, y, 40, 30, str(v), fill, size=13)
    s.text(590, 72, "reduce: 31", 13, anchor="start", weight="bold")
    s.text(590, 116, "y_i = sum of x_j, j <= i", 12, anchor="start")
    s.text(590, 160, "y_i = sum of x_j, j < i", 12, anchor="start")
    steps = [("1. call with temp = nullptr", "writes only the size, need", GREY),
             ("2. cudaMalloc(&temp, need)", "only if it grew: reuse it", ORANGE),
             ("3. the same call with temp", "does the work, on your stream", GREEN)]
    for i, (a, b, fill) in enumerate(steps):
        x0 = 40 + i * 235
        s.rect(x0, 220, 215, 70, fill=fill)
        s.text(x0 + 107, 248, a, 12, weight="bold")
        s.text(x0 + 107, 268, b, 12)
        if i:
            s.line(x0 - 18, 255, x0 - 2, 255, arrow=True)
    s.text(380, 318, "Thrust does the same work in one call, and allocates the scratch itself each time.", 12)
    s.text(380, 344, "A radix sort is a few passes, each a histogram, a scan of it and a scatter.", 12,
           fill=MUTED, italic=True)
    return s.render()


def number_formats() -> str:
    s = Svg(760, 350, "The bit layouts of the formats, one box per bit: fp32 has 1 sign, 8 exponent and 23 "
                      "fraction bits; tf32 1, 8 and 10 (stored as fp32, the low 13 fraction bits ignored); fp16 "
                      "1, 5 and 10; bf16 1, 8 and 7; fp8 e4m3 1, 4 and 3; fp8 e5m2 1, 5 and 2")
    s.text(380, 26, "Sign, exponent and fraction bits of each format", 15, weight="bold")
    formats = [("fp32", 8, 23, 0), ("tf32", 8, 10, 13), ("fp16", 5, 10, 0), ("bf16", 8, 7, 0),
               ("fp8 e4m3", 4, 3, 0), ("fp8 e5m2", 5, 2, 0)]
    x0, c = 186, 17
    for r, (name, e, f, ignored) in enumerate(formats):
        y = 48 + r * 42
        s.text(30, y + 18, name, 13, anchor="start", weight="bold")
        s.text(x0 - 10, y + 18, f"1, {e}, {f}", 12, anchor="end")
        bits = [RED] + [BLUE] * e + [GREEN] * f + [GREY] * ignored
        for i, fill in enumerate(bits):
            s.rect(x0 + i * c, y, c - 2, 26, fill=fill, rx=1, width=0.6, dash="2,2" if fill == GREY else None)
    y = 298
    for i, (fill, label) in enumerate(((RED, "sign"), (BLUE, "exponent: range"), (GREEN, "fraction: precision"),
                                       (GREY, "tf32: stored, ignored"))):
        s.rect(30 + i * 180, y, 16, 16, fill=fill, rx=1, width=0.6)
        s.text(30 + i * 180 + 24, y + 13, label, 12, anchor="start")
    s.text(380, 336, "bf16 keeps fp32's 8 exponent bits; fp16, the same size, has 3 fewer exponent bits "
           "and 3 more fraction bits.", 12, fill=MUTED, italic=True)
    return s.render()


CHAPTERS = {  # key: (label, column, row), placed on a 4 x 4 grid; dashed = optional
    "eco": ("Ecosystem map", 0, 0), "cpp": ("C/C++ refresher", 2, 0),
    "setup": ("Setup", 0, 1), "intro": ("GPU introduction", 1, 1), "first": ("First kernels", 2, 1),
    "mem": ("Memory model", 3, 1), "libs": ("CUDA libraries", 3, 2), "fast": ("Matmul and FFT", 2, 2),
    "attn": ("Attention", 2, 3), "triton": ("Triton", 1, 3), "ext": ("PyTorch extensions", 0, 3),
    "mnist": ("Final project: MNIST", 3, 3),
}


def tensor_parallel() -> str:
    s = Svg(840, 500, "The tensor-parallel MLP block on two ranks: each rank all-gathers every rank's tokens, "
                      "multiplies them by its columns of W1, applies GELU, multiplies by the same rows of W2 "
                      "into a partial sum, and a reduce-scatter sums the partials and hands each rank its own "
                      "tokens back. Below, schematic timelines: without overlap the all-gather, the GEMMs and "
                      "the reduce-scatter run one after another; in four chunks each chunk's GEMMs start when "
                      "its all-gather is done and its reduce-scatter runs while the next chunk computes")
    s.text(420, 26, "Sequence-parallel in, column- then row-parallel GEMMs, sequence-parallel out (n = 2)", 15,
           weight="bold")
    stages = [(20, 110, "X_r (T/n x D)", GREY), (150, 110, "all-gather X", ORANGE),
              (280, 110, "X W1[:, r]", BLUE), (410, 60, "GELU", GREEN), (490, 110, "A W2[r, :]", BLUE),
              (620, 120, "reduce-scatter", ORANGE), (760, 60, "Y_r", GREY)]
    for r in range(2):
        y = 50 + r * 70
        s.text(20, y + 6, f"rank {r}", 12, anchor="start", weight="bold")
        for i, (x, w, label, fill) in enumerate(stages):
            s.box(x, y + 14, w, 34, label.replace("_r", f"_{r}").replace("[:, r]", f"[:, {r}]")
                  .replace("[r, :]", f"[{r}, :]"), fill, size=12)
            if i:
                s.line(stages[i - 1][0] + stages[i - 1][1], y + 31, x, y + 31, arrow=True, width=1.2)
    s.text(420, 210, "T tokens, width D, hidden width H = 4 D, A = GELU(X W1[:, r]); orange: collectives, "
           "blue: GEMMs; Y_r: X_r's rows", 12, fill=MUTED, italic=True)
    # Schematic timelines: four chunks; an all-gather or reduce-scatter chunk takes 1 unit, a GEMM chunk 3.
    unit, x0 = 26, 150

    def bar(t0, t1, y, label, fill):
        s.box(x0 + t0 * unit, y, (t1 - t0) * unit, 26, label, fill, size=11)

    s.text(20, 250, "No overlap: one stream", 13, anchor="start", weight="bold")
    s.text(20, 278, "stream", 12, anchor="start")
    bar(0, 4, 262, "all-gather", ORANGE)
    bar(4, 16, 262, "GEMM, GELU, GEMM", BLUE)
    bar(16, 20, 262, "reduce-scatter", ORANGE)
    s.text(20, 330, "Chunked, 4 chunks: two streams, events between them", 13, anchor="start", weight="bold")
    s.text(20, 358, "communication", 12, anchor="start")
    s.text(20, 398, "compute", 12, anchor="start")
    for k in range(4):
        bar(k, k + 1, 342, f"AG{k}", ORANGE)
        bar(1 + 3 * k, 4 + 3 * k, 382, f"GEMMs {k}", BLUE)
        bar(4 + 3 * k, 5 + 3 * k, 342, f"RS{k}", ORANGE)
        s.line(x0 + (k + 1) * unit, 368, x0 + (1 + 3 * k) * unit + 4, 382, arrow=True, stroke=STRONG_BLUE)
    for t, label in ((20, "end without overlap"), (14, "end with overlap")):
        s.line(x0 + t * unit, 240 if t == 20 else 330, x0 + t * unit, 420, stroke=STRONG_RED, dash="4 3")
        s.text(x0 + t * unit, 438, label, 12, fill=STRONG_RED)
    s.text(420, 470, "Schematic, not measured: what is not hidden is the first all-gather chunk, the last "
           "reduce-scatter chunk,", 12, fill=MUTED, italic=True)
    s.text(420, 488, "and whatever the collectives' kernels slow the GEMMs down by while they share the SMs.", 12,
           fill=MUTED, italic=True)
    return s.render()


def chapter_map() -> str:
    s = Svg(760, 460, "How the chapters lead into each other: Setup, GPU introduction, First kernels and the "
                      "Memory model in a line; the memory model leads to the CUDA libraries, which lead to "
                      "Matmul and FFT; that leads to Attention, to Triton (then PyTorch extensions) and, with "
                      "the libraries and the extensions, to the MNIST final project; the ecosystem map and "
                      "the C/C++ refresher are optional")
    s.text(380, 26, "The chapters: an arrow leads to a chapter that builds on the one it starts from", 14,
           weight="bold")
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
    return s.render()


FIGURES = {
    "h100-sm.svg": h100_sm,
    "memory-hierarchy.svg": memory_hierarchy,
    "thread-hierarchy.svg": thread_hierarchy,
    "grid-over-matrix.svg": grid_over_matrix,
    "coalescing.svg": coalescing,
    "bank-conflicts.svg": bank_conflicts,
    "matmul-tiling.svg": matmul_tiling,
    "online-softmax.svg": online_softmax,
    "sgemm-register-blocking.svg": sgemm_register_blocking,
    "sgemm-warp-tiling.svg": sgemm_warp_tiling,
    "flash-tile-loop.svg": flash_tile_loop,
    "hopper-pipeline.svg": hopper_pipeline,
    "reduction-tree.svg": reduction_tree,
    "chapter-map.svg": chapter_map,
    "matmul-naive.svg": matmul_naive,
    "transpose-tile.svg": transpose_tile,
    "attention-three-kernels.svg": attention_three_kernels,
    "occupancy.svg": occupancy,
    "row-column-major.svg": row_column_major,
    "grid-stride.svg": grid_stride,
    "histogram-atomics.svg": histogram_atomics,
    "async-copies.svg": async_copies,
    "cluster-softmax.svg": cluster_softmax,
    "grid-sync.svg": grid_sync,
    "timing-ways.svg": timing_ways,
    "unified-memory.svg": unified_memory,
    "loop-order.svg": loop_order,
    "l2-persistence.svg": l2_persistence,
    "flash-backward.svg": flash_backward,
    "attention-shapes.svg": attention_shapes,
    "profiling-tools.svg": profiling_tools,
    "host-device-copies.svg": host_device_copies,
    "fat-binary.svg": fat_binary,
    "kernels-from-python.svg": kernels_from_python,
    "scan-and-cub.svg": scan_and_cub,
    "number-formats.svg": number_formats,
    "tensor-parallel.svg": tensor_parallel,
}


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        (OUT / name).write_text(draw())
    print(f"wrote {len(FIGURES)} figures to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
