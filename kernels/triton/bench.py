# bench.py: the Triton chapter's three kernels compiled on the GPU, checked, and timed beside
# PyTorch (the peer) and the CUDA versions in kernels/triton/cuda_peers.cu.
#
# Taught in docs/triton/programming-model.md, docs/triton/softmax.md and docs/triton/matmul.md.
# Imports the kernels from vector_add.py, softmax.py and matmul.py; builds cuda_peers.cu with nvcc
# into build/triton/libcuda_peers.so and calls it through ctypes.
# Run:   python kernels/triton/bench.py            (checks every kernel at odd sizes on the GPU)
#        python kernels/triton/bench.py --bench    (also times them)
#
# course: gpu
# course: run
# course: bench --bench
import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    print("error: bench.py times compiled kernels and needs a CUDA GPU "
          "(the other programs in kernels/triton/ run on the CPU too)", file=sys.stderr)
    sys.exit(1)

import triton  # noqa: E402

from matmul import matmul, matmul_kernel  # noqa: E402
from softmax import softmax, softmax_reference  # noqa: E402
from vector_add import add, check_close  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CUDA_SOURCE = ROOT / "kernels/triton/cuda_peers.cu"
LIBRARY = ROOT / "build/triton/libcuda_peers.so"


def load_cuda_peers() -> ctypes.CDLL:
    """Build kernels/triton/cuda_peers.cu for this GPU and load it."""
    major, minor = torch.cuda.get_device_capability()
    LIBRARY.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nvcc", "-O3", f"-arch=sm_{major}{minor}", "-shared", "-Xcompiler", "-fPIC",
           "-o", str(LIBRARY), str(CUDA_SOURCE)]
    subprocess.run(cmd, check=True)
    lib = ctypes.CDLL(str(LIBRARY))
    for name in ("launch_add", "launch_softmax", "launch_matmul"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def cuda_call(lib, name, *args):
    """Call an extern "C" launcher with device pointers, on PyTorch's current stream."""
    conv = [ctypes.c_void_p(a.data_ptr()) if isinstance(a, torch.Tensor) else
            (ctypes.c_longlong(a) if name == "launch_add" else ctypes.c_int(a)) for a in args]
    err = getattr(lib, name)(*conv, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if err != 0:
        raise RuntimeError(f"{name} failed with cudaError_t {err}")


# --8<-- [start:timer]
def time_ms(fn, warmup: int = 3, repeats: int = 20) -> float:
    """Median time of fn() in ms with CUDA events, after warm-up, with L2 flushed before each repeat.
    A GPU-side sleep before the start event lets the host queue fn()'s work first, so Triton's Python
    launch path (argument checks, autotuner lookup) is not timed: the figures compare GPU work."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    scratch = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):           # also triggers Triton's compilation and autotuning
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(repeats):
        scratch.fill_(i & 0xFF)       # evict what the last repeat left in L2
        torch.cuda._sleep(1_000_000)  # ~0.5 ms of GPU work, so the host queues fn() before the start event runs
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[repeats // 2]
# --8<-- [end:timer]


def bench(case, impl, fn, bytes_, flops, peer=False, **extra):
    t = time_ms(fn)
    print("BENCH " + json.dumps({"case": case, "impl": impl, "time_ms": round(t, 6), "bytes": bytes_,
                                 "flops": flops, "peer": peer, **extra}), flush=True)


def nan_like(t):
    return torch.full_like(t, float("nan"))


def check_all(lib) -> bool:
    """Triton (compiled) and CUDA against float64 references, at sizes that fit no block evenly."""
    torch.manual_seed(1)
    ok = True
    n = 1_000_003
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    want = a.double() + b.double()
    ok &= check_close("triton_add_gpu", add(a, b, out=nan_like(a)), want, 1e-6, 1e-6)
    c = nan_like(a)
    cuda_call(lib, "launch_add", a, b, c, n)
    ok &= check_close("cuda_add_gpu", c, want, 1e-6, 1e-6)

    x = (torch.rand(1023, 1000, device="cuda") * 2 - 1) * 100
    want = softmax_reference(x)
    ok &= check_close("triton_softmax_gpu", softmax(x, out=nan_like(x)), want, 1e-5, 1e-6)
    y = nan_like(x)
    cuda_call(lib, "launch_softmax", x, y, x.shape[0], x.shape[1])
    ok &= check_close("cuda_softmax_gpu", y, want, 1e-5, 1e-6)

    M, N, K = 1000, 777, 513
    a = (torch.rand(M, K, device="cuda") * 2 - 1).half()
    b = (torch.rand(K, N, device="cuda") * 2 - 1).half()
    want = a.double() @ b.double()
    tol = dict(rtol=2e-3, atol=1e-3 * K ** 0.5)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    ok &= check_close("triton_matmul_gpu", matmul(a, b, out=c), want, **tol)
    print(f"autotuning chose, for {M}x{N}x{K}: {matmul_kernel.best_config}")
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    cuda_call(lib, "launch_matmul", a, b, c, M, N, K)
    ok &= check_close("cuda_matmul_gpu", c, want, **tol)
    return bool(ok)


# --8<-- [start:bench]
def run_benchmarks(lib):
    for n in [1 << 16, 1 << 20, 1 << 24, 1 << 26]:
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        c = torch.empty_like(a)
        case = f"vector add, n = 2^{n.bit_length() - 1}"
        bench(case, "PyTorch a + b", lambda: torch.add(a, b, out=c), 12 * n, 0, peer=True, n=n)
        bench(case, "Triton", lambda: add(a, b, out=c), 12 * n, 0, n=n)
        bench(case, "CUDA", lambda: cuda_call(lib, "launch_add", a, b, c, n), 12 * n, 0, n=n)

    rows = 4096
    for cols in [256, 1024, 4096, 16384]:
        x = torch.randn(rows, cols, device="cuda")
        y = torch.empty_like(x)
        case = f"softmax, {rows} x {cols}"
        bench(case, "PyTorch softmax", lambda: torch.softmax(x, dim=1), 8 * x.numel(), 0, peer=True, cols=cols)
        bench(case, "Triton (fused)", lambda: softmax(x, out=y), 8 * x.numel(), 0, cols=cols)
        bench(case, "CUDA (3 passes)", lambda: cuda_call(lib, "launch_softmax", x, y, rows, cols), 8 * x.numel(), 0, cols=cols)

    for s in [1024, 2048, 4096]:
        a, b = torch.randn(s, s, device="cuda").half(), torch.randn(s, s, device="cuda").half()
        c = torch.empty(s, s, device="cuda", dtype=torch.float16)
        case = f"fp16 matmul, {s}^3"
        byts, flops = 3 * 2 * s * s, 2 * s ** 3
        bench(case, "PyTorch (cuBLAS)", lambda: torch.matmul(a, b, out=c), byts, flops, peer=True, size=s)
        bench(case, "Triton (autotuned)", lambda: matmul(a, b, out=c), byts, flops, size=s)
        bench(case, "CUDA (smem tiles)", lambda: cuda_call(lib, "launch_matmul", a, b, c, s, s, s), byts, flops, size=s)
        print(f"autotuning chose, for {s}^3: {matmul_kernel.best_config}")
# --8<-- [end:bench]


def main() -> int:
    parser = argparse.ArgumentParser(description="check and time the Triton chapter's kernels")
    parser.add_argument("--bench", action="store_true", help="also time every kernel")
    args = parser.parse_args()
    print(f"triton {triton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    lib = load_cuda_peers()
    if not check_all(lib):
        return 1
    if args.bench:
        run_benchmarks(lib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
