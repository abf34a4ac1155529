# inductor_codegen.py: what torch.compile writes. Compiles two small PyTorch functions (a tanh GELU,
# a row softmax) on the GPU, reads back the Triton source TorchInductor generated for them, prints
# each kernel and checks that the ops were fused into Triton kernels that give the eager results.
#
# Taught in docs/triton/torch-compile.md. The generated code depends on the PyTorch version: the
# page shows this program's recorded output instead of a copy of it.
# Run:   python kernels/triton/inductor_codegen.py
#        TORCH_LOGS=output_code python kernels/triton/inductor_codegen.py   (PyTorch logs it too)
#
# course: gpu
# course: run
import math
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


# --8<-- [start:functions]
def gelu_tanh(x):
    # Nine elementwise ops: eagerly, nine kernels and eight intermediate tensors in memory.
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + torch.tanh(inner))


def softmax_rows(x):
    # Two reductions (max, sum) and three elementwise ops (subtract, exp, divide).
    e = torch.exp(x - x.amax(dim=1, keepdim=True))
    return e / e.sum(dim=1, keepdim=True)
# --8<-- [end:functions]


# --8<-- [start:read_back]
def generated_kernels(fn, *args):
    """Compile fn, run it once, and return (its result, {kernel name: Triton source})."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()                           # compile afresh, not from this process's cache
    result, modules = run_and_get_code(torch.compile(fn), *args)
    kernels = {}
    for module in modules:                          # the Python modules Inductor wrote
        # Each kernel is embedded as a string: async_compile.triton('name', '''source''', ...)
        for name, src in re.findall(r"async_compile\.triton\(\s*['\"](\w+)['\"],\s*'''(.*?)'''", module, re.S):
            kernels[name] = src
    if not kernels:
        print("\n".join(modules)[:3000])
    return result, kernels
# --8<-- [end:read_back]


def report(label, kernels, must_contain):
    for name, src in kernels.items():
        print(f"--- {label}: generated kernel {name} ---")
        print(src.strip())
    print(f"--- end of {label} ---")
    facts = [len(kernels) >= 1, all("@triton.jit" in s for s in kernels.values())]
    facts += [any(word in s for s in kernels.values()) for word in must_contain]
    detail = f"kernels={len(kernels)} contains={'+'.join(must_contain)}"
    return course_tools.check_true(f"{label}_is_triton", all(facts), len(facts), detail)


def main() -> int:
    course_tools.parser("read back the Triton kernels torch.compile generates").parse_args()
    # On the CPU Inductor writes C++, not Triton: this program needs a CUDA GPU.
    course_tools.require_cuda("torch")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    torch.manual_seed(0)
    ok = True

    x = torch.randn(1000, 1003, device="cuda")
    y, kernels = generated_kernels(gelu_tanh, x)
    ok &= course_tools.check_close("compiled_gelu_matches", y, gelu_tanh(x.double()), 1e-5, 1e-6)
    ok &= report("gelu", kernels, ["tl.load", "tl.store", "tanh"])
    # Fusion: the nine elementwise ops became one kernel (one read of x, one write of y).
    ok &= course_tools.check_true("gelu_fused_into_one_kernel", len(kernels) == 1, 1, f"kernels={len(kernels)}")

    y, kernels = generated_kernels(softmax_rows, x)
    # Relative to each output (softmax_reference.cuh's tolerance): a fixed atol of 1e-6 is the size of
    # a typical output of a 1003-wide row, so zeros written there would have passed.
    ok &= course_tools.check_close_each("compiled_softmax_matches", y, torch.softmax(x.double(), dim=1),
                                        course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL)
    ok &= report("softmax", kernels, ["tl.load", "tl.store", "exp"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
