"""The First kernels chapter: threads and blocks over the data, grid-stride loops, the naive matmul,
atomics, unified memory, and how a kernel is timed and profiled."""

from __future__ import annotations

import math

from ..svg import (BLUE, CARD, DEEP_ORANGE, GREEN, GREY, INK, MUTED, ORANGE, PANEL, PURPLE, RED, STRONG_BLUE,
                   STRONG_GREEN, STRONG_ORANGE, STRONG_RED, Svg)
from .card import figure


@figure(330, "Threads, warps, blocks, grid, SMs")
def thread_hierarchy(s: Svg) -> None:
    """Threads are grouped into warps of 32, warps into blocks, blocks into a grid; each block runs on one SM"""
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
    s.lines(290, 164, ["shares shared memory, can",
                       "__syncthreads()"], 14, 11, fill=MUTED)
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


@figure(400, "A grid of 16 x 16 blocks covering a matrix of 50 rows x 70 columns")
def grid_over_matrix(s: Svg) -> None:
    """A grid of 16 x 16 blocks covering a 70 x 50 matrix: the last column and row of blocks stick out past the matrix,
    so their outside threads must do nothing"""
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
    s.lines(lx, 80, ["gridDim = (5, 4): ceil(70/16), ceil(50/16)",
                     "blockDim = (16, 16)"], 20, anchor="start")
    s.key(lx, 120, BLUE, "block wholly inside the matrix")
    s.key(lx, 146, ORANGE, "boundary block: partly outside")
    s.lines(lx, 196, ["col = blockIdx.x * blockDim.x + threadIdx.x",
                      "row = blockIdx.y * blockDim.y + threadIdx.y"], 18, 11, anchor="start", fill=INK)
    s.text(lx, 238, "if (row < rows && col < cols) { ... }", 11, anchor="start", weight="bold")
    s.lines(lx, 256, ["keeps the outside threads from",
                      "reading or writing past the edge"], 16, 11, anchor="start", fill=MUTED)
    s.caption(380, "80 x 64 threads are launched for 70 x 50 elements: the orange blocks' threads past "
               "the red edge must skip their work.")


@figure(330, "v2's grid-stride loop, drawn small: 2 blocks x 4 threads, stride = 8, n = 21")
def grid_stride(s: Svg) -> None:
    """A grid-stride loop drawn small: a grid of 2 blocks of 4 threads (stride 8) covers 21 elements in three passes;
    thread t handles elements t, t + 8 and t + 16, and the last pass stops at i < n"""
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
    s.key(x0, 262, BLUE, "block 0 (threads t0-t3)")
    s.key(x0 + 220, 262, GREEN, "block 1 (threads t4-t7)")
    s.caption(310, "i starts at blockIdx.x * blockDim.x + threadIdx.x and steps by gridDim.x * blockDim.x: "
                   "each pass is coalesced.", 12)


@figure(420, "matmul_naive: one thread per element of C, blocks of 32 x 8 threads")
def matmul_naive(s: Svg) -> None:
    """The naive matrix multiply: the thread at (row, col) reads row `row` of A and column `col` of B and writes
    C[row][col]; a warp is 32 neighbouring columns of one row, so its loads of B are 32 consecutive floats and its
    load of A is one float for all 32 lanes"""
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
    s.rect(bx + col_x - 8, by + l * bh / aw, 38, 6, fill=DEEP_ORANGE, rx=0, width=0.8)  # row l of them
    s.rect(cx + col_x - 8, cy + row_y, 38, 6, fill=GREEN, stroke=STRONG_GREEN, width=1.5, rx=0)  # the warp's C
    s.line(ax + aw + 4, ay + row_y + 3, cx + col_x - 12, cy + row_y + 3, stroke=STRONG_BLUE, arrow=True)
    s.line(bx + col_x + 11, by + bh + 4, bx + col_x + 11, cy + row_y - 4, stroke=STRONG_ORANGE, arrow=True)
    tx = 560
    s.text(tx, 190, "a warp: threadIdx.x 0-31", 12, anchor="start", weight="bold")
    s.lines(tx, 208, ["32 neighbouring columns",
                      "of one row of C"], 16, anchor="start")
    s.text(tx, 250, "at each step l it loads", 12, anchor="start", weight="bold")
    s.lines(tx, 268, ["A[row * k + l]: one float,",
                      "the same for all 32 lanes"], 16, anchor="start")
    s.lines(tx, 302, ["B[l * n + col]: 32",
                      "consecutive floats (coalesced)"], 16, anchor="start")
    s.lines(40, 370, ["col = blockIdx.x * blockDim.x + threadIdx.x;   row = blockIdx.y * blockDim.y + threadIdx.y",
                      "acc += A[row * k + l] * B[l * n + col] for l = 0 .. k - 1;   then C[row * n + col] = acc"],
            20, anchor="start")
    s.caption(412, "Every thread loads 2k floats for 2k operations; neighbours re-read what the others read.", 12)


@figure(440, "Why bins[v]++ loses counts, and how a histogram avoids contention")
def histogram_atomics(s: Svg) -> None:
    """Left: a lost update: two threads both load the count 5, both add one and both store 6, so one of the two
    increments is lost. Right: privatisation: each block counts into its own 256 bins in shared memory with
    shared-memory atomics, then adds its 256 totals to the global histogram with 256 global atomics"""
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
    s.lines(180, 330, ["two increments, the count is 6:",
                       "one is lost. atomicAdd prevents it"])
    # Right: privatisation.
    x0 = 370
    s.text(x0, 60, "privatised: atomics in shared memory", 13, anchor="start", weight="bold")
    for b in range(3):
        y = 76 + b * 78
        s.rect(x0, y, 230, 64, fill=PANEL, width=1.0)
        s.text(x0 + 10, y + 18, f"block {b}: 256 threads", 12, anchor="start", weight="bold")
        s.box(x0 + 10, y + 28, 210, 28, "__shared__ local[256]", ORANGE, size=12)
        s.line(x0 + 232, y + 42, x0 + 276, 190, arrow=True)
    s.text(x0 + 115, 76 + 3 * 78 + 4, "...", 14)
    s.box(x0 + 280, 150, 90, 80, "bins[256]", GREEN, size=12, weight="bold")
    s.text(x0 + 325, 248, "global", 12)
    steps = ["1. zero local, __syncthreads()", "2. atomicAdd(&local[v], 1) per byte",
             "3. __syncthreads(), then 256 atomicAdds", "    of local[b] into bins[b], per block"]
    s.lines(x0, 338, steps, anchor="start")
    s.caption(424, "Shared-memory atomics are handled in the SM, and only one block's threads contend for "
                   "each copy.", 12)


@figure(400, "Managed memory on Linux: pages move on demand, one fault at a time")
def unified_memory(s: Svg) -> None:
    """On-demand migration of managed memory: cudaMallocManaged reserves addresses; the host's first writes place the
    pages in host memory; a kernel touching them faults, and the driver migrates the pages to device memory while the
    faulting warps wait; when the host reads them again they migrate back; cudaMemPrefetchAsync moves a range ahead
    in large transfers"""
    s.box(40, 50, 680, 30, "1. cudaMallocManaged: one range of virtual addresses, no physical pages yet", GREY,
          size=12)
    s.panel(40, 100, 300, 190, "host memory (CPU)")
    s.panel(420, 100, 300, 190, "device memory (GPU)")
    for k in range(8):
        s.rect(60 + k * 34, 136, 28, 28, fill=CARD if k < 3 else BLUE, rx=2, width=0.8,
               dash="3,2" if k < 3 else None)
        s.rect(440 + k * 34, 136, 28, 28, fill=GREEN if k < 3 else CARD, rx=2, width=0.8,
               dash=None if k < 3 else "3,2")
    s.lines(190, 184, ["2. the host writes first:",
                       "the pages are placed here"], 16)
    s.lines(570, 184, ["3. the kernel faults on a page:",
                       "the warps wait, the driver migrates",
                       "it (and some neighbours) and maps it"], 16)
    s.line(342, 150, 418, 150, arrow=True, stroke=STRONG_BLUE, width=2)
    s.text(380, 142, "fault", 12)
    s.line(418, 250, 342, 250, arrow=True, stroke=STRONG_ORANGE, width=2)
    s.text(380, 242, "fault", 12)
    s.lines(190, 262, ["4. the host reads the result:",
                       "the CPU faults, pages come back"], 16)
    s.rect(40, 310, 680, 46, fill=ORANGE, width=1.0)
    s.lines(380, 329, ["cudaMemPrefetchAsync(ptr, bytes, location, flags, stream) moves a range before it is",
                       "needed, in large transfers, instead of fault by fault inside the kernel."])
    s.caption(386, "Windows, WSL and some Tegra devices have no on-demand migration: see the note on the page.", 12)


@figure(420, "What each way of timing measures (schematic, not to scale)")
def timing_ways(s: Svg) -> None:
    """What each of the four timings covers, on a host lane and a GPU lane: the host clock without synchronisation stops
    right after the launch call; the first synchronised launch also includes loading the kernel's code and cold
    caches; a warm synchronised timing adds launch latency and the time for the host to notice completion; two CUDA
    events bracket the kernel on the GPU's own timeline"""
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
             STRONG_ORANGE),
            (4, "CUDA events", 376, 584, "the kernel on the GPU's own clock", STRONG_GREEN)]
    for i, (k, name, a, b, what, colour) in enumerate(rows):
        y = 200 + i * 50
        s.text(40, y + 4, f"{k}. {name}", 12, anchor="start", weight="bold")
        s.line(a, y + 16, b, y + 16, stroke=colour, width=3)
        s.line(a, y + 10, a, y + 22, stroke=colour, width=2)
        s.line(b, y + 10, b, y + 22, stroke=colour, width=2)
        s.text(a, y + 36, what, 12, anchor="start")
    s.caption(408, "In 3 the load-code box is gone (warm), but the host's share remains around the kernel.", 12)


@figure(380, "Timeline first (Nsight Systems), then one kernel in depth (Nsight Compute)")
def profiling_tools(s: Svg) -> None:
    """The two NVIDIA profilers: Nsight Systems draws the whole program on one timeline, with NVTX ranges, the CPU
    thread's API calls and the GPU's copies, kernels and gaps; Nsight Compute takes one kernel launch from it and
    reports its throughputs against the peaks (speed of light), its occupancy and where its warps stall"""
    s.rect(30, 44, 700, 168, fill=PANEL, width=1.2)
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
    s.rect(30, 238, 700, 126, fill=PANEL, width=1.2)
    s.text(44, 258, "ncu: one launch of k2, in detail", 13, anchor="start", weight="bold")
    for i, (name, what) in enumerate((("Speed Of Light", "each unit against its peak"),
                                      ("Occupancy", "resident warps, their limit"),
                                      ("Warp State", "what warps wait for"),
                                      ("Source Counters", "the same, per line"))):
        x = 44 + (i % 2) * 344
        y = 272 + (i // 2) * 44
        s.box(x, y, 130, 34, name, GREEN, size=12, weight="bold")
        s.text(x + 138, y + 22, what, 12, anchor="start")


@figure(400, "Two bugs that pass a check on a good day, and the tool that finds each")
def sanitizer_bugs(s: Svg) -> None:
    """The two planted bugs. Out of bounds: with the bound i <= n, thread n of the last block writes out[n], one float
    past the n the program allocated, into memory the allocator rounded up for, so nothing crashes; memcheck reports
    an invalid global write of size 4. The race: each thread writes tile[t] in shared memory and reads tile[255 - t],
    which a thread of another warp writes; without the barrier a warp can read before that write, and racecheck
    reports the hazard"""
    s.panel(30, 48, 340, 300, "memcheck: a write past the end")
    for j, (label, fill) in enumerate([("n - 3", GREEN), ("n - 2", GREEN), ("n - 1", GREEN), ("n", RED),
                                       ("n + 1", GREY), ("...", GREY)]):
        s.box(46 + j * 52, 170, 48, 36, label, fill, size=12)
    s.text(124, 226, "out: n floats", 12, weight="bold")
    s.text(280, 226, "rounded-up slack", 12)
    s.box(170, 92, 90, 34, "thread n", ORANGE, size=12, weight="bold")
    s.line(215, 126, 226, 168, arrow=True)
    s.lines(200, 258, ["the bound i <= n instead of i < n:", "one float past the allocation;",
                       "no crash, and the first n are right"], step=17, size=12)
    s.text(200, 328, "\"Invalid __global__ write of size 4\"", 12, fill=STRONG_RED, weight="bold")
    s.panel(390, 48, 340, 300, "racecheck: a read before its write")
    s.text(560, 92, "tile[256] in shared memory, by warp", 12)
    for w in range(8):
        s.box(406 + w * 38, 102, 36, 30, f"w{w}", BLUE if w else PURPLE, size=12)
    s.line(425, 138, 691, 138, arrow=True, stroke=STRONG_BLUE)
    s.text(560, 156, "thread t reads tile[255 - t]: another warp's", 12)
    s.box(420, 172, 130, 44, "warp 0 reads", PURPLE, size=12, weight="bold", sub="tile[224 to 255]")
    s.box(580, 172, 130, 44, "warp 7 writes", BLUE, size=12, weight="bold", sub="tile[224 to 255]")
    s.lines(560, 246, ["without __syncthreads() between the write", "and the read, nothing makes warp 0 wait:",
                       "the result depends on scheduling"], step=17, size=12)
    s.text(560, 328, "\"Race reported\": both source lines", 12, fill=STRONG_RED, weight="bold")
    s.caption(380, "Build with -lineinfo so that each report names the source line.", 12)


@figure(330, "One kernel, three ways from source to launch")
def three_launches(s: Svg) -> None:
    """Vector addition three ways. CUDA C++: nvcc compiles vector_add.cu ahead of time into the program, and the host
    launches the kernel with <<<blocks, 256>>>. CuPy: vector_add_kernel.cu, the same kernel with C linkage and no
    main, is compiled at run time by NVRTC through cp.RawModule (cached on disk), get_function finds the kernel by
    its unmangled name, and the launch passes the grid, the block and the arguments. Triton: a Python function marked
    @triton.jit is compiled at its first call, and add_kernel[grid] launches one program per block of 1024 elements"""
    routes = [("CUDA C++", [("vector_add.cu", "the kernel and a main", BLUE, 164),
                            ("nvcc", "ahead of time", PURPLE, 120),
                            ("<<<blocks, 256>>>", "one thread per element", GREEN, 190)]),
              ("CuPy", [("vector_add_kernel.cu", "the kernel, extern \"C\"", BLUE, 164),
                        ("RawModule: NVRTC", "at run time, cached", PURPLE, 170),
                        ("vector_add((blocks,), (256,), ...)", "get_function by name", GREEN, 240)]),
              ("Triton", [("@triton.jit", "Python, tl.* on blocks", BLUE, 164),
                          ("Triton compiler", "at the first call", PURPLE, 170),
                          ("add_kernel[grid](...)", "one program per 1024", GREEN, 190)])]
    for r, (name, items) in enumerate(routes):
        y = 58 + r * 80
        s.text(30, y + 27, name, 13, anchor="start", weight="bold")
        s.chain(120, y, items, gap=26)
    s.caption(310, "Every route ends in the same kind of launch: a grid of blocks running compiled device code.",
              12)
