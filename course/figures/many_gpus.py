"""The Many GPUs chapter: the tensor-parallel MLP block and its overlap."""

from __future__ import annotations

from ..svg import BLUE, GREEN, GREY, MUTED, ORANGE, STRONG_BLUE, STRONG_RED, Svg
from .card import figure


@figure(500, "Sequence-parallel in, column- then row-parallel GEMMs, sequence-parallel out (n = 2)", width=840)
def tensor_parallel(s: Svg) -> None:
    """The tensor-parallel MLP block on two ranks: each rank all-gathers every rank's tokens, multiplies them by its
    columns of W1, applies GELU, multiplies by the same rows of W2 into a partial sum, and a reduce-scatter sums the
    partials and hands each rank its own tokens back. Below, schematic timelines: without overlap the all-gather, the
    GEMMs and the reduce-scatter run one after another; in four chunks each chunk's GEMMs start when its all-gather
    is done and its reduce-scatter runs while the next chunk computes"""
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
    s.caption(470, "Schematic, not measured: what is not hidden is the first all-gather chunk, the last "
                   "reduce-scatter chunk,", 12)
    s.caption(488, "and whatever the collectives' kernels slow the GEMMs down by while they share the SMs.", 12)
