"""The CUDA libraries chapter: cuBLASLt's fused epilogue and CUTLASS's tile hierarchy (the chapter's
cuBLAS and CUB figures are in matmul.py, beside the layouts the matmul chapter reuses)."""

from __future__ import annotations

from ..svg import BLUE, DEEP_ORANGE, GREEN, GREY, MUTED, ORANGE, PANEL, PURPLE, STRONG_GREEN, STRONG_RED, Svg


def cublaslt_epilogue() -> str:
    s = Svg(760, 400, "A linear layer Y = act(X W + b). Unfused: a cuBLAS GEMM writes Y to global memory, "
                      "and a second kernel reads Y, adds the bias, applies the activation and writes Y again. "
                      "Fused: cuBLASLt adds the bias and applies the activation to each tile of the result "
                      "while it is still in registers, in the GEMM's epilogue, and writes Y once. Below: a "
                      "matmul descriptor, a layout per operand and a preference go to the heuristic, which "
                      "returns a ranked list of algorithms for cublasLtMatmul")
    s.heading("cuBLASLt: the bias and the activation in the GEMM's epilogue")
    s.text(40, 66, "cuBLAS, then a kernel", 13, anchor="start", weight="bold")
    s.chain(40, 78, [("X, W", "bf16", BLUE, 80), ("GEMM", "tile in registers", PURPLE, 150),
                     ("Y", "global memory", ORANGE, 110), ("+ b, act", "reads Y, writes Y", PURPLE, 150),
                     ("Y", "bf16", GREEN, 80)], gap=24)
    s.text(40, 146, "Y written, read and written again: 2 x 2mn more bytes of traffic", 12, anchor="start",
           fill=STRONG_RED, weight="bold")
    s.text(40, 186, "cuBLASLt with CUBLASLT_EPILOGUE_RELU_BIAS or _GELU_BIAS", 13, anchor="start", weight="bold")
    s.chain(40, 198, [("X, W", "bf16", BLUE, 80), ("GEMM", "tile in registers", PURPLE, 150),
                      ("+ b, act", "same registers", PURPLE, 150), ("Y", "bf16", GREEN, 80)], gap=24)
    s.text(40, 266, "Y written once", 12, anchor="start", fill=STRONG_GREEN, weight="bold")
    # How an algorithm is chosen.
    s.rect(40, 290, 680, 74, fill=PANEL, width=1.0)
    s.chain(54, 304, [("descriptors", "epilogue, layouts, workspace", GREY, 160),
                      ("heuristic", "AlgoGetHeuristic", GREY, 140),
                      ("ranked algorithms", "each with its workspace", GREY, 170),
                      ("cublasLtMatmul", "one of them", GREY, 140)], gap=18)
    s.caption(388, "The heuristic's first choice is a guess: the page times every candidate it returned.", 12)
    return s.render()


def cutlass_tiles() -> str:
    s = Svg(760, 440, "CUTLASS's tile hierarchy for the page's bf16 GEMM with the Sm80 tensor-op defaults: "
                      "each thread block computes a 128 x 256 tile of C, stepping along K 64 at a time through "
                      "3 shared-memory stages; its 8 warps each own a 64 x 64 part; each warp covers its part "
                      "with 16 x 8 tiles of the mma.sync m16n8k16 instruction, 4 x 8 of them per step of 16 "
                      "along K; the epilogue then writes D = alpha times the accumulators plus beta C")
    s.heading("CUTLASS: a thread block's tile, a warp's tile, an instruction's tile")
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
    return s.render()
