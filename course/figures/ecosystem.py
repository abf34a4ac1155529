"""The ecosystem map: which library a kernel in a profile came from, and what "GPU utilisation" counts."""

from __future__ import annotations

from ..svg import BLUE, GREEN, GREY, INK, MUTED, ORANGE, PURPLE, STRONG_RED, Svg
from .card import figure


@figure(330, "Which library ran? Each call's kernels carry their origin in their names")
def kernel_provenance(s: Svg) -> None:
    """Where the kernels of a PyTorch profile come from, and the patterns their names follow: torch.matmul is dispatched
    to cuBLAS, whose kernels are named nvjet_... or sm80_xmma_gemm_..._cublas; a convolution to cuDNN, with
    implicit-GEMM kernels such as sm80_xmma_fprop_implicit_gemm_..._cudnn; a function compiled by torch.compile to
    Triton kernels that Inductor wrote, named triton_poi_fused_... for pointwise and triton_red_ or triton_per_ for
    reductions; and an elementwise operation such as a bias addition to PyTorch's own templates,
    at::native::vectorized_elementwise_kernel"""
    rows = [("torch.matmul", "cuBLAS", "nvjet_sm90_...,  sm80_xmma_gemm_..._cublas", BLUE),
            ("conv2d", "cuDNN", "sm80_xmma_fprop_implicit_gemm_..._cudnn", GREEN),
            ("torch.compile(fn)", "Inductor: Triton", "triton_poi_fused_...,  triton_red_...", PURPLE),
            ("x + bias", "PyTorch's own", "at::native::vectorized_elementwise_kernel<...>", ORANGE)]
    s.text(110, 58, "the call", 12, fill=MUTED)
    s.text(300, 58, "the library", 12, fill=MUTED)
    s.text(555, 58, "its kernels in the profile", 12, fill=MUTED)
    for i, (call, lib, names, fill) in enumerate(rows):
        y = 70 + i * 56
        s.chain(30, y, [(call, None, GREY, 160), (lib, None, fill, 160)], h=40, gap=30)
        s.line(380, y + 20, 398, y + 20, arrow=True)
        s.text(400, y + 25, names, 12, anchor="start")
    s.caption(304, "Names are not a stable interface: sm80_ kernels run on Hopper too, and versions rename them.",
              12)


@figure(350, "\"GPU utilisation\": was any kernel running, not how much of the GPU it used")
def utilisation(s: Svg) -> None:
    """What GPU utilisation counts. A tiny kernel on one block keeps one SM busy all the time: nvidia-smi reports 100%
    utilisation, since some kernel was always running, while the other SMs of the GPU sit idle. A kernel that fills
    every SM also reports 100%. Only a profiler tells the two apart: Nsight Systems shows the timeline of kernels,
    Nsight Compute what one kernel did with the SMs and memory"""
    def sms(x, y, busy, title, verdict):
        s.text(x + 162, y - 10, title, 13, weight="bold")
        for i in range(132):
            r, c = divmod(i, 12)
            s.rect(x + c * 27, y + r * 15, 24, 12, fill=GREEN if i < busy else GREY, rx=2, width=0.5)
        s.text(x + 162, y + 11 * 15 + 20, verdict, 12, fill=STRONG_RED if busy < 132 else INK, weight="bold")
    sms(36, 76, 1, "one tiny kernel, one block", "nvidia-smi: 100%")
    sms(400, 76, 132, "a kernel that fills the GPU", "nvidia-smi: 100%")
    s.key(36, 278, GREEN, "SM busy")
    s.key(156, 278, GREY, "SM idle: the 132 SMs of an H200 SXM")
    s.lines(380, 326, ["The same number for both: nsys shows when kernels ran, ncu what each did with the SMs "
                       "and memory."], step=18, size=12)


@figure(330, "Four frameworks, and when the GPU work actually happens")
def when_work_runs(s: Svg) -> None:
    """When each framework's work runs. PyTorch, eagerly: each line launches its kernel at once, for example y = x @ w a
    cuBLAS GEMM; torch.compile captures graphs instead. JAX: jax.jit traces a pure function once and XLA compiles the
    whole program. TensorFlow: tf.function builds a graph that the runtime executes. MLX: operations are recorded
    lazily and run when a result is needed. Keras 3 runs the same model code on JAX, TensorFlow or PyTorch"""
    lanes = [("PyTorch", [("y = x @ w", "a line of Python", BLUE, 170),
                          ("a cuBLAS kernel", "launched at once", GREEN, 190)], "eager; torch.compile: graphs"),
             ("JAX", [("jax.jit(f)", "a pure function", BLUE, 170), ("traced once", "a whole program", PURPLE, 150),
                      ("XLA", "compiled kernels", GREEN, 110)], ""),
             ("TensorFlow", [("tf.function", "Python to a graph", BLUE, 170),
                             ("TF runtime", "runs the graph", GREEN, 150)], "Keras 3: on JAX, TF or PyTorch"),
             ("MLX", [("mx operations", "recorded, lazy", BLUE, 170),
                      ("run when needed", "e.g. mx.eval", GREEN, 150)], "Apple silicon; CUDA backend too")]
    for i, (name, items, note) in enumerate(lanes):
        y = 52 + i * 64
        s.text(30, y + 27, name, 13, anchor="start", weight="bold")
        end = s.chain(130, y, items, h=40, gap=26)
        s.text(end + 16, y + 25, note, 12, anchor="start", fill=MUTED)
    s.caption(316, "Eager is easy to debug and print from; a traced graph is what a compiler can fuse.", 12)


@figure(300, "ONNX: export once, run in another runtime")
def onnx_hub(s: Svg) -> None:
    """A model as a file: a PyTorch model is exported with torch.onnx.export(dynamo=True), which captures it with
    torch.export and translates the graph into standard ONNX operators with their weights, the batch dimension
    dynamic; the .onnx file then runs in ONNX Runtime, on the CPU or through its CUDA or TensorRT execution
    providers, in TensorRT, which compiles an engine for one GPU model, or in a browser runtime"""
    s.chain(30, 60, [("PyTorch model", "nn.Module", BLUE, 140),
                     ("torch.onnx.export", "dynamo=True: torch.export", PURPLE, 200),
                     ("model.onnx", "Conv, Relu, Gemm ... + weights", ORANGE, 220)], gap=30)
    targets = [("ONNX Runtime", "CPU, CUDA, TensorRT providers"), ("TensorRT", "an engine for one GPU model"),
               ("a browser runtime", "the same file")]
    for i, (name, sub) in enumerate(targets):
        x = 40 + i * 240
        s.line(570, 104, x + 110, 166, arrow=True)
        s.box(x, 168, 220, 44, name, GREEN, size=12, weight="bold", sub=sub)
    s.caption(250, "The batch dimension was declared dynamic, so the file accepts any batch size.", 12)
    s.caption(274, "Two runtimes agree to within rounding, not bit for bit: their kernels add in different orders.",
              12)
