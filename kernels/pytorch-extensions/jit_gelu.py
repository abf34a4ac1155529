# jit_gelu.py: builds kernels/pytorch-extensions/csrc/fused_gelu.cu at run time with
# torch.utils.cpp_extension.load_inline (nvcc and the C++ compiler through ninja), wraps it in a
# torch.autograd.Function, and checks it like every implementation in the chapter.
#
# Taught in docs/pytorch-extensions/cuda-operator.md. Build cache: build/torch_extensions/ (set
# TORCH_EXTENSIONS_DIR to move it; delete it to force a clean rebuild).
# Run:   python kernels/pytorch-extensions/jit_gelu.py
#
# course: gpu
# course: run
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernels/pytorch-extensions/csrc/fused_gelu.cu"
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ROOT / "build/torch_extensions"))
torch = None  # imported in main(), after the arguments are checked

# --8<-- [start:load_inline]
# load_inline compiles the C++ sources with the host compiler and the CUDA sources with nvcc, and
# writes Python bindings (pybind11) for the listed functions. They must be visible at global scope.
DECLARATIONS = """
namespace course_ext {
torch::Tensor gelu_forward(const torch::Tensor& x);
torch::Tensor gelu_backward(const torch::Tensor& grad, const torch::Tensor& x);
}
using course_ext::gelu_forward;
using course_ext::gelu_backward;
"""


def build():
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name="fused_gelu_jit",                # the cache folder and the Python module's name
        cpp_sources=DECLARATIONS,
        cuda_sources=SOURCE.read_text(),
        functions=["gelu_forward", "gelu_backward"],
        extra_cuda_cflags=["-O3"],
        verbose=False,                        # True prints every compiler command
    )
# --8<-- [end:load_inline]


# --8<-- [start:autograd]
def make_op(ext):
    class FusedGelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ext.gelu_forward(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return ext.gelu_backward(grad, x)

    return FusedGelu.apply
# --8<-- [end:autograd]


def main() -> int:
    global torch
    course_tools.parser("build the fused GELU with load_inline and check it").parse_args()
    torch = course_tools.require_cuda("torch")        # the extension's kernels need a CUDA GPU and CUDA torch
    from gelu_reference import check_operator
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {torch.cuda.get_device_name()}")
    print(f"build cache: {os.environ['TORCH_EXTENSIONS_DIR']}")
    start = time.perf_counter()
    ext = build()
    print(f"load_inline: first call took {time.perf_counter() - start:.1f} s (compiles unless cached)")
    start = time.perf_counter()
    build()
    print(f"load_inline: second call took {time.perf_counter() - start:.2f} s (already loaded)")
    op = make_op(ext)
    ok = check_operator("jit", op, "cuda", dtypes=(torch.float32, torch.float64, torch.float16, torch.bfloat16),
                        bad_device="cpu")

    # torch.compile cannot see inside a pybind11 function: it splits the graph around the call.
    def f(x):
        return op(x * 2.0) + 1.0
    explanation = torch._dynamo.explain(f)(torch.randn(8, device="cuda"))
    print(f"torch.compile on the load_inline op: {explanation.graph_break_count} graph break(s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
