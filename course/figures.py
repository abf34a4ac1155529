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


FIGURES = {
    "h100-sm.svg": h100_sm,
    "memory-hierarchy.svg": memory_hierarchy,
    "thread-hierarchy.svg": thread_hierarchy,
    "grid-over-matrix.svg": grid_over_matrix,
    "coalescing.svg": coalescing,
    "bank-conflicts.svg": bank_conflicts,
    "matmul-tiling.svg": matmul_tiling,
    "online-softmax.svg": online_softmax,
}


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        (OUT / name).write_text(draw())
    print(f"wrote {len(FIGURES)} figures to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
