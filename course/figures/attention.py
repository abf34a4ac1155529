"""The Attention chapter: one head's shapes, the three-kernel version, the flash forward and backward,
and the number formats."""

from __future__ import annotations

from ..svg import BLUE, DEEP_ORANGE, GREEN, GREY, MUTED, ORANGE, PANEL, PURPLE, RED, STRONG_BLUE, Svg
from .card import figure


@figure(330, "One head: the inputs and output are N x d, the scores in between N x N")
def attention_shapes(s: Svg) -> None:
    """The shapes of one attention head: Q, K and V are N x d; the scores S = Q K^T / sqrt(d) and the probabilities P =
    softmax(S) are N x N; the output O = P V is N x d again"""
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
    s.caption(300, "Doubling N doubles Q, K, V and O but quadruples S and P: the fused kernels never store "
                   "them.", 12)


@figure(440, "Three kernels and two glue kernels: S and P pass between them through global memory")
def attention_three_kernels(s: Svg) -> None:
    """The three-kernel attention: a batched GEMM writes the fp32 scores S = Q K^T to global memory, a kernel masks them
    in place, the softmax reads S and writes fp32 P, a kernel converts P to bf16, and a second batched GEMM reads P
    and V and writes O; S and P are seq x seq per head and go through global memory each time"""
    y = 70
    s.box(40, y, 130, 50, "Q, K (bf16)", BLUE, size=13, weight="bold")
    steps = [("cuBLAS GEMM", "S = scale * Q K^T"), ("apply_mask", "S = -inf where hidden"),
             ("softmax_block", "P = softmax(S)"), ("to_bf16", "P in bf16"), ("cuBLAS GEMM", "O = P V")]
    data = [("S (fp32)", ORANGE), ("S (fp32)", ORANGE), ("P (fp32)", ORANGE), ("P (bf16)", ORANGE),
            ("O (bf16)", GREEN)]
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
    s.lines(380, 412, ["S and P hold seq x seq values for each of the batch x heads: they grow with the square of "
                       "the sequence,",
                       "while Q, K, V and O grow with it. A fused kernel never writes S or P."])


@figure(470, "The tile loop of flash v2: Q stays, K and V stream past it")
def flash_tile_loop(s: Svg) -> None:
    """The FlashAttention v2 tile loop: a block of 4 warps holds 64 query rows of Q in registers, 16 per warp; tiles of
    64 keys and values stream through two shared-memory stages; for each tile every warp updates its running maximum
    m, running sum l and accumulator o, and divides o by l once at the end"""
    # Global memory: K and V of one head, tiles of 64 keys.
    gx, gy, tw = 300, 72, 48
    s.text(gx - 10, gy + 18, "K, V in global memory", 12, anchor="end", weight="bold")
    s.text(gx - 10, gy + 34, "(one head)", 12, anchor="end")
    for j in range(8):
        fill = DEEP_ORANGE if j == 3 else (ORANGE if j < 3 else GREY)
        s.rect(gx + j * tw, gy, tw - 4, 40, fill=fill, rx=2, width=0.8)
        s.text(gx + j * tw + tw / 2 - 2, gy + 25, f"tile {j}" if j < 7 else "...", 12)
    s.text(gx + 4 * tw, gy - 10, "tiles of kBlockN = 64 keys (and their 64 values); n = 3 is in use", 12)
    # Shared memory: two stages.
    sx, sy = 300, 152
    s.rect(sx - 10, sy - 12, 390, 96, fill=PANEL, width=1.0)
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
    s.lines(qx + 95, qy + 178, ["Q loaded once into registers",
                                "(the mma's A-operand layout)"], 16)
    # The update per tile, for one warp's 16 rows.
    ux, uy = 290, 268
    s.rect(ux, uy, 450, 140, fill=GREEN, width=1.2)
    s.text(ux + 12, uy + 20, "each warp, for tile n (its 16 rows x 64 keys):", 12, anchor="start", weight="bold")
    steps = ["S = Q K^T (masked scores: -inf)",
             "m' = max(m, row max of S);  alpha = exp2(m - m')",
             "P = exp2(S - m');  l = alpha * l + row sum of P",
             "o = alpha * o + P V   (P stays in registers)",
             "m = m'; then wait for tile n + 1"]
    s.lines(ux + 24, uy + 44, [f"{i + 1}. {text}" for i, text in enumerate(steps)], 20, anchor="start")
    s.line(qx + 190, qy + 60, ux - 2, uy + 40, stroke=STRONG_BLUE, arrow=True)
    s.line(sx + 85, sy + 70, sx + 85, uy - 2, arrow=True)
    s.rect(40, 420, 700, 30, fill=ORANGE, width=1.0)
    s.text(390, 440, "After the last tile: O = o / l (one division per row) and logsumexp = m + ln l for the "
           "backward", 12)
    s.text(40, 372, "running, per row:", 12, anchor="start", weight="bold")
    s.text(40, 390, "m (max), l (sum), o (fp32)", 12, anchor="start")


@figure(460, "Backward v2: the keys stay, the queries stream (transposed to the forward)")
def flash_backward(s: Svg) -> None:
    """The tensor-core backward (v2): a block of 8 warps owns a tile of 128 keys, K and V in shared memory for the whole
    loop, each warp 16 keys with dK and dV in mma accumulators; query tiles of 64 rows stream through with Q, dO, the
    logsumexp and delta; per tile each warp recomputes P transposed, adds P^T dO to dV and dS^T Q to dK, and the
    block adds dS K to an fp32 dQ buffer with atomicAdd"""
    # Query tiles streaming.
    s.text(40, 60, "query tiles of kV2Rows = 64: Q, dO, logsumexp L, delta", 12, anchor="start", weight="bold")
    for i in range(6):
        fill = DEEP_ORANGE if i == 2 else (ORANGE if i < 2 else GREY)
        s.box(40 + i * 80, 70, 72, 32, f"tile {i}" if i < 5 else "...", fill, size=12)
    s.line(40 + 2 * 80 + 36, 104, 300, 140, arrow=True)
    # The block.
    s.rect(40, 142, 420, 160, fill=PANEL, width=1.2)
    s.text(50, 160, "block: 8 warps, keys j .. j + 127 (kV2Keys = 128)", 12, anchor="start", weight="bold")
    s.box(50, 170, 190, 30, "K_j, V_j in shared (once)", BLUE, size=12)
    s.box(250, 170, 200, 30, "Q, dO of the current tile", ORANGE, size=12)
    for w in range(8):
        s.box(50 + w * 50, 214, 44, 40, f"w{w}", GREEN, size=12)
    s.lines(250, 274, ["warp w: keys 16w .. 16w + 15; dK, dV in registers",
                       "(fp32 mma accumulators) for the whole loop"])
    # Per tile, per warp.
    x = 480
    s.text(x, 160, "each warp, per query tile:", 12, anchor="start", weight="bold")
    steps = ["S^T = K_j Q^T (16 keys x 64 rows)", "P^T = exp(S^T scaled - L)", "dV += P^T dO",
             "dP^T = V_j dO^T", "dS^T = P^T o (dP^T - delta)", "dK += dS^T Q", "dS^T -> shared"]
    s.lines(x + 8, 180, [f"{i + 1}. {t}" for i, t in enumerate(steps)], anchor="start")
    s.rect(40, 330, 680, 50, fill=PURPLE, width=1.0)
    s.lines(380, 350, ["then the block: dQ of the tile += dS K_j, added to an fp32 buffer with atomicAdd",
                       "(other blocks add their keys' parts); a last kernel scales it and rounds to bf16"])
    s.text(380, 410, "P and dS are rounded to bf16 before their products; a fully masked row (L = +inf) gives P = 0.",
           12)
    s.caption(440, "o: element-wise product. Tiles wholly before the block's first key are skipped under a "
                   "causal mask.", 12)


@figure(350, "Sign, exponent and fraction bits of each format")
def number_formats(s: Svg) -> None:
    """The bit layouts of the formats, one box per bit: fp32 has 1 sign, 8 exponent and 23 fraction bits; tf32 1, 8 and
    10 (stored as fp32, the low 13 fraction bits ignored); fp16 1, 5 and 10; bf16 1, 8 and 7; fp8 e4m3 1, 4 and 3;
    fp8 e5m2 1, 5 and 2"""
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
        s.key(30 + i * 180, y, fill, label, rx=1, width=0.6)
    s.caption(336, "bf16 keeps fp32's 8 exponent bits; fp16, the same size, has 3 fewer exponent bits "
                   "and 3 more fraction bits.", 12)


@figure(400, "Each query tile: unmasked key tiles, then masked ones; the rest never loaded", heading_size=14)
def triton_key_tiles(s: Svg) -> None:
    """Which key tiles each program of the Triton forward loads, with BLOCK_M = 128 queries and BLOCK_N = 64 keys.
    Causal: query tile i runs its first loop, without a mask, over key tiles 0 to 2i - 1, wholly below the diagonal;
    its second loop, masked, over tiles 2i and 2i + 1, which cross the diagonal; the tiles above are never loaded.
    With a key length kv_len: the tiles wholly inside it are unmasked, the one it cuts is masked, and those beyond it
    are never loaded"""
    fills = {"full": GREEN, "masked": ORANGE, "skip": GREY}
    def panel(x, title, kind_of):
        y, w, h = 74, 36, 56  # a key tile is 64 keys wide, a query tile 128 rows high: the same scale
        s.text(x + 4 * w, y - 12, title, 13, weight="bold")
        for i in range(4):
            s.text(x - 8, y + i * h + h / 2 + 4, f"q tile {i}", 12, anchor="end")
            for j in range(8):
                s.rect(x + j * w, y + i * h, w, h, fill=fills[kind_of(i, j)], rx=0, width=0.8)
        for j in range(8):
            s.text(x + j * w + w / 2, y + 4 * h + 18, str(j), 12)
        s.text(x + 4 * w, y + 4 * h + 36, "key tile", 12)
    panel(90, "causal", lambda i, j: "full" if j < 2 * i else "masked" if j < 2 * i + 2 else "skip")
    s.line(90, 74, 90 + 8 * 36, 74 + 4 * 56, stroke=STRONG_BLUE, width=1.5)
    panel(440, "not causal, kv_len = 352 keys (5.5 tiles)",
          lambda i, j: "full" if j < 5 else "masked" if j == 5 else "skip")
    s.line(440 + 5.5 * 36, 66, 440 + 5.5 * 36, 74 + 4 * 56 + 6, stroke=STRONG_BLUE, width=1.5)
    s.key(40, 342, GREEN, "first loop: no mask (MASKED = False)")
    s.key(330, 342, ORANGE, "second loop: scores masked to -inf")
    s.key(610, 342, GREY, "never loaded")
    s.caption(384, "BLOCK_M = 128 and BLOCK_N = 64, one of the shapes autotuning tries; blue: the diagonal, "
                   "kv_len.", 12)


@figure(370, "llm.c: one training step, and the header behind each part")
def llmc_step(s: Svg) -> None:
    """One training step of llm.c's train_gpt2.cu and the header behind each part. gpt2_forward: encoder.cuh embeds the
    tokens; each of the L layers runs layernorm.cuh, matmul.cuh (cuBLASLt), attention.cuh and gelu.cuh;
    fused_classifier.cuh computes the softmax, the loss and the logits' gradient in one kernel.
    gpt2_backward_and_reduce runs the layers in reverse, then the encoder's backward without atomics, and with
    several GPUs zero.cuh reduces the gradients with NCCL. gpt2_update: global_norm.cuh for clipping and adamw.cuh,
    which keeps fp32 master weights and rounds them stochastically to bf16"""
    lanes = [("gpt2_forward", [("encoder", "token + position embeddings", BLUE, 200),
                               ("L layers: layernorm, matmul,", "attention, gelu (matmul via cuBLASLt)", PURPLE, 260),
                               ("fused_classifier", "loss and dlogits", ORANGE, 180)]),
             ("gpt2_backward_and_reduce", [("L layers, reversed", "the same headers", PURPLE, 200),
                                           ("encoder backward", "sorted work: no atomics", BLUE, 200),
                                           ("zero", "several GPUs: NCCL averages", GREY, 200)]),
             ("gpt2_update", [("global_norm", "for clipping", GREEN, 200),
                              ("adamw", "fp32 master weights, bf16 copy", GREEN, 260)])]
    for i, (name, items) in enumerate(lanes):
        y = 56 + i * 86
        s.chain(30, y + 24, items, gap=28, title=name)
    s.text(380, 326, "The names are headers under llmc/ (encoder.cuh and so on); the table below maps each to "
           "its course page.", 12)
    s.caption(352, "Kernel launches on one compute stream (NCCL's on a stream of its own); floatX, bf16 by "
                   "default, is fixed at compile time.", 12)
