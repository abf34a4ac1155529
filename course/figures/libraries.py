"""The CUDA libraries chapter: cuBLASLt's fused epilogue and CUTLASS's tile hierarchy (the chapter's
cuBLAS and CUB figures are in matmul.py, beside the layouts the matmul chapter reuses)."""

from __future__ import annotations

from ..svg import BLUE, DEEP_ORANGE, GREEN, GREY, MUTED, ORANGE, PANEL, PURPLE, STRONG_GREEN, STRONG_RED, Svg
from .card import figure


@figure(400, "cuBLASLt: the bias and the activation in the GEMM's epilogue")
def cublaslt_epilogue(s: Svg) -> None:
    """A linear layer Y = act(X W + b). Unfused: a cuBLAS GEMM writes Y to global memory, and a second kernel reads Y,
    adds the bias, applies the activation and writes Y again. Fused: cuBLASLt adds the bias and applies the
    activation to each tile of the result while it is still in registers, in the GEMM's epilogue, and writes Y once.
    Below: a matmul descriptor, a layout per operand and a preference go to the heuristic, which returns a ranked
    list of algorithms for cublasLtMatmul"""
    s.chain(40, 78, [("X, W", "bf16", BLUE, 80), ("GEMM", "tile in registers", PURPLE, 150),
                     ("Y", "global memory", ORANGE, 110), ("+ b, act", "reads Y, writes Y", PURPLE, 150),
                     ("Y", "bf16", GREEN, 80)], gap=24, title="cuBLAS, then a kernel")
    s.text(40, 146, "Y written, read and written again: 2 x 2mn more bytes of traffic", 12, anchor="start",
           fill=STRONG_RED, weight="bold")
    s.chain(40, 198, [("X, W", "bf16", BLUE, 80), ("GEMM", "tile in registers", PURPLE, 150),
                      ("+ b, act", "same registers", PURPLE, 150), ("Y", "bf16", GREEN, 80)], gap=24,
            title="cuBLASLt with CUBLASLT_EPILOGUE_RELU_BIAS or _GELU_BIAS")
    s.text(40, 266, "Y written once", 12, anchor="start", fill=STRONG_GREEN, weight="bold")
    # How an algorithm is chosen.
    s.rect(40, 290, 680, 74, fill=PANEL, width=1.0)
    s.chain(54, 304, [("descriptors", "epilogue, layouts, workspace", GREY, 160),
                      ("heuristic", "AlgoGetHeuristic", GREY, 140),
                      ("ranked algorithms", "each with its workspace", GREY, 170),
                      ("cublasLtMatmul", "one of them", GREY, 140)], gap=18)
    s.caption(388, "The heuristic's first choice is a guess: the page times every candidate it returned.", 12)


@figure(440, "CUTLASS: a thread block's tile, a warp's tile, an instruction's tile")
def cutlass_tiles(s: Svg) -> None:
    """CUTLASS's tile hierarchy for the page's bf16 GEMM with the Sm80 tensor-op defaults: each thread block computes a
    128 x 256 tile of C, stepping along K 64 at a time through 3 shared-memory stages; its 8 warps each own a 64 x 64
    part; each warp covers its part with 16 x 8 tiles of the mma.sync m16n8k16 instruction, 4 x 8 of them per step of
    16 along K; the epilogue then writes D = alpha times the accumulators plus beta C"""
    top = 74
    s.text(130, top - 10, "C: one tile per block", 13, weight="bold")
    s.rect(40, top, 180, 180, fill=GREY, rx=0, width=1.2)
    s.grid(40, top, 180, 180, 4, 8)
    s.rect(85, top + 45, 45, 22.5, fill=DEEP_ORANGE, rx=0, width=1.2)
    s.text(130, top + 200, "block tile 128 x 256", 12)
    s.text(130, top + 218, "(ThreadblockShape, k 64)", 12)
    s.text(400, top - 10, "block tile: 2 x 4 warps", 13, weight="bold")
    bx, by, bw, bh = 290, top, 220, 110
    s.rect(bx, by, bw, bh, fill=ORANGE, rx=0, width=1.2)
    s.grid(bx, by, bw, bh, 4, 2, width=1.0)
    s.rect(bx, by, bw / 4, bh / 2, fill=PURPLE, rx=0, width=1.2)
    s.text(bx + bw / 8, by + bh / 4 + 4, "warp 0", 12)
    s.text(400, by + bh + 20, "warp tile 64 x 64 (WarpShape)", 12)
    s.line(130, top + 67, bx - 2, by + bh / 2, stroke=MUTED, dash="4 3")
    s.text(650, top - 10, "warp tile: 4 x 8 mma", 13, weight="bold")
    wx, wy, ww = 570, top, 160
    s.rect(wx, wy, ww, ww, fill=PURPLE, rx=0, width=1.2)
    s.grid(wx, wy, ww, ww, 8, 4, width=0.8)
    s.rect(wx, wy, ww / 8, ww / 4, fill=BLUE, rx=0, width=1.2)
    s.text(650, wy + ww + 20, "m16n8k16: 16 x 8 each", 12)
    s.line(bx + bw / 4, by + bh / 4, wx - 2, wy + ww / 2, stroke=MUTED, dash="4 3")
    # Along K: the stages, then the epilogue.
    s.text(40, 318, "along K:", 13, anchor="start", weight="bold")
    for i in range(3):
        s.box(120 + i * 110, 296, 100, 40, f"stage {i}", GREEN, size=12, weight="bold", sub="A, B slices")
    s.line(444, 316, 476, 316, arrow=True)
    s.text(460, 308, "end", 11, fill=MUTED)
    s.box(478, 296, 240, 40, "epilogue", PURPLE, size=12, weight="bold", sub="D = alpha acc + beta C, to memory")
    s.text(120, 356, "cp.async fills the 3 shared-memory stages in turn, k 64 each, ahead of the mma", 12,
           anchor="start")
    s.lines(380, 396, ["Each level is a template parameter with a default for bf16 on Sm80 "
                       "(default_gemm_configuration.h);",
                       "override any of them in the Gemm type. CUTLASS 3 on Hopper: TMA, wgmma, clusters."],
            step=18, size=12)


@figure(420, "cuRAND: a buffer filled by the library, or a generator in every thread")
def curand_apis(s: Svg) -> None:
    """cuRAND's two APIs. Host API: a generator created on the host fills a device buffer with the library's kernel, and
    your kernel reads the buffer. Device API: each thread of your kernel calls curand_init(seed, subsequence,
    offset), keeps the state in registers and draws numbers where it needs them. Below, the numbers of one seed: one
    row per subsequence (thread t uses subsequence t), the offset skips the first values of each; Philox computes
    each value from the seed and its position, so skipping costs nothing"""
    s.chain(40, 76, [("generator", "type, seed, offset", GREY, 150),
                     ("library kernel", "curandGenerate...", PURPLE, 150),
                     ("device buffer", "n numbers", ORANGE, 130), ("your kernel", "reads them", PURPLE, 140)],
            gap=26, title="host API (curand.h)")
    s.chain(40, 170, [("your kernel, thread t", "curand_init(seed, t, offset)", PURPLE, 220),
                      ("state", "in registers", GREEN, 120), ("curand_uniform", "where it is needed", GREEN, 170)],
            gap=26, title="device API (curand_kernel.h)")
    # The sequence of one seed, split into subsequences.
    y0, cell = 256, 30
    s.text(40, y0 - 10, "one seed's numbers: a row per subsequence", 13, anchor="start", weight="bold")
    for t in range(4):
        y = y0 + t * 26
        s.text(150, y + 17, f"subsequence {t}", 12, anchor="end")
        for i in range(16):
            skipped = i < 3
            s.rect(160 + i * cell, y, cell - 2, 22, fill=GREY if skipped else BLUE, rx=2, width=0.6)
        s.text(160 + 16 * cell + 8, y + 17, f"thread {t}", 12, anchor="start")
    s.key(160, y0 + 112, GREY, "offset 3: skipped")
    s.key(360, y0 + 112, BLUE, "drawn in order by the thread")
    s.caption(404, "Philox: each value is a function of (seed, subsequence, position), so any start costs "
                   "nothing to reach.", 12)


@figure(400, "cuBLASXt: tiles of C in host memory, dealt to the GPUs, panels streamed over PCIe", heading_size=14)
def cublasxt_tiles(s: Svg) -> None:
    """cuBLASXt: A, B and C stay in host memory, cut into square tiles of BlockDim x BlockDim. The tiles of C are dealt
    to the GPUs round-robin, one CPU thread per GPU; to compute a tile of C, its GPU streams the row of A tiles and
    the column of B tiles it needs over PCIe, multiplies and accumulates them, overlapping the copies with the
    products, and copies the tile of C back"""
    s.panel(30, 48, 420, 300, "host memory")
    t = 34
    ax, ay = 60, 190     # A: 4 x 3 tiles, left of C
    bx, by = 200, 76     # B: above C
    s.rect(ax, ay, 3 * t, 4 * t, fill=GREY, rx=0, width=1.2)
    s.rect(ax, ay + t, 3 * t, t, fill=BLUE, rx=0, width=1.0)
    s.grid(ax, ay, 3 * t, 4 * t, 3, 4)
    s.text(ax + 1.5 * t, ay + 4 * t + 18, "A", 13, weight="bold")
    s.rect(bx, by, 4 * t, 3 * t, fill=GREY, rx=0, width=1.2)
    s.rect(bx + 2 * t, by, t, 3 * t, fill=BLUE, rx=0, width=1.0)
    s.grid(bx, by, 4 * t, 3 * t, 4, 3)
    s.text(bx + 4 * t + 14, by + 1.5 * t + 5, "B", 13, weight="bold")
    s.rect(bx, ay, 4 * t, 4 * t, fill=GREY, rx=0, width=1.2)
    s.grid(bx, ay, 4 * t, 4 * t, 4, 4)
    s.rect(bx + 2 * t, ay + t, t, t, fill=DEEP_ORANGE, rx=0, width=1.2)
    s.text(bx + 4 * t + 14, ay + 2 * t + 5, "C", 13, weight="bold")
    s.panel(490, 48, 240, 140, "GPU 0")
    s.box(510, 84, 200, 40, "a tile of C", ORANGE, size=12, weight="bold", sub="accumulates A x B tiles")
    s.text(610, 146, "its row of A, its column of B,", 12)
    s.text(610, 164, "streamed in, pipelined", 12)
    s.panel(490, 208, 240, 140, "GPU 1")
    s.box(510, 244, 200, 40, "another tile of C", ORANGE, size=12, weight="bold", sub="round-robin")
    s.text(610, 306, "one CPU thread per GPU", 12)
    s.line(bx + 3 * t + 4, ay + 1.5 * t, 508, 110, arrow=True)
    s.text(420, 166, "PCIe", 12, fill=MUTED)
    s.caption(372, "A GEMM does 2n^3 operations on 3n^2 values: large enough, the products hide the copies.", 12)


@figure(360, "Ring all-reduce: n - 1 steps to reduce-scatter, n - 1 to all-gather")
def ring_allreduce(s: Svg) -> None:
    """A ring all-reduce over 4 GPUs, each buffer cut into 4 chunks. The GPUs form a ring, each sending to the next. At
    the start every GPU holds its own values of all 4 chunks. After the reduce-scatter phase, 3 steps in which each
    GPU sends one chunk to its neighbour and adds the one it receives, GPU r holds the complete sum of chunk r + 1
    (mod 4). After the all-gather phase, 3 more steps that pass the summed chunks round, every GPU holds every sum.
    Each GPU sends 2 (n - 1) / n of the buffer in all"""
    n, c = 4, 34
    for r in range(n):  # the ring
        x = 190 + r * 110
        s.box(x, 50, 80, 30, f"GPU {r}", GREY, size=12, weight="bold")
        if r < n - 1:
            s.line(x + 80, 65, x + 108, 65, arrow=True)
    s.line(190 + 3 * 110 + 40, 80, 190 + 3 * 110 + 40, 92)
    s.line(190 + 3 * 110 + 40, 92, 230, 92)
    s.line(230, 92, 230, 82, arrow=True)
    stages = [("start", lambda r, k: (f"x{r}", BLUE)),
              ("after reduce-scatter", lambda r, k: ("sum", GREEN) if k == (r + 1) % n else ("", GREY)),
              ("after all-gather", lambda r, k: ("sum", GREEN))]
    for i, (title, cell) in enumerate(stages):
        x0 = 70 + i * 230
        s.text(x0 + 2 * c, 128, title, 13, weight="bold")
        for k in range(n):
            s.text(x0 + k * c + c / 2, 150, f"c{k}", 11, fill=MUTED)
        for r in range(n):
            s.text(x0 - 8, 176 + r * 32, f"GPU {r}", 11, anchor="end")
            for k in range(n):
                label, fill = cell(r, k)
                s.box(x0 + k * c, 156 + r * 32, c - 4, 28, label, fill, size=11)
        if i:
            s.line(x0 - 70, 220, x0 - 50, 220, arrow=True)
            s.text(x0 - 60, 210, "3 steps", 11, fill=MUTED)
    s.caption(310, "Each GPU sends 2 (n - 1) / n of the buffer: below twice its size however many GPUs there "
                   "are.", 12)
    s.caption(334, "The price is 2 (n - 1) steps of latency; a tree takes O(log n) steps, better for small "
                   "messages.", 12)


@figure(290, "Convolution through the FFT: pad, transform, multiply, transform back, scale")
def fft_convolution(s: Svg) -> None:
    """A linear convolution through cuFFT: the signal x of n samples and the filter h of t taps are both zero-padded to
    a length N of at least n + t - 1, so that the circular convolution never wraps around; an R2C transform of each
    gives N / 2 + 1 complex coefficients; the spectra are multiplied element by element; a C2R transform returns N
    reals, which are divided by N because cuFFT does not scale; the first n + t - 1 are the convolution"""
    def padded(x, y, real, label):
        s.text(x - 10, y + 19, label, 12, anchor="end", weight="bold")
        for i in range(10):
            s.rect(x + i * 16, y, 14, 26, fill=BLUE if i < real else GREY, rx=2, width=0.6)
    padded(70, 60, 6, "x")
    padded(70, 124, 3, "h")
    s.text(150, 104, "n = 6 samples, zeros to N = 10", 11, fill=MUTED)
    s.text(150, 168, "t = 3 taps, zeros to N", 11, fill=MUTED)
    for y in (55, 119):
        s.chain(270, y, [("R2C", "N/2 + 1 complex", PURPLE, 120)], h=36)
        s.line(232, y + 18, 268, y + 18, arrow=True)
    s.line(390, 73, 418, 96, arrow=True)
    s.line(390, 137, 418, 114, arrow=True)
    end = s.chain(420, 85, [("X x H", "pointwise", ORANGE, 90), ("C2R, / N", "N reals", PURPLE, 100)], h=40, gap=20)
    s.line(end, 105, end + 14, 105, arrow=True)
    for i in range(10):
        s.rect(end + 16 + i * 9, 92, 8, 26, fill=GREEN if i < 8 else GREY, rx=1, width=0.5)
    s.text(end + 61, 134, "y: first 8", 11, fill=MUTED)
    s.lines(380, 210, ["N >= n + t - 1: the circular convolution equals the linear one (nothing wraps round).",
                       "The first n + t - 1 outputs are the result; cuFFT's inverse does not divide by N."],
            step=20, size=12)
    s.caption(268, "The direct sum does t multiply-adds per output; the FFT does O(N log N) work whatever t is.",
              12)
