"""The MNIST final project: the IDX file's bytes, the fused passes of version 3 and the shared-memory
layout that version 4's tensor-core convolution reads with ldmatrix."""

from __future__ import annotations

from ..svg import BLUE, DEEP_ORANGE, GREEN, GREY, MUTED, ORANGE, PURPLE, STRONG_GREEN, STRONG_RED, Svg
from .card import figure


@figure(390, "An IDX file: a big-endian header, then the raw bytes, row-major")
def idx_file(s: Svg) -> None:
    """The bytes of train-images-idx3-ubyte: a 16-byte header of four big-endian 32-bit integers (the magic number 00 00
    08 03: unsigned bytes, 3 dimensions; then 60000, 28 and 28), then the pixels row-major, 784 bytes per image,
    image i at offset 16 + 784 i; the labels file is the same with magic 00 00 08 01, one size, and one byte per
    label"""
    fields = [("magic", ["00", "00", "08", "03"], "0x00000803", ORANGE),
              ("images", ["00", "00", "EA", "60"], "60000", BLUE),
              ("rows", ["00", "00", "00", "1C"], "28", BLUE),
              ("columns", ["00", "00", "00", "1C"], "28", BLUE)]
    x0, y, c = 40, 80, 40
    s.text(x0, y - 12, "train-images-idx3-ubyte, offsets 0 to 15: the header", 13, anchor="start", weight="bold")
    for f, (name, octets, value, fill) in enumerate(fields):
        for b, octet in enumerate(octets):
            hot = name == "magic" and b >= 2
            s.box(x0 + (4 * f + b) * c, y, c - 2, 34, octet, DEEP_ORANGE if hot else fill, size=13)
        mid = x0 + (4 * f + 2) * c - 1
        s.text(mid, y + 52, name, 12, weight="bold")
        s.text(mid, y + 68, value, 12)
    s.lines(x0 + 40, y + 92, ["third byte 08: the type (unsigned byte)", "fourth byte 03: three dimensions"],
            step=16, size=12, anchor="start", fill=MUTED)
    # The data: images one after another, each 28 x 28 bytes row-major.
    y2 = 236
    s.text(x0, y2 - 12, "offset 16 on: the pixels, one byte each (0 white to 255 black), row-major", 13,
           anchor="start", weight="bold")
    spans = [("image 0", "offsets 16 to 799", GREEN), ("image 1", "800 to 1583", GREEN),
             ("image 2", "1584 to 2367", GREEN), ("...", "", GREY), ("image 59999", "to the last byte", GREEN)]
    for i, (label, sub, fill) in enumerate(spans):
        s.box(x0 + i * 138, y2, 132, 44, label, fill, size=12, weight="bold", sub=sub or None)
    s.text(x0, y2 + 64, "each image: row 0 (28 bytes), row 1, ... row 27", 12, anchor="start")
    s.text(380, y2 + 96, "length = 4 + 4 x 3 + 60000 x 28 x 28 = 47,040,016 bytes: anything else is cut short "
           "or not this file", 12)
    s.caption(y2 + 124, "The labels file: magic 00 00 08 01, one size (60000), then one byte (0 to 9) per image.",
              12)


@figure(330, "The network: shapes per image, and the weights of each layer")
def mnist_network(s: Svg) -> None:
    """The network, for one image: a 1 x 28 x 28 image; conv1, 32 filters of 3 x 3 without bias, gives 32 x 28 x 28;
    batch norm, ReLU and 2 x 2 max pooling give 32 x 14 x 14; conv2, 64 filters of 3 x 3 x 32, gives 64 x 14 x 14;
    batch norm, ReLU and pooling give 64 x 7 x 7, 3136 values; fc1 with ReLU gives 128; fc2 gives 10 logits, which
    the cross-entropy loss turns into a loss through a log-softmax"""
    layer, shape = PURPLE, BLUE
    s.chain(30, 56, [("1 x 28 x 28", "image", shape, 110), ("conv1 3 x 3", "288 weights", layer, 120),
                     ("32 x 28 x 28", None, shape, 120), ("BN, ReLU, pool", "64 BN parameters", layer, 150),
                     ("32 x 14 x 14", None, shape, 120)], gap=20)
    s.chain(30, 146, [("conv2 3 x 3 x 32", "18,432 weights", layer, 150), ("64 x 14 x 14", None, shape, 120),
                      ("BN, ReLU, pool", "128 BN parameters", layer, 150),
                      ("64 x 7 x 7", "= 3136, flattened", shape, 140)], gap=20)
    s.chain(30, 236, [("fc1 + ReLU", "401,536 parameters", layer, 140), ("128", None, shape, 70),
                      ("fc2", "1,290 parameters", layer, 110), ("10 logits", None, shape, 100),
                      ("cross-entropy", "log-softmax inside", GREEN, 150)], gap=20)
    s.line(690, 100, 690, 120)
    s.line(690, 120, 105, 120)
    s.line(105, 120, 105, 144, arrow=True)
    s.line(580, 190, 580, 212)
    s.line(580, 212, 100, 212)
    s.line(100, 212, 100, 234, arrow=True)
    s.caption(310, "No convolution bias: batch norm subtracts each channel's mean, which cancels it exactly.", 12)


@figure(400, "Implicit GEMM: the im2col matrix is gathered a slice at a time, never stored")
def implicit_gemm(s: Svg) -> None:
    """A convolution as a matrix product: the 3 x 3 neighbourhood of one output position, over all C input channels, is
    one column of the im2col matrix, 9C values ordered q = (c, r, s); Y (K x NHW) = W (K x 9C) times col (9C x NHW).
    The implicit GEMM never stores col: a block computing a 64 x 64 tile of Y gathers each 16-row slice of its 64
    columns straight from the input into shared memory, computing the addresses as it goes"""
    # The input: one channel of one image, a 3 x 3 neighbourhood.
    ix, iy, c = 30, 90, 14
    s.text(ix + 4 * c, iy - 12, "input x, channel c", 12, weight="bold")
    s.rect(ix, iy, 8 * c, 8 * c, fill=GREY, rx=0, width=1.0)
    s.grid(ix, iy, 8 * c, 8 * c, 8, 8, width=0.4)
    s.rect(ix + 2 * c, iy + 3 * c, 3 * c, 3 * c, fill=ORANGE, rx=0, width=1.2)
    s.rect(ix + 3 * c, iy + 4 * c, c, c, fill=DEEP_ORANGE, rx=0, width=1.0)
    s.lines(ix + 4 * c, iy + 8 * c + 20, ["3 x 3 around one", "output position,", "all C channels:",
                                          "9C values"], step=16, size=12)
    # The product Y = W col.
    cx, cy, cw, ch = 260, 70, 290, 108   # col: 9C x NHW
    wx, wy = 160, 200                    # W: K x 9C, to the left of Y
    s.rect(cx, cy, cw, ch, fill=GREY, rx=0, width=1.2)
    s.rect(cx + 60, cy, 10, ch, fill=ORANGE, rx=0, width=1.0)
    s.line(ix + 5 * c + 2, iy + 4.5 * c, cx + 58, iy + 4.5 * c, arrow=True)
    s.rect(cx + 150, cy + 36, 60, 18, fill=GREEN, rx=0, width=1.2)
    s.text(cx + cw + 8, cy + 20, "col: 9C x NHW", 12, anchor="start", weight="bold")
    s.text(cx + cw + 8, cy + 38, "one column per", 12, anchor="start")
    s.text(cx + cw + 8, cy + 54, "output position", 12, anchor="start")
    s.text(cx + cw + 8, cy + 80, "green: a 16-row slice,", 12, anchor="start")
    s.text(cx + cw + 8, cy + 96, "gathered into shared", 12, anchor="start")
    s.text(cx + cw + 8, cy + 112, "memory, then dropped", 12, anchor="start")
    s.rect(wx, wy, 90, 90, fill=BLUE, rx=0, width=1.2)
    s.text(wx + 45, wy + 112, "W: K x 9C", 12, weight="bold")
    s.rect(cx, wy, cw, 90, fill=GREY, rx=0, width=1.2)
    s.rect(cx + 150, wy + 15, 60, 60, fill=PURPLE, rx=0, width=1.2)
    s.text(cx + 180, wy + 50, "64 x 64", 12)
    s.text(cx + cw + 8, wy + 40, "Y = W col: K x NHW", 12, anchor="start", weight="bold")
    s.text(cx + cw + 8, wy + 58, "a block's tile", 12, anchor="start")
    s.line(cx + 180, cy + ch + 2, cx + 180, wy + 13, stroke=MUTED, dash="4 3")
    s.caption(340, "An explicit im2col would hold nine times the input and make a round trip through DRAM.", 12)
    s.caption(362, "K = 64 output channels for conv2; the tile is 32 x 64 for conv1's 32.", 12)


@figure(380, "Fusion: the same layer, the full-size tensor through DRAM eight times, then twice")
def fused_passes(s: Svg) -> None:
    """Version 2's forward pass after the first convolution: the convolution writes Y; the batch-norm statistics read Y
    twice; normalising reads Y and writes N; the ReLU reads N and writes R; pooling reads R and writes P, a quarter
    of the size: eight full-size passes through DRAM. Version 3: the convolution adds each channel's sums in its
    epilogue while it writes Y, and one kernel reads Y once, normalises, takes the 2 x 2 maximum, applies the ReLU
    and writes P: two full-size passes"""
    k, t = 80, 48  # widths of a kernel box and of a tensor box
    s.chain(40, 78, [("conv", "writes Y", PURPLE, k), ("Y", None, ORANGE, t), ("BN stats", "reads Y x2", PURPLE, k),
                     ("normalise", "reads Y", PURPLE, k), ("N", None, ORANGE, t), ("ReLU", None, PURPLE, k),
                     ("R", None, ORANGE, t), ("max pool", None, PURPLE, k), ("P", "1/4", GREEN, t)], gap=12,
            title="version 2: five kernels")
    s.text(40, 148, "write Y, read Y three times, write and read N, write and read R: 8 full-size passes",
           12, anchor="start", fill=STRONG_RED, weight="bold")
    s.chain(40, 208, [("conv + BN sums", "sums in the epilogue", PURPLE, 170), ("Y", None, ORANGE, t),
                      ("normalise + max + ReLU", "one thread per pooled output", PURPLE, 250),
                      ("P", "1/4", GREEN, t)], gap=24, title="version 3: two kernels on the tensor's path")
    s.box(326, 290, 190, 36, "scale, shift from the sums", GREY, size=12)
    s.line(421, 290, 421, 254, arrow=True)
    s.text(40, 312, "write Y, read Y once:", 12, anchor="start", fill=STRONG_GREEN, weight="bold")
    s.text(40, 328, "2 full-size passes", 12, anchor="start", fill=STRONG_GREEN, weight="bold")
    s.caption(360, "max(relu(a), relu(b)) = relu(max(a, b)): one ReLU per window. The backward pass is fused "
                   "the same way.", 12)


@figure(440, "conv2 on tensor cores: the image in shared memory is already the B operand")
def tensor_core_conv(s: Svg) -> None:
    """conv2 in version 4: one 14 x 14 image of 32 channels sits in shared memory as Is, one row per position of a 16 x
    16 grid with a zero border, 32 bf16 channels and 8 bf16 of padding per row. For tap (r, s) and channels c0 to c0
    + 15, a fragment of 8 output positions is 8 rows of Is shifted by r rows and s columns of the grid; ldmatrix .x2
    reads them, lanes 0 to 7 giving the addresses of channels c0 to c0 + 7 and lanes 8 to 15 those of c0 + 8 to c0 +
    15, and the warp receives the 16 x 8 B fragment of mma.sync: im2col is never formed"""
    # Left: the 16 x 16 grid of positions, a zero border round the 14 x 14 image.
    gx, gy, c = 40, 64, 14
    s.rect(gx, gy, 16 * c, 16 * c, fill=GREY, rx=0, width=1.2)
    s.rect(gx + c, gy + c, 14 * c, 14 * c, fill=BLUE, rx=0, width=1.0)
    s.grid(gx, gy, 16 * c, 16 * c, 16, 16, width=0.3)
    for x in range(8):  # the fragment's 8 output positions (row 0, columns 0-7) and the rows tap (0, 0) reads
        s.rect(gx + (x + 1) * c, gy + c, c, c, fill=GREEN, rx=0, width=0.8)
        s.rect(gx + x * c, gy, c, c, fill=DEEP_ORANGE, rx=0, width=0.8)
    s.text(gx + 8 * c, gy + 16 * c + 20, "Is: 16 x 16 positions, P = (y + 1) x 16 + x + 1", 12)
    s.key(gx, gy + 16 * c + 36, GREEN, "8 output positions: the rows tap (1, 1) reads")
    s.key(gx, gy + 16 * c + 60, DEEP_ORANGE, "the rows tap (0, 0) reads: 17 before")
    s.key(gx, gy + 16 * c + 84, GREY, "zero border: no bounds test in the loop")
    # Right: 8 rows of Is, each 32 channels and 8 of padding, in 16-byte units of 8 bf16.
    rx, ry, u = 370, 70, 70
    s.text(rx + 2.5 * u, ry - 10, "8 rows of Is (one per position), 16-byte units of 8 bf16", 12, weight="bold")
    units = ["c0-7", "c8-15", "c16-23", "c24-31", "pad"]
    for r in range(8):
        for j, name in enumerate(units):
            fill = (DEEP_ORANGE if j < 2 else BLUE) if j < 4 else GREY
            s.box(rx + j * u, ry + r * 22, u - 2, 20, name, fill, size=11)
    s.text(rx, ry + 8 * 22 + 20, "orange: k-step c0 = 0 of one tap, 16 channels", 12, anchor="start")
    s.lines(rx, ry + 8 * 22 + 56, ["ldmatrix.x2: lanes 0-7 give the 8 rows' c0-7 addresses,",
                                   "lanes 8-15 their c8-15: the warp gets B (16 k x 8 positions)",
                                   "in mma.sync m16n8k16's register layout.",
                                   "k = (r, s, c): 16 consecutive k are one tap, 16 channels.",
                                   "A row is 5 units (odd): 8 rows hit 8 groups of banks."],
            step=20, size=12, anchor="start")
    s.caption(420, "Per fragment: 9 taps x 2 k-steps. The weights, A, are read from shared memory by ldmatrix.x4 "
                   "the same way.", 12)
