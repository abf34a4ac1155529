"""The PyTorch extensions chapter and torch.compile: the checks of a host function, the dispatcher's entries
for a registered operator, and the path from a compiled function to Triton kernels."""

from __future__ import annotations

from ..svg import BLUE, GREEN, GREY, MUTED, ORANGE, PURPLE, RED, Svg


def torch_library_dispatch() -> str:
    s = Svg(760, 400, "A call to torch.ops.course_ext.fused_gelu(x) goes to the dispatcher, which checks it "
                      "against the schema fused_gelu(Tensor x) -> Tensor and picks an implementation from the "
                      "input's dispatch keys: with autograd on, the registered autograd formula saves what the "
                      "backward needs and passes the call on; a CUDA tensor runs the C++ CUDA function; a fake "
                      "tensor while torch.compile traces runs the fake kernel, which computes only the output's "
                      "shape, dtype and strides; a CPU tensor has no implementation and gets NotImplementedError")
    s.heading("torch.library: one operator, an implementation per dispatch key")
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
    return s.render()


def operator_checks() -> str:
    s = Svg(760, 320, "What gelu_forward does between a tensor and a kernel launch, in order: refuse a tensor "
                      "not on a CUDA device with a RuntimeError and a dtype that is not floating with a TypeError; "
                      "make the tensor's device current with CUDAGuard; make the input contiguous, copying only "
                      "if it is not; return the empty output at once for zero elements; launch the 16-bytes-per-"
                      "access kernel when both pointers are 16-byte aligned, else the one-element kernel, on "
                      "PyTorch's current stream; and raise if the launch failed")
    s.heading("From a tensor to a launch: every assumption of the kernel checked first")
    end = s.chain(40, 60, [("CUDA tensor?", "else RuntimeError", GREY, 140), ("floating dtype?", "else TypeError", GREY, 150),
                           ("CUDAGuard", "x's device current", GREY, 150), ("contiguous", "a copy if needed", GREY, 140)],
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
    return s.render()


def torch_compile_path() -> str:
    s = Svg(760, 360, "What torch.compile does with a function: TorchDynamo traces its Python bytecode into a "
                      "graph of PyTorch operations; TorchInductor groups the operations into kernels and, for GPU "
                      "tensors, writes each as Triton source; Triton compiles that to PTX and a cubin. For "
                      "gelu_tanh, eager mode runs nine elementwise kernels with eight intermediate tensors in "
                      "memory; compiled, one kernel reads x once and writes y once")
    s.heading("torch.compile: Python to a graph, the graph to Triton kernels")
    s.chain(30, 56, [("your function", "Python", BLUE, 110), ("TorchDynamo", "bytecode to a graph", PURPLE, 140),
                     ("TorchInductor", "groups ops into kernels", PURPLE, 170), ("Triton source", "@triton.jit", ORANGE, 110),
                     ("Triton", "PTX, cubin", GREY, 90)], gap=20)
    s.text(30, 146, "gelu_tanh, eagerly: nine kernels, eight intermediates through memory", 13, anchor="start",
           weight="bold")
    ops = ["c*x", "*x", "*x", "x+", "k*", "tanh", "1+", "0.5*x", "*"]
    s.chain(30, 158, [(op, None, GREY, 58) for op in ops], h=34, gap=20)
    s.text(30, 246, "compiled: one kernel", 13, anchor="start", weight="bold")
    s.chain(30, 258, [("x", None, BLUE, 58), ("one Triton kernel", "all nine operations in registers", GREEN, 300),
                      ("y", None, BLUE, 58)], h=40, gap=30)
    s.text(380, 214, "launch order, one tensor each; c = 0.044715, k = sqrt(2 / pi)", 12, fill=MUTED)
    s.caption(334, "Reading the generated source shows what was fused: it is ordinary Triton.", 12)
    return s.render()
