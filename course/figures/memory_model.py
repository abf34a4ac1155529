"""The Memory model chapter: coalescing, shared-memory banks, transposes, reductions, the online
softmax, registers and occupancy, asynchronous copies, clusters, grid-wide sync, L2 persistence, and
the chapter's kernels inside PyTorch."""

from __future__ import annotations

from ..svg import (BLUE, GREEN, GREY, MUTED, ORANGE, PANEL, PURPLE, RED, STRONG_BLUE, STRONG_GREEN, STRONG_ORANGE,
                   STRONG_RED, Svg)
from .card import figure


@figure(400, "How a warp reads global memory: 32 threads, 4-byte floats, 32-byte sectors")
def coalescing(s: Svg) -> None:
    """A warp's 32 threads reading consecutive 4-byte floats touch one 128-byte segment; reading with a stride of 32
    floats touches 32 segments"""

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


@figure(420, "Shared memory: 32 banks, one 4-byte word per bank per clock")
def bank_conflicts(s: Svg) -> None:
    """Shared-memory bank conflicts: 32 banks of 4-byte words; stride 1 hits 32 banks, stride 2 hits 16 banks twice
    each, stride 32 hits one bank 32 times, padding a 32-wide tile to 33 spreads a column over all 32 banks"""
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


@figure(400, "Version 2: the transposing happens in shared memory, both global sides walk rows")
def transpose_tile(s: Svg) -> None:
    """Transpose through a shared-memory tile: a block reads a 32 x 32 tile of the input row by row (coalesced) into
    tile[j][x], waits at a barrier, and writes the output tile at the mirrored position row by row (coalesced),
    reading the shared tile by columns, tile[x][j]"""
    n, c = 8, 18  # drawn as 8 x 8 cells, each standing for 4 x 4 elements of the 32 x 32 tile
    def tile(x, y, fill, highlight_row=None, highlight_col=None, hl=BLUE):
        s.rect(x, y, n * c, n * c, fill=fill, rx=0, width=1.2)
        s.grid(x, y, n * c, n * c, n, n)
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
    s.lines(300 + n * c / 2, 90 + n * c + 20, ["written as tile[j][x] (a row),",
                                               "read as tile[x][j] (a column)"], 16)
    tile(560, 90, GREY, highlight_row=2, hl=ORANGE)
    s.text(560 + n * c / 2, 76, "output tile of B", 13, weight="bold")
    s.text(560 + n * c / 2, 90 + n * c + 20, "rows c0 + j, columns r0 + x", 12)
    s.line(40 + n * c + 6, 90 + 2.5 * c, 300 - 6, 90 + 2.5 * c, stroke=STRONG_BLUE, arrow=True, width=1.5)
    s.text(250, 90 + 2.5 * c - 8, "read row", 12, anchor="end")
    s.line(300 + 2.5 * c, 90 + n * c + 44, 300 + 2.5 * c, 90 + n * c + 60, stroke=STRONG_ORANGE)
    s.line(300 + 2.5 * c, 90 + n * c + 60, 560 + n * c / 2, 90 + n * c + 60, stroke=STRONG_ORANGE)
    s.line(560 + n * c / 2, 90 + n * c + 60, 560 + n * c / 2, 90 + n * c + 28, stroke=STRONG_ORANGE, arrow=True)
    s.text(470, 90 + n * c + 76, "write column as a row", 12)
    s.lines(40, 352, ["__syncthreads() between the two phases: every element is in the tile before any is read.",
                      "A warp is one row j of 32 lanes x; in phase 2 it reads column j of the tile: one bank, "
                      "32 times."], 20, anchor="start")
    s.caption(392, "Drawn as 8 x 8 cells; each cell stands for 4 x 4 of the tile's 32 x 32 floats.", 12)


@figure(530, "Reducing a block of 256 values: a tree in shared memory, or warp shuffles")
def reduction_tree(s: Svg) -> None:
    """Two ways a block of 256 threads sums its values: version 2 halves the active threads eight times in shared memory
    (thread t < s adds partial[t + s], then a barrier); version 3 sums each warp with five shuffle steps (offsets 16,
    8, 4, 2, 1, all 32 lanes active), writes 8 warp sums to shared memory, and warp 0 shuffles them"""
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
    s.lines(40, 270, ["drawn for 16 slots; with 256: s = 128, 64, 32, 16, 8, 4, 2, 1, eight steps, each "
                      "ending at a barrier,",
                      "and the active threads halve each step (from s = 16 down, fewer than a warp's 32 "
                      "are busy)"], anchor="start")
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
    s.lines(40, 478, ["Every lane of every step is active: after 5 steps each lane holds its warp's sum. Lane 0 "
                      "of the 8 warps",
                      "writes warp_sums[warp], one __syncthreads(), then warp 0 shuffles the 8 sums the same way."],
            anchor="start")
    s.caption(514, "(exchanges drawn for lanes 0-3 and their partners only)", 12)


@figure(380, "Online softmax: a running maximum m and a running sum d, one pass over the row")
def online_softmax(s: Svg) -> None:
    """The online softmax: one pass over a row keeps a running maximum m and a running sum d of exp(x - m); when a chunk
    raises the maximum, the sum so far is rescaled"""
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
        s.lines(x + 100, 190, ["m' = max(m, max of chunk)",
                               "d' = d * exp(m - m')"], 20, 11)
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


@figure(420, "What fits on one Hopper SM: blocks of 256 threads (compute capability 9.0)")
def occupancy(s: Svg) -> None:
    """How registers per thread limit the blocks of 256 threads on a Hopper SM: its 65,536 registers hold 8 blocks at 32
    registers a thread, 4 at 64, 2 at 128 and 1 at 255 (rounded up to 256); 100 KiB of shared memory per block allows
    2 blocks in 228 KiB"""
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
    s.lines(380, 362, ["A warp's registers are allocated in units of 256 (8 a thread), so r is rounded up to a "
                       "multiple of 8;",
                       "the threads (2,048), blocks (32) and shared memory limits apply too: the smallest wins."])
    s.caption(404, "Limits of compute capability 9.0, from the CUDA Programming Guide's table; "
                   "nothing here is measured.", 12)


@figure(430, "How a tile reaches shared memory: synchronous, cp.async, TMA")
def async_copies(s: Svg) -> None:
    """Left: a tile of 64 x 16 blurred outputs needs a 68 x 20 input tile, a halo of 2 pixels. Right: three ways the
    input tile reaches shared memory: through each thread's registers and a barrier; with cp.async, each thread's
    copies bypassing registers with several stages in flight; with TMA, one thread handing the whole box to the copy
    engine and an mbarrier counting the bytes"""
    # The tile: 68 x 20 input drawn 3 px per pixel... 204 x 60 is too flat; 2.6 px wide, 6 px tall.
    tx, ty, pw, ph = 40, 80, 2.7, 6
    s.text(tx + 68 * pw / 2, 64, "one tile (kRadius = 2)", 13, weight="bold")
    s.rect(tx, ty, 68 * pw, 20 * ph, fill=ORANGE, rx=0, width=1.2)
    s.rect(tx + 2 * pw, ty + 2 * ph, 64 * pw, 16 * ph, fill=GREEN, rx=0, width=1.2)
    s.text(tx + 68 * pw / 2, ty + 10 * ph + 5, "64 x 16 outputs", 12)
    s.lines(tx + 68 * pw / 2, ty + 20 * ph + 18, ["input 68 x 20: a 2-pixel halo",
                                                  "zero outside the image"])
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
    s.lines(380, 374, ["Asynchronous copies let a block compute on one tile while the next tiles are on their "
                       "way,",
                       "instead of waiting at the barrier for its own loads."])
    s.caption(418, "cp.async: compute capability 8.0 and newer; TMA: 9.0 and newer (CUDA C++ Programming Guide).", 12)


@figure(420, "Softmax over a long row with a cluster of 8 blocks and distributed shared memory")
def cluster_softmax(s: Svg) -> None:
    """A long row split over a cluster of 8 blocks: block rank r keeps slice r of the row in registers, reduces it to
    one maximum in its shared memory, and after cluster.sync() every block reads all 8 partial maxima through
    distributed shared memory; the sum is combined the same way, then each block writes its own slice"""
    x0, bw = 40, 85
    s.text(x0, 58, "row blockIdx.y, split into 8 contiguous slices", 12, anchor="start", weight="bold")
    for r in range(8):
        x = x0 + r * bw
        s.box(x, 66, bw - 5, 30, f"slice {r}", BLUE, size=12)
        s.rect(x, 126, bw - 5, 100, fill=PANEL, width=1.0)
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
    s.lines(rx + 100, 266, ["map_shared_rank(mine, lane): lane r of a warp",
                            "reads block r's mine through DSMEM"], 16, anchor="start")
    steps = ["1. each block: the max of its slice -> mine, one float in its shared memory;  cluster.sync()",
             "2. every warp: cluster_allreduce<max> over the 8 blocks' mine: the row maximum",
             "3. the same for the sum of exp(x - max);  4. each block writes its own slice",
             "The last barrier is split (barrier_arrive, barrier_wait): no block leaves while others read it."]
    s.lines(40, 316, steps, 20, anchor="start")
    s.caption(406, "Drawn for block 2; every block reads the 8 partials the same way.", 12)


@figure(400, "One launch, one grid barrier: reduce_grid_sync")
def grid_sync(s: Svg) -> None:
    """The cooperative reduction: every block of a grid that fits on the GPU at once sums its chunk and writes
    partials[b]; at grid.sync() every block waits until all have arrived; then block 0 adds the partials in block
    order and writes out, and the other blocks return"""
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
    s.lines(40, 344, ["Legal only in a cooperative launch, which fails if B exceeds the blocks that fit on the "
                      "GPU together",
                      "(blocks per SM x SMs): a block still waiting for an SM could never reach the barrier."],
            anchor="start")
    s.caption(388, "Drawn with six blocks; B is the grid's size, chosen from the kernel's occupancy.", 12)


@figure(380, "Keeping a hot table in L2 while a large array streams past")
def l2_persistence(s: Svg) -> None:
    """L2 persistence: the kernel streams x and out once while gathering from a small table; without a set-aside the
    streaming data evicts the table from L2 and its reads go to DRAM; with part of L2 set aside and an access policy
    window marking the table's accesses persisting, the table stays in L2"""
    def panel(x, title, set_aside):
        s.text(x + 160, 58, title, 13, weight="bold")
        s.rect(x, 70, 320, 90, fill=PANEL, width=1.2)
        s.text(x + 10, 88, "L2", 13, anchor="start", weight="bold")
        if set_aside:
            s.rect(x + 10, 96, 110, 56, fill=GREEN, width=1.0)
            s.lines(x + 65, 120, ["set-aside:",
                                  "table (persisting)"])
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
    s.lines(40, 290, ["cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes): the set-aside, device-wide",
                      "cudaAccessPolicyWindow { base_ptr = table, num_bytes, hitRatio, hitProp = persisting }: "
                      "per launch",
                      "cudaCtxResetPersistingL2Cache(): persisting lines back to normal"], anchor="start")
    s.caption(362, "Available from compute capability 8.0; disabled in MIG mode "
                   "(CUDA C++ Programming Guide 13.0).", 12)


@figure(330, "The chapter's kernels inside a PyTorch process: the same files, the same tensors")
def kernels_from_python(s: Svg) -> None:
    """One kernel file, two compilers: transpose.cuh, reduction.cuh and softmax.cuh are included by the C++ programs,
    which nvcc compiles, and compiled at run time by NVRTC through CuPy in the Python program; cupy.from_dlpack gives
    CuPy a view of a PyTorch tensor's memory, so the course's kernels and PyTorch's work on the same bytes, timed the
    same way"""
    s.rect(40, 60, 220, 60, fill=BLUE)
    s.lines(150, 85, ["transpose.cuh, reduction.cuh,",
                      "softmax.cuh (include nothing)"])
    s.box(320, 50, 180, 36, "nvcc: C++ programs", GREY, size=12)
    s.box(320, 100, 180, 36, "NVRTC via CuPy", GREEN, size=12)
    s.line(262, 80, 318, 68, arrow=True)
    s.line(262, 96, 318, 118, arrow=True)
    s.text(510, 72, "the earlier pages' timings", 12, anchor="start")
    s.rect(40, 170, 680, 120, fill=PANEL, width=1.2)
    s.text(56, 190, "one Python process", 13, anchor="start", weight="bold")
    s.box(60, 206, 200, 40, "course kernel (CuPy)", GREEN, size=12)
    s.box(500, 206, 200, 40, "PyTorch: eager, compiled", PURPLE, size=12)
    s.box(300, 206, 160, 40, "one tensor's memory", ORANGE, size=12, weight="bold")
    s.line(262, 226, 298, 226, arrow=True)
    s.line(498, 226, 462, 226, arrow=True)
    s.text(380, 270, "cupy.from_dlpack: a view, no copy", 12)
    s.line(410, 138, 160, 204, arrow=True, dash="4,3")
    s.caption(318, "All timed the same way, beside a copy of the same bytes; each PyTorch configuration is "
                   "checked first.", 12)
