"""The PyTorch extensions chapter: how the dispatcher routes a call to a registered operator."""

from __future__ import annotations

from ..svg import BLUE, GREEN, GREY, ORANGE, PURPLE, RED, Svg


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
