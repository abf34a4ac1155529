"""The Triton and PyTorch extensions chapters: Triton's programs and masks, the checks of a host function, the
dispatcher's entries for a registered operator, the path from a compiled function to Triton kernels, and
how a package is built."""

from __future__ import annotations

from ..svg import BLUE, GREEN, GREY, MUTED, ORANGE, PURPLE, RED, Svg
from .card import figure


@figure(400, "torch.library: one operator, an implementation per dispatch key")
def torch_library_dispatch(s: Svg) -> None:
    """A call to torch.ops.course_ext.fused_gelu(x) goes to the dispatcher, which checks it against the schema
    fused_gelu(Tensor x) -> Tensor and picks an implementation from the input's dispatch keys: with autograd on, the
    registered autograd formula saves what the backward needs and passes the call on; a CUDA tensor runs the C++ CUDA
    function; a fake tensor while torch.compile traces runs the fake kernel, which computes only the output's shape,
    dtype and strides; a CPU tensor has no implementation and gets NotImplementedError"""
    s.box(230, 48, 300, 36, "torch.ops.course_ext.fused_gelu(x)", BLUE, size=13, weight="bold")
    s.line(380, 84, 380, 104, arrow=True)
    s.box(150, 106, 460, 46, "the dispatcher", GREY, size=13, weight="bold",
          sub="schema: fused_gelu(Tensor x) -> Tensor, from TORCH_LIBRARY")
    targets = [("autograd", "register_autograd", "saves x for _backward,", "then passes the call on", PURPLE),
               ("CUDA tensor", "TORCH_LIBRARY_IMPL", "gelu_forward: the", "CUDA kernel runs", GREEN),
               ("fake tensor", "register_fake", "shape, dtype, strides", "only: no data (tracing)", ORANGE),
               ("CPU tensor", "no implementation", "NotImplementedError,", "before our code runs", RED)]
    for i, (key, how, a, b, fill) in enumerate(targets):
        x = 30 + i * 180
        s.line(380, 152, x + 80, 196, arrow=True)
        s.box(x, 198, 160, 46, key, fill, size=13, weight="bold", sub=how)
        s.lines(x + 80, 266, [a, b], step=16, size=12)
    s.line(190, 222, 208, 222, arrow=True)
    s.text(380, 326, "The autograd entry runs first and hands the call down to the device's implementation;",
           12)
    s.text(380, 344, "its backward, fused_gelu_backward, is a registered operator too.", 12)
    s.caption(380, "torch.library.opcheck tests that these registrations agree: schema, fake, autograd, "
                   "compilation.", 12)


@figure(320, "From a tensor to a launch: every assumption of the kernel checked first")
def operator_checks(s: Svg) -> None:
    """What gelu_forward does between a tensor and a kernel launch, in order: refuse a tensor not on a CUDA device with
    a RuntimeError and a dtype that is not floating with a TypeError; make the tensor's device current with
    CUDAGuard; make the input contiguous, copying only if it is not; return the empty output at once for zero
    elements; launch the 16-bytes-per-access kernel when both pointers are 16-byte aligned, else the one-element
    kernel, on PyTorch's current stream; and raise if the launch failed"""
    end = s.chain(40, 60, [("CUDA tensor?", "else RuntimeError", GREY, 140),
                           ("floating dtype?", "else TypeError", GREY, 150),
                           ("CUDAGuard", "x's device current", GREY, 150),
                           ("contiguous", "a copy if needed", GREY, 140)],
                  gap=24)
    s.line(end, 82, 730, 82)
    s.line(730, 82, 730, 126)
    s.line(730, 126, 30, 126)
    s.line(30, 126, 30, 182)
    s.line(30, 182, 38, 182, arrow=True)
    s.box(40, 160, 150, 44, "numel() == 0?", GREY, size=12, weight="bold", sub="return y at once")
    s.box(250, 140, 230, 40, "both 16-byte aligned", GREEN, size=12, weight="bold", sub="16 bytes per access")
    s.box(250, 188, 230, 40, "else (a view like x[1:])", ORANGE, size=12, weight="bold", sub="one element per access")
    s.line(190, 182, 248, 160, arrow=True)
    s.line(190, 182, 248, 208, arrow=True)
    s.box(560, 160, 160, 44, "launch check", GREY, size=12, weight="bold", sub="raises if it failed")
    s.line(480, 160, 558, 180, arrow=True)
    s.line(480, 208, 558, 184, arrow=True)
    s.text(380, 264, "Either kernel runs on PyTorch's current stream, ordered with the operations around it.", 12)
    s.caption(300, "A bad input becomes a Python exception with a message here, not an illegal address later.", 12)


@figure(360, "torch.compile: Python to a graph, the graph to Triton kernels")
def torch_compile_path(s: Svg) -> None:
    """What torch.compile does with a function: TorchDynamo traces its Python bytecode into a graph of PyTorch
    operations; TorchInductor groups the operations into kernels and, for GPU tensors, writes each as Triton source;
    Triton compiles that to PTX and a cubin. For gelu_tanh, eager mode runs nine elementwise kernels with eight
    intermediate tensors in memory; compiled, one kernel reads x once and writes y once"""
    s.chain(30, 56, [("your function", "Python", BLUE, 110), ("TorchDynamo", "bytecode to a graph", PURPLE, 140),
                     ("TorchInductor", "groups ops into kernels", PURPLE, 170),
                     ("Triton source", "@triton.jit", ORANGE, 110),
                     ("Triton", "PTX, cubin", GREY, 90)], gap=20)
    ops = ["c*x", "*x", "*x", "x+", "k*", "tanh", "1+", "0.5*x", "*"]
    s.chain(30, 158, [(op, None, GREY, 58) for op in ops], h=34, gap=20,
            title="gelu_tanh, eagerly: nine kernels, eight intermediates through memory")
    s.chain(30, 258, [("x", None, BLUE, 58), ("one Triton kernel", "all nine operations in registers", GREEN, 300),
                      ("y", None, BLUE, 58)], h=40, gap=30, title="compiled: one kernel")
    s.text(380, 214, "launch order, one tensor each; c = 0.044715, k = sqrt(2 / pi)", 12, fill=MUTED)
    s.caption(334, "Reading the generated source shows what was fused: it is ordinary Triton.", 12)


@figure(264, "Two custom operators as torch.compile sees them")
def two_custom_ops(s: Svg) -> None:
    """What torch.compile sees of each custom operator. The CUDA operator of course_ext is opaque: compile needs its
    fake kernel for shapes and calls the compiled library as a black box, fusing the operations around it but never
    into it. The Triton operator defined with triton_op and wrap_triton is Python and Triton source that compile can
    read: it traces the Python with fake tensors, so it needs no fake kernel, and places the Triton kernel in the
    compiled graph beside its own kernels"""
    s.panel(30, 48, 340, 170, "CUDA: TORCH_LIBRARY + fake")
    s.chain(50, 86, [("fused_gelu", "a compiled .so", GREY, 140), ("opaque call", "in the graph", GREY, 140)], gap=20)
    s.lines(200, 152, ["needs register_fake for shapes", "Inductor fuses around it,",
                       "never into it", "rebuilt when torch changes"], step=17, size=12)
    s.panel(390, 48, 340, 170, "Triton: triton_op + wrap_triton")
    s.chain(410, 86, [("Python + Triton", "source compile reads", BLUE, 140),
                      ("a Triton kernel", "beside Inductor's", GREEN, 140)], gap=20)
    s.lines(560, 152, ["traced with fake tensors:", "no fake kernel to write",
                       "no compiler at install time", "autograd: register_autograd"], step=17, size=12)
    s.caption(246, "Both are operators of the dispatcher; opcheck and torch.compile(fullgraph=True) test either.", 12)


@figure(330, "Packaging: built once against your torch, loaded by import")
def package_build(s: Svg) -> None:
    """How the course_ext package is built and loaded. pip install with --no-build-isolation and --no-deps runs setup.py
    in your environment, so the build sees the torch you will run with; CUDAExtension and BuildExtension compile the
    .cu files with nvcc and the .cpp files with the C++ compiler into course_ext/_C, a shared library tied to that
    torch's C++ ABI. import course_ext loads _C, which registers the operators, and then registers the fake kernels
    and autograd in Python"""
    s.chain(30, 56, [("pip install", "--no-build-isolation --no-deps", BLUE, 220),
                     ("setup.py", "CUDAExtension, BuildExtension", GREY, 220),
                     ("course_ext/_C", "a shared library", ORANGE, 180)], gap=34)
    s.lines(394, 124, ["nvcc: csrc/fused_gelu.cu", "C++ compiler: csrc/register.cpp"], step=18, size=12)
    s.chain(30, 190, [("import course_ext", None, BLUE, 180), ("loads _C", "TORCH_LIBRARY runs", ORANGE, 180),
                      ("register_fake,", "register_autograd", GREEN, 200)], gap=34)
    s.line(628, 100, 628, 166)
    s.line(628, 166, 120, 166)
    s.line(120, 166, 120, 188, arrow=True)
    s.caption(270, "Build isolation would compile against a fresh torch from the index, which may not load in "
                   "yours.", 12)
    s.caption(294, "_C uses torch's C++ API, whose ABI changes between releases: upgrade torch, rebuild.", 12)


@figure(340, "Triton: a program per block of indices, and a mask for the block past the end")
def triton_programs(s: Svg) -> None:
    """Vector add over n = 10 elements with BLOCK = 4. In CUDA each thread handles one index and a thread past the end
    skips its work with if (i < n). In Triton a grid of cdiv(10, 4) = 3 programs each handle a block: program pid
    computes offsets = pid * 4 + arange(0, 4), a vector of four indices, and mask = offsets < n; program 2's offsets
    are 8, 9, 10 and 11, and its mask switches off 10 and 11, so its loads and stores touch only 8 and 9"""
    n, block, c = 10, 4, 46
    x0 = 100
    s.text(x0 - 12, 78, "a, b, c", 12, anchor="end", weight="bold")
    for i in range(12):
        inside = i < n
        s.box(x0 + i * c, 60, c - 4, 30, str(i) if inside else "", BLUE if inside else GREY, size=12)
    s.text(x0 + 11 * c + 50, 80, "n = 10", 12, anchor="start")
    for pid in range(3):
        x = x0 + pid * block * c
        s.rect(x, 104, block * c - 4, 34, fill=PURPLE if pid < 2 else ORANGE)
        s.text(x + (block * c - 4) / 2, 126, f"program {pid}", 12, weight="bold")
    s.text(x0 - 12, 126, "grid", 12, anchor="end", weight="bold")
    rows = [("offsets = pid * BLOCK + tl.arange(0, BLOCK)", [str(8 + i) for i in range(4)]),
            ("mask = offsets < n", ["T", "T", "F", "F"])]
    for r, (name, vals) in enumerate(rows):
        y = 170 + r * 40
        s.text(x0 + 8 * c - 12, y + 20, name, 12, anchor="end", weight="bold")
        for i, v in enumerate(vals):
            s.box(x0 + (8 + i) * c, y, c - 4, 30, v, GREEN if i < 2 else GREY, size=12)
    s.text(x0 + 8 * c - 12, 158, "program 2 (pid = 2):", 12, anchor="end", fill=MUTED)
    s.caption(276, "CUDA writes one thread's index and an if; Triton writes a block's indices and a mask.", 12)
    s.caption(300, "grid = (triton.cdiv(n, BLOCK),): the compiler spreads each block over the program's warps.",
              12)


@figure(330, "Fused softmax: a program holds its row in registers, reads it once and writes it once", heading_size=14)
def triton_softmax_row(s: Svg) -> None:
    """The fused softmax in Triton: one program per row. Program 1 loads row 1, 6 values, into a block of BLOCK = 8
    lanes; the 2 padding lanes load -inf. tl.max gives the row maximum m, which the padding never wins; exp(x - m) is
    0 on the padding lanes; tl.sum gives the sum; each value is divided by it, and the masked store writes only the 6
    real lanes. The row is read once and written once"""
    c, x0 = 50, 200
    s.text(x0 - 12, 82, "row 1 of x", 12, anchor="end", weight="bold")
    for i in range(8):
        real = i < 6
        s.box(x0 + i * c, 64, c - 4, 30, f"x{i}" if real else "-inf", BLUE if real else GREY, size=12)
    s.text(x0 + 8 * c + 8, 84, "BLOCK = 8, n_cols = 6", 12, anchor="start")
    steps = [("m = tl.max(x)", "the padding never wins"), ("e = tl.exp(x - m)", "0 on the padding"),
             ("s = tl.sum(e)", "only real lanes add"), ("y = e / s", "a masked store: 6 lanes")]
    s.chain(40, 128, [(a, b, PURPLE, 150) for a, b in steps], gap=26)
    s.line(x0 + 3 * c, 96, 115, 126, arrow=True)
    s.text(40, 214, "one program per row: grid = (rows,)", 12, anchor="start")
    s.box(40, 236, 330, 36, "eagerly: about 5 reads and 3 writes of the matrix", ORANGE, size=12)
    s.box(390, 236, 330, 36, "fused: 1 read and 1 write", GREEN, size=12, weight="bold")
    s.caption(306, "A row with no finite maximum subtracts 0 and divides by 1: all zeros, as the course's "
                   "convention says.", 12)


@figure(380, "Grouped ordering: the programs that run together share rows of A and columns of B", heading_size=14)
def triton_grouped_order(s: Svg) -> None:
    """The order in which programs take the tiles of C, on a grid of 6 x 6 tiles. Row-major: programs 0 to 8 take all of
    tile row 0 and half of row 1, so they read 2 tile rows of A and all 6 tile columns of B. Grouped, with GROUP_M =
    3: programs walk down 3 tile rows before moving one column right, so programs 0 to 8 form a 3 x 3 square and read
    3 tile rows of A and 3 tile columns of B: fewer distinct panels for the same work, more of them still in L2"""
    tiles, c, group_m, first = 6, 34, 3, 9
    def grid(x0, title, order, verdict):
        s.text(x0 + tiles * c / 2, 66, title, 13, weight="bold")
        for pid in range(tiles * tiles):
            m, n = order(pid)
            s.box(x0 + n * c, 78 + m * c, c - 3, c - 3, str(pid), ORANGE if pid < first else GREY, size=11)
        s.text(x0 + tiles * c / 2, 78 + tiles * c + 22, verdict, 12)
    def grouped(pid):
        group = pid // (group_m * tiles)
        rows = min(tiles - group * group_m, group_m)
        return group * group_m + (pid % (group_m * tiles)) % rows, (pid % (group_m * tiles)) // rows
    grid(90, "row-major", lambda pid: divmod(pid, tiles), "programs 0-8: 2 rows of A, 6 columns of B")
    grid(470, "grouped, GROUP_M = 3", grouped, "programs 0-8: 3 rows of A, 3 columns of B")
    s.caption(334, "The same nine tiles of work from 6 panels instead of 8: the panels the running programs "
                   "share stay in L2.", 12)
    s.caption(358, "The kernel's own GROUP_M is 8 (4 in the interpreter); CUTLASS calls this a threadblock "
                   "swizzle.", 12)
