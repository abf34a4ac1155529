"""The CUDA libraries and the Matmul and FFT chapters: layouts as cuBLAS reads them, CUB's scan, and
matrix multiplication from the CPU's loop order to the Hopper pipeline."""

from __future__ import annotations

from ..svg import (BLUE, DEEP_ORANGE, GREEN, GREY, INK, MUTED, ORANGE, PANEL, PURPLE, RED, STRONG_BLUE, STRONG_GREEN,
                   STRONG_ORANGE, STRONG_RED, Svg)
from .card import figure


@figure(400, "The same bytes, two layouts: a row-major matrix read column-major is its transpose")
def row_column_major(s: Svg) -> None:
    """One buffer of six floats read two ways: row-major as a 2 x 3 matrix, element (i, j) at i * 3 + j, and
    column-major with leading dimension 3 as a 3 x 2 matrix, element (i, j) at i + j * 3, which is the transpose; so
    cuBLAS, asked for C^T = B^T A^T with the operands swapped, writes row-major C = A B"""
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
    s.lines(380, 351, ["Row-major A (m x k), B (k x n) look like A^T and B^T to cuBLAS; asking for C^T = B^T A^T",
                       "(operands swapped, n x m) writes C^T column-major, which is C = A B row-major."])


@figure(360, "Reduce and scan, and CUB's two-phase call")
def scan_and_cub(s: Svg) -> None:
    """Top: reduce, inclusive scan and exclusive scan of the values 3 1 4 1 5 9 2 6: the sum 31; the running sums 3 4 8
    9 14 23 25 31; and the same shifted right with a leading 0. Bottom: CUB's two-phase call: first with a null
    temporary pointer, which only writes the scratch size, then allocate, then the same call again to do the work"""
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
    s.lines(590, 116, ["y_i = sum of x_j, j <= i",
                       "y_i = sum of x_j, j < i"], 44, anchor="start")
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
    s.caption(344, "A radix sort is a few passes, each a histogram, a scan of it and a scatter.", 12)


@figure(360, "The inner loop's walk through B, stored row-major")
def loop_order(s: Svg) -> None:
    """Loop order on the CPU: in ijk the inner loop walks down a column of B, one float from each row, so each cache
    line fetched delivers one useful float; in ikj the inner loop walks along a row of B and a row of C, so every
    float of each cache line is used"""
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
            s.line(x + 5.5 * c, y + 4, x + 5.5 * c, y + n * c - 4, arrow=True, stroke=STRONG_ORANGE, width=1.5)
        s.text(x + n * c / 2, y + n * c + 22, verdict, 12, fill=colour, weight="bold")
    matrix(80, 70, False, "ijk: inner loop over k", "a cache line fetched for every float", STRONG_RED)
    matrix(470, 70, True, "ikj: inner loop over j", "every float of each cache line used", STRONG_GREEN)
    s.text(176, 312, "B[k * N + j], k = 0, 1, 2 ...: N floats apart", 12)
    s.text(566, 312, "B[k * N + j] and C[i * N + j], j = 0, 1, 2 ...", 12)
    s.caption(346, "The same arithmetic in both; only the order in which memory is walked differs.", 12)


@figure(440, "Tiling: each block computes one tile of C = A x B, stepping through K")
def matmul_tiling(s: Svg) -> None:
    """Tiled matrix multiplication: a block loads a tile of A and a tile of B into shared memory, accumulates their
    product into its tile of C, and steps along K"""
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
        s.rect(bx + col * t, by + k * t, t, t, fill=ORANGE if k != 2 else DEEP_ORANGE, width=0.8, rx=0)
    s.rect(cx + col * t, cy + row * t, t, t, fill=GREEN, stroke=STRONG_GREEN, width=2.5, rx=0)
    s.line(ax + 2 * t + t / 2, ay + row * t - 2, ax + 2 * t + t / 2, ay - 20, dash="3,3")
    s.text(ax + 2 * t + t / 2 - 4, ay - 24, "tile k of A's row strip", 11, anchor="end", fill=MUTED)
    s.line(bx - 2, by + 2 * t + t / 2, bx - 40, by + 2 * t + t / 2, dash="3,3")
    s.text(bx - 44, by + 2 * t + t / 2 - 6, "tile k of B's column strip", 11, anchor="end", fill=MUTED)
    s.line(ax + aw, ay + row * t + t / 2, cx + col * t - 2, cy + row * t + t / 2, stroke=STRONG_BLUE, arrow=True)
    s.line(bx + col * t + t / 2, by + bh, bx + col * t + t / 2, cy + row * t - 2, stroke=STRONG_ORANGE, arrow=True)
    s.text(580, 150, "for each k:", 12, anchor="start", weight="bold")
    s.lines(580, 168, ["load both tiles to shared",
                       "__syncthreads()",
                       "C tile += A tile x B tile",
                       "__syncthreads()"], 16, 11, anchor="start")
    s.caption(428, "A block reads each element of its strips of A and B from global memory once; its threads "
               "then reuse it from shared memory.")


@figure(450,
        "v5: each thread keeps an 8 x 8 tile of C in registers (BM = BN = 128, BK = 8, TM = TN = 8)", heading_size=14)
def sgemm_register_blocking(s: Svg) -> None:
    """v5, 2D register blocking: 256 threads each own an 8 x 8 tile of the block's 128 x 128 tile of C; for each k a
    thread loads 8 values of A from a column of As and 8 of B from a row of Bs into registers and does their 64
    multiply-adds, an outer product"""
    # The block tile of C, 128 x 128 drawn 256 px: one thread tile (8 x 8) is 16 px.
    cx, cy, side, bk = 90, 110, 240, 48
    trow, tcol, k = 5, 9, 3
    cell = side / 16
    s.rect(cx, cy - bk - 12, side, bk, fill=ORANGE, rx=0)                    # Bs: BK x BN
    s.grid(cx, cy - bk - 12, side, bk, 1, 8)
    s.rect(cx + tcol * cell, cy - bk - 12 + k * bk / 8, cell, bk / 8, fill=DEEP_ORANGE, rx=0, width=1.2)
    s.text(cx + side + 8, cy - bk / 2 - 8, "Bs [BK][BN]", 12, anchor="start", weight="bold")
    s.rect(cx - bk - 12, cy, bk, side, fill=BLUE, rx=0)                      # As: BM x BK
    s.grid(cx - bk - 12, cy, bk, side, 8, 1)
    s.rect(cx - bk - 12 + k * bk / 8, cy + trow * cell, bk / 8, cell, fill=STRONG_BLUE, rx=0, width=1.2)
    s.text(cx - bk / 2 - 12, cy + side + 18, "As [BM][BK]", 12, weight="bold")
    s.rect(cx, cy, side, side, fill=GREY, rx=0, width=1.2)
    s.grid(cx, cy, side, side, 16, 16)
    s.rect(cx + tcol * cell, cy + trow * cell, cell, cell, fill=GREEN, stroke=STRONG_GREEN, width=2.5, rx=0)
    s.text(cx + side / 2, cy + side + 18, "C block tile: 16 x 16 thread tiles", 12, weight="bold")
    s.text(cx + side / 2, cy + side + 36, "thread tid: trow = tid / 16, tcol = tid % 16", 12)
    # One thread's registers: a_reg (column), b_reg (row), acc (8 x 8), their outer product.
    rx0, ry0, r = 500, 130, 22
    s.text(rx0 + 4 * r, 72, "one thread, one k", 13, weight="bold")
    s.rect(rx0, ry0 - r - 10, 8 * r, r, fill=ORANGE, rx=0)
    s.grid(rx0, ry0 - r - 10, 8 * r, r, 8, 1)
    s.text(rx0 + 4 * r, ry0 - r - 16, "b_reg[8] = Bs[k][tcol * 8 + j]", 12)
    s.rect(rx0 - r - 10, ry0, r, 8 * r, fill=BLUE, rx=0)
    s.grid(rx0 - r - 10, ry0, r, 8 * r, 1, 8)
    s.text(rx0 - r - 14, ry0 + 8 * r + 18, "a_reg[8] = As[trow * 8 + i][k]", 12, anchor="start")
    s.rect(rx0, ry0, 8 * r, 8 * r, fill=GREEN, rx=0)
    s.grid(rx0, ry0, 8 * r, 8 * r, 8, 8)
    s.text(rx0 - r - 14, ry0 + 8 * r + 36, "acc[8][8] += a_reg[i] * b_reg[j]", 12, anchor="start")
    s.text(rx0 - r - 14, ry0 + 8 * r + 54, "16 loads, 64 multiply-adds", 12, anchor="start", weight="bold")
    s.line(cx + tcol * cell + cell, cy + trow * cell + cell / 2, rx0 - r - 14, ry0 + 4 * r, stroke=STRONG_GREEN,
           arrow=True, dash="4,3")
    s.caption(432, "The block walks K in steps of BK = 8: load As and Bs, __syncthreads(), eight outer "
                   "products, __syncthreads().", 12)


@figure(470, "v7: block tile, warp tiles, thread tiles (BM = BN = 128, WM = WN = 64, TM = 8, TN = 4)", heading_size=14)
def sgemm_warp_tiling(s: Svg) -> None:
    """v7, warp tiling with the first configuration: a 128 x 128 block tile is four 64 x 64 warp tiles; a warp covers
    its tile in four passes of 64 x 16, each pass 32 threads of 8 x 4 results; per k a thread loads 8 floats of As
    and 16 of Bs and updates 8 x 16 accumulators"""
    # Panel 1: the block tile (128 px per 64 elements would be too big: 200 px for 128).
    bx, by, side, strip = 70, 120, 200, 30
    s.text(bx + side / 2, 56, "block: 4 warps (128 threads)", 13, weight="bold")
    s.rect(bx, by - strip - 10, side, strip, fill=ORANGE, rx=0)
    s.rect(bx + side / 2, by - strip - 10, side / 2, strip, fill=DEEP_ORANGE, rx=0, width=1.2)
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
    s.lines(bx + side / 2, by + side + 18, ["(wrow, wcol) = (warp / 2, warp % 2)",
                                            "As: BK x BM (k-major), BK = 16"])
    # Panel 2: warp 1's tile, 64 x 64 drawn 224 px: WNI = 4 passes of 64 x 16, 8 x 4 thread blocks each.
    wx, wy, ws = 330, 120, 224
    s.text(wx + ws / 2, 56, "warp tile 64 x 64: 4 passes", 13, weight="bold")
    s.line(bx + side, by, wx - 4, wy, stroke=STRONG_GREEN, dash="4,3")
    s.line(bx + side, by + side / 2, wx - 4, wy + ws, stroke=STRONG_GREEN, dash="4,3")
    pw = ws / 4
    for wn in range(4):
        s.rect(wx + wn * pw, wy, pw, ws, fill=GREEN, rx=0, width=1.2)
        s.grid(wx + wn * pw, wy, pw, ws, 4, 8)
        s.rect(wx + wn * pw + 1 * pw / 4, wy + 2 * ws / 8, pw / 4, ws / 8, fill=PURPLE, stroke=INK, width=2, rx=0)
        s.text(wx + wn * pw + pw / 2, wy - 8, f"wn = {wn}", 12)
    s.lines(wx + ws / 2, wy + ws + 18, ["a pass: 64 x 16, 8 x 4 lanes of 8 x 4 each",
                                        "lane 9: trow = 9 / 4 = 2, tcol = 9 % 4 = 1"])
    # Panel 3: lane 9's registers for one k.
    tx, ty, c = 614, 150, 7
    s.text(680, 56, "lane 9, one k", 13, weight="bold")
    s.rect(tx, ty - c - 12, 16 * c, c, fill=ORANGE, rx=0)
    s.grid(tx, ty - c - 12, 16 * c, c, 4, 1, stroke=INK, width=1)
    s.text(tx + 8 * c, ty - c - 18, "b_reg[16]: 4 float4", 12)
    s.rect(tx - c - 8, ty, c, 8 * c, fill=BLUE, rx=0)
    s.text(tx - c - 12, ty + 4 * c + 4, "a_reg[8]", 12, anchor="end")
    s.rect(tx, ty, 16 * c, 8 * c, fill=PURPLE, rx=0)
    s.grid(tx, ty, 16 * c, 8 * c, 4, 1, stroke=INK, width=1)
    s.lines(tx + 8 * c, ty + 8 * c + 18, ["acc[8][16]",
                                          "128 results"], 16)
    s.text(tx + 8 * c, ty + 8 * c + 50, "24 loads, 128 FMAs", 12, weight="bold")
    # The reads, in the kernel's own indices.
    y0 = 406
    s.lines(30, y0, ["a_reg[i] = As[k * BM + wrow * WM + trow * TM + i]     (two float4 loads)",
                     "b_reg[wn * TN + j] = Bs[k * BN + wcol * WN + wn * 16 + tcol * TN + j]     "
                     "(a float4 a pass)"], 20, anchor="start")
    s.text(380, y0 + 52, "A warp's lanes read As 8 floats apart and Bs 4 apart; equal addresses are broadcast.",
           12, fill=MUTED, italic=True)


@figure(540, "The producer/consumer ring: TMA fills stages, wgmma drains them (STAGES = 4)")
def hopper_pipeline(s: Svg) -> None:
    """The warp-specialised Hopper GEMM (v2 to v5): a producer warpgroup's elected thread waits on empty[s], sets the
    expected bytes on full[s] and issues TMA loads of A and B into a ring of four shared-memory stages; two consumer
    warpgroups wait on full[s], issue wgmma from the stage and arrive on empty[s] when done; k-step it uses stage it
    % 4 with phase parity (it / 4) & 1"""
    # Producer.
    s.box(40, 50, 680, 50, "Producer: warpgroup 0 (setmaxnreg.dec to 40); one elected thread",
          ORANGE, size=13, weight="bold", sub=None)
    s.text(380, 120, "for k-step it:  s = it % 4;  wait empty[s] (parity ((it / 4) & 1) ^ 1);  "
           "expect 48 KiB on full[s];  TMA A, B -> stage s", 12)
    # The ring of stages.
    y = 150
    for st in range(4):
        x = 40 + st * 175
        s.rect(x, y, 160, 150, fill=PANEL, width=1.2)
        s.text(x + 80, y + 18, f"stage {st}", 13, weight="bold")
        s.box(x + 10, y + 28, 140, 28, "A: 128 x 64 bf16", BLUE, size=12)
        s.box(x + 10, y + 60, 140, 28, "B: 256 x 64 bf16", BLUE, size=12)
        s.box(x + 10, y + 98, 66, 36, f"full[{st}]", GREEN, size=12)
        s.box(x + 84, y + 98, 66, 36, f"empty[{st}]", RED, size=12)
        s.line(x + 80, 128, x + 80, y - 2, arrow=True, stroke=STRONG_ORANGE, width=1.5)
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
    s.lines(40, 410, lines, 20, anchor="start")
    s.caption(522, "The counter it runs on across tiles, never reset: the same slot and parity sequence "
                   "in the producer and in the consumers.", 12)
