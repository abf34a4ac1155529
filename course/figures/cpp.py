"""The C/C++ refresher: where a variable lives and who frees it."""

from __future__ import annotations

from ..svg import BLUE, CARD, GREEN, GREY, MUTED, ORANGE, PURPLE, STRONG_RED, Svg
from .card import figure


@figure(420, "Stack, heap, static storage, and the device's heap")
def storage_lifetimes(s: Svg) -> None:
    """Where memory.c's variables live. Static storage holds calls for the whole run. The stack holds main's frame, with
    the pointer squares, and above it make_squares' frame, with local[4] and the pointer heap; that frame is gone
    when the function returns, so a pointer to local would dangle. The heap holds the n doubles malloc returned,
    which both pointers reach, until free. Device memory is a second heap, managed from the host with cudaMalloc and
    cudaFree; the host holds only its address"""
    s.panel(30, 50, 220, 290, "the stack")
    s.rect(46, 84, 188, 96, fill=CARD, dash="5 4")
    s.text(140, 104, "make_squares' frame", 12, weight="bold")
    s.box(58, 114, 80, 28, "local[4]", ORANGE, size=12)
    s.box(146, 114, 76, 28, "heap", BLUE, size=12)
    s.text(140, 166, "gone when it returns", 12, fill=STRONG_RED, weight="bold")
    s.rect(46, 196, 188, 70, fill=GREY)
    s.text(140, 216, "main's frame", 12, weight="bold")
    s.box(96, 226, 88, 28, "squares", BLUE, size=12)
    s.lines(140, 292, ["a frame lives until its call returns;", "8 MiB is typical on Linux"], step=16, size=12,
            fill=MUTED)
    s.panel(280, 50, 220, 170, "the heap")
    s.box(300, 84, 180, 40, "n doubles", GREEN, size=12, weight="bold", sub="from malloc")
    s.lines(390, 150, ["lives until free,", "whoever holds a pointer;", "as big as the machine allows"],
            step=16, size=12, fill=MUTED)
    s.line(222, 128, 298, 104, arrow=True)
    s.line(184, 240, 298, 116, arrow=True)
    s.panel(280, 240, 220, 100, "static storage")
    s.box(340, 270, 100, 28, "calls", PURPLE, size=12)
    s.text(390, 322, "the whole run", 12, fill=MUTED)
    s.panel(530, 50, 200, 290, "device memory")
    s.box(550, 84, 160, 40, "a device buffer", GREEN, size=12, weight="bold", sub="from cudaMalloc")
    s.lines(630, 150, ["a heap you manage", "from the host:", "cudaMalloc, cudaFree;", "the host holds only",
                       "its address"], step=16, size=12, fill=MUTED)
    s.caption(372, "Return a heap pointer, never the address of a local: the caller now owns it and must free "
                   "it once.", 12)
    s.caption(396, "Every malloc has exactly one free; C++'s RAII makes the destructor do it.", 12)


@figure(300, "Field order decides the padding: the same three fields in 24 bytes or in 16")
def struct_padding(s: Svg) -> None:
    """The bytes of the two structs of types.c. Padded, char tag then double value then char flag: tag at byte 0, 7
    bytes of padding so that value starts at 8, value at 8 to 15, flag at 16, and 7 bytes of padding to make the size
    24, a multiple of 8. Packed, double value then the two chars: value at 0 to 7, tag at 8, flag at 9, and 6 bytes
    of padding: 16 bytes"""
    cell = 26
    def row(y, name, fields):
        s.text(40, y - 10, name, 13, anchor="start", weight="bold")
        x = 40
        for label, size, fill in fields:
            s.rect(x, y, size * cell, 34, fill=fill, rx=0, width=1.0)
            s.grid(x, y, size * cell, 34, size, 1, width=0.4)
            s.text(x + size * cell / 2, y + 22, label, 12, weight="normal" if fill == GREY else "bold")
            x += size * cell
        for b in range(0, x // cell, 4):
            s.text(40 + b * cell + cell / 2, y + 52, str(b), 11, fill=MUTED)
    row(72, "Padded { char tag; double value; char flag; }: 24 bytes",
        [("tag", 1, ORANGE), ("pad", 7, GREY), ("value", 8, BLUE), ("flag", 1, ORANGE), ("pad", 7, GREY)])
    row(172, "Packed { double value; char tag; char flag; }: 16 bytes",
        [("value", 8, BLUE), ("tag", 1, ORANGE), ("flag", 1, ORANGE), ("pad", 6, GREY)])
    s.caption(276, "A double's offset is a multiple of 8, and the size a multiple of the largest alignment: "
                   "order fields largest first.", 12)


@figure(330, "One .cu file, several preprocessor passes: the macros tell them apart")
def preprocessor_passes(s: Svg) -> None:
    """nvcc preprocesses and compiles a .cu file more than once: once for the host, with __CUDACC__ defined and
    __CUDA_ARCH__ not defined, and once for each device architecture it targets, with __CUDA_ARCH__ defined, for
    example to 900 for sm_90. A block under #ifdef __CUDA_ARCH__ is compiled only in the device passes; one under #if
    __CUDA_ARCH__ >= 900 only in the passes for sm_90 and newer"""
    s.box(280, 50, 200, 44, "kernel.cu", BLUE, size=13, weight="bold", sub="#ifdef __CUDA_ARCH__ ...")
    passes = [("host pass", "__CUDACC__ defined", "no __CUDA_ARCH__", GREY),
              ("device pass, sm_80", "__CUDA_ARCH__ = 800", "the sm_80 code", GREEN),
              ("device pass, sm_90", "__CUDA_ARCH__ = 900", "the sm_90 code", GREEN)]
    for i, (name, a, b, fill) in enumerate(passes):
        x = 40 + i * 240
        s.line(380, 94, x + 100, 138, arrow=True)
        s.box(x, 140, 200, 44, name, fill, size=13, weight="bold", sub=a)
        s.text(x + 100, 206, b, 12)
    s.text(140, 226, "main, launches, host code", 12)
    s.text(500, 226, "kernels, __device__ functions", 12)
    for i in range(3):
        s.line(140 + i * 240, 240, 380 + (i - 1) * 60, 252, arrow=True)
    s.box(190, 254, 380, 36, "one executable: host code and a fat binary", PURPLE, size=12, weight="bold")
    s.caption(316, "#if __CUDA_ARCH__ >= 900 keeps a Hopper-only path out of the passes for older GPUs.", 12)


@figure(300, "RAII: the object owns the memory, and its destructor frees it on every way out")
def raii_ownership(s: Svg) -> None:
    """RAII with the Buffer class: the constructor allocates, the destructor frees when the object goes out of scope,
    whether by the end of the block, an early return or an exception. A copy is refused by the compiler, since two
    owners would free twice; a move hands the pointer to the new object and leaves the old one empty, so only one
    destructor frees"""
    s.chain(40, 56, [("Buffer a(n)", "constructor: malloc", GREEN, 160), ("use a.data()", None, GREY, 120),
                     ("end of scope", "or return, or exception", ORANGE, 180),
                     ("~Buffer()", "free, once", GREEN, 140)],
            gap=26)
    s.panel(40, 136, 320, 110, "Buffer b = a;   copy")
    s.lines(200, 184, ["deleted: does not compile", "(two owners would free twice)"], step=18, size=12,
            fill=STRONG_RED)
    s.panel(400, 136, 320, 110, "Buffer b = std::move(a);")
    s.box(420, 170, 130, 34, "a: nullptr", GREY, size=12)
    s.box(570, 170, 130, 34, "b: the memory", GREEN, size=12)
    s.text(560, 228, "a's destructor frees nothing", 12)
    s.caption(276, "Device memory, streams, events and library handles can be owned the same way.", 12)
