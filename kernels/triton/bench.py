# bench.py: the Triton chapter's three kernels compiled on the GPU, checked, and timed in one run beside
# the strongest peers at hand: PyTorch (eager, in a CUDA graph where launches can matter, and under
# torch.compile in each mode, every configuration checked first; course_tools.torch_peers), cuBLAS and
# the course's own fast CUDA kernels.
#
# Taught in docs/triton/programming-model.md, docs/triton/softmax.md and docs/triton/matmul.md.
# Imports the Triton kernels from vector_add.py, softmax.py and matmul.py. The CUDA peers are compiled at
# run time with CuPy (NVRTC) and launched on PyTorch's tensors without copies, as
# kernels/memory-model/versus_pytorch.py does:
#   vector add  kernels/triton/cuda_peers.cu: float4 loads and stores in a grid-stride loop
#   softmax     kernels/memory-model/softmax.cuh: the memory-model chapter's kernels (one block per row,
#               the row in registers where it fits; softmax_block, two passes, for longer rows)
#   matmul      cuBLAS through torch.matmul, in the same precision as the Triton kernel (fp16 or bf16
#               inputs and output, fp32 accumulation, reduced-precision reductions switched off)
# Run:   python kernels/triton/bench.py                        (checks every kernel at odd sizes on the GPU)
#        python kernels/triton/bench.py --bench                (also times them)
#        python kernels/triton/bench.py --bench --part softmax (checks and times one kernel: add, softmax, matmul)
#
# The benchmark is recorded as one run per kernel, each its own process, so that none takes much over a
# minute (every PyTorch configuration is compiled per shape; matmul autotunes per shape).
# course: gpu
# course: run
# course: bench --bench --part add
# course: bench --bench --part softmax
# course: bench --bench --part matmul
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ADD_SOURCE = ROOT / "kernels/triton/cuda_peers.cu"
SOFTMAX_SOURCE = ROOT / "kernels/memory-model/softmax.cuh"
# The memory-model chapter's softmax kernels: name -> (threads per block, needs cols % 4 == 0, most cols).
SOFTMAX_KERNELS = {
    "softmax_block_regs_256x32": (256, False, 8192),
    "softmax_block_regs_v4_256x8": (256, True, 8192),
    "softmax_block_regs_v4_512x4": (512, True, 8192),
    "softmax_block": (256, False, None),  # any row length: two passes over the row (as softmax.cu)
}
PARTS = ("add", "softmax", "matmul")
torch = cp = None  # imported in main(), after the arguments are checked


# --8<-- [start:peers]
def cuda_add(module, a, b, c):
    """A function that launches the float4 grid-stride add: c = a + b, one wave of blocks over the GPU."""
    if any(t.data_ptr() % 16 for t in (a, b, c)):
        raise ValueError("cuda_add: float4 accesses need 16-byte aligned tensors")
    n, threads = a.numel(), 256
    props = torch.cuda.get_device_properties(0)
    resident = props.multi_processor_count * (props.max_threads_per_multi_processor // threads)
    blocks = max(1, min((max(n // 4, n % 4) + threads - 1) // threads, resident))
    fn = module.get_function("add_vec4_grid_stride")
    args = (cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c), cp.uint64(n))
    return lambda: fn((blocks,), (threads,), args)


def softmax_applies(kernel: str, cols: int) -> bool:
    _, needs_vec4, most = SOFTMAX_KERNELS[kernel]
    return (most is None or cols <= most) and (cols % 4 == 0 or not needs_vec4)


def cuda_softmax(module, kernel: str, x, y):
    """A function that launches one of the memory-model chapter's kernels: softmax of x's rows into y."""
    rows, cols = x.shape
    threads = SOFTMAX_KERNELS[kernel][0]
    fn = module.get_function(kernel)
    if kernel == "softmax_block":
        args = (cp.from_dlpack(x), cp.from_dlpack(y), cp.int32(rows), cp.int32(cols))
    else:
        args = (cp.from_dlpack(x), cp.from_dlpack(y), cp.int32(cols))
    return lambda: fn((rows,), (threads,), args)
# --8<-- [end:peers]


def nan_like(t):
    return torch.full_like(t, float("nan"))


def check_add(add_module) -> bool:
    """Triton (compiled) and the CUDA peer against float64 references, at sizes that fit no block
    evenly, with every output poisoned first."""
    from vector_add import add

    torch.manual_seed(1)
    ok = True
    for n in (1, 3, 1_000_003):
        a, b = torch.rand(n, device="cuda") * 2 - 1, torch.rand(n, device="cuda") * 2 - 1
        want = a.double() + b.double()
        ok &= course_tools.check_close(f"triton_add_{n}", add(a, b, out=nan_like(a)), want, 1e-6, 1e-6)
        c = nan_like(a)
        cuda_add(add_module, a, b, c)()
        ok &= course_tools.check_close(f"cuda_add_vec4_{n}", c, want, 1e-6, 1e-6)
    return bool(ok)


SOFTMAX_TOL = (course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL)  # per element: (atol, rtol)


def check_softmax(softmax_module) -> bool:
    """As check_add, for softmax, plus the adversarial rows."""
    from softmax import check_adversarial, softmax, softmax_reference

    torch.manual_seed(1)
    ok = True
    for rows, cols in ((1, 1), (1023, 1000), (37, 8192), (5, 16387)):
        x = (torch.rand(rows, cols, device="cuda") * 2 - 1) * 100
        want = softmax_reference(x)
        # Relative to each output (softmax_reference.cuh's tolerance): scores in [-100, 100] give outputs
        # far below any fixed atol, where zeros would pass.
        ok &= course_tools.check_close_each(f"triton_softmax_{rows}x{cols}", softmax(x, out=nan_like(x)), want,
                                            *SOFTMAX_TOL)
        for kernel in SOFTMAX_KERNELS:
            if softmax_applies(kernel, cols):
                y = nan_like(x)
                cuda_softmax(softmax_module, kernel, x, y)()
                ok &= course_tools.check_close_each(f"cuda_{kernel}_{rows}x{cols}", y, want, *SOFTMAX_TOL)
    # Leading -inf, causal masks, one finite value, fully masked rows (zeros) and NaN rows, compiled:
    for cols in (1000, 4099):
        ok &= check_adversarial("triton_softmax_gpu", lambda t, o: softmax(t, out=o), cols, "cuda")
        for kernel in SOFTMAX_KERNELS:
            if softmax_applies(kernel, cols):
                ok &= check_adversarial(f"cuda_{kernel}",
                                        lambda t, o, k=kernel: cuda_softmax(softmax_module, k, t, o)(), cols, "cuda")
    return bool(ok)


def check_matmul() -> bool:
    """As check_add, for the autotuned matmul and cuBLAS, in fp16 and bf16."""
    from matmul import matmul, matmul_kernel

    torch.manual_seed(1)
    ok = True
    M, N, K = 1000, 777, 513
    for dtype, rtol in ((torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        a = (torch.rand(M, K, device="cuda") * 2 - 1).to(dtype)
        b = (torch.rand(K, N, device="cuda") * 2 - 1).to(dtype)
        want = a.double() @ b.double()              # exact products of the rounded inputs
        tol = dict(rtol=rtol, atol=1e-3 * K ** 0.5)  # fp32 sums, then one rounding to fp16 or bf16
        name = str(dtype)[6:]
        c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
        ok &= course_tools.check_close(f"triton_matmul_{name}", matmul(a, b, out=c), want, **tol)
        print(f"autotuning chose, for {M}x{N}x{K} {name}: {matmul_kernel.best_config}")
        c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
        ok &= course_tools.check_close(f"cublas_matmul_{name}", torch.matmul(a, b, out=c), want, **tol)
    return bool(ok)


# --8<-- [start:bench]
def bench_add(add_module):
    from vector_add import add

    time_ms, bench = course_tools.time_ms, course_tools.bench
    for n in [1 << 16, 1 << 20, 1 << 24, 1 << 26]:
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        c = torch.empty_like(a)
        case, nbytes = f"vector add fp32, n = 2^{n.bit_length() - 1}", 12 * n
        want = a.double() + b.double()
        for impl, run in course_tools.torch_peers(lambda u, v: u + v, (a, b), "PyTorch a + b, fp32", nbytes):
            if course_tools.check_close_on_device(course_tools.slug(f"{impl} {n}"), run(), want, 1e-6, 1e-6):
                bench(case, impl, time_ms(run), nbytes, peer=True, n=n)
        bench(case, "Triton", time_ms(lambda: add(a, b, out=c)), nbytes, n=n)
        bench(case, "CUDA float4 grid-stride (course)", time_ms(cuda_add(add_module, a, b, c)), nbytes, n=n)


def bench_softmax(softmax_module):
    from softmax import softmax, softmax_reference

    time_ms, bench = course_tools.time_ms, course_tools.bench
    rows = 4096
    for cols in [256, 1024, 4096, 16384]:
        x = torch.randn(rows, cols, device="cuda")
        y = torch.empty_like(x)
        case, nbytes = f"softmax fp32, {rows} x {cols}", 8 * x.numel()
        want = softmax_reference(x)
        for impl, run in course_tools.torch_peers(lambda t: torch.softmax(t, dim=1), (x,), "PyTorch softmax, fp32",
                                                  nbytes):
            if course_tools.check_close_each(course_tools.slug(f"{impl} {cols}"), run(), want, *SOFTMAX_TOL):
                bench(case, impl, time_ms(run), nbytes, peer=True, cols=cols)
        bench(case, "Triton (fused, one program per row)", time_ms(lambda: softmax(x, out=y)), nbytes, cols=cols)
        for kernel in SOFTMAX_KERNELS:
            if softmax_applies(kernel, cols):
                bench(case, f"CUDA course {kernel}", time_ms(cuda_softmax(softmax_module, kernel, x, y)), nbytes,
                      cols=cols)


def bench_matmul():
    from matmul import matmul, matmul_kernel

    time_ms, bench = course_tools.time_ms, course_tools.bench
    course_tools.pruned("torch.compile of torch.matmul", "in its default mode Inductor calls the same cuBLAS GEMM as "
                        "eager; max-autotune adds Triton GEMM templates autotuned per shape, minutes of compilation "
                        "for these six shapes, beyond this program's one-minute budget")
    for dtype, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        for s in [1024, 2048, 4096]:
            a, b = torch.randn(s, s, device="cuda").to(dtype), torch.randn(s, s, device="cuda").to(dtype)
            c = torch.empty(s, s, device="cuda", dtype=dtype)
            case, nbytes, flops = f"matmul {name}, {s}^3", 3 * 2 * s * s, 2 * s ** 3
            want = a.double() @ b.double()
            tol = dict(rtol=1.6e-2 if name == "bf16" else 2e-3, atol=1e-3 * s ** 0.5)
            # eager, and eager in a CUDA graph where the GEMM is short enough for launches to matter
            for impl, run in course_tools.torch_peers(torch.matmul, (a, b), f"cuBLAS {name} in/out, fp32 accumulate "
                                                      "(torch.matmul)", nbytes, modes=()):
                if course_tools.check_close_on_device(course_tools.slug(f"{impl} {s}"), run(), want, **tol):
                    bench(case, impl, time_ms(run), nbytes, flops, peer=True, size=s)
            bench(case, f"Triton {name} in/out, fp32 accumulate (autotuned)",
                  time_ms(lambda: matmul(a, b, out=c)), nbytes, flops, size=s)
            print(f"autotuning chose, for {s}^3 {name}: {matmul_kernel.best_config}")
# --8<-- [end:bench]


def main() -> int:
    global torch, cp
    p = course_tools.parser(
        "check and time the Triton chapter's kernels against PyTorch, cuBLAS and the course's CUDA kernels")
    p.add_argument("--bench", action="store_true", help="also time every kernel")
    p.add_argument("--part", choices=PARTS, help="check (and with --bench time) only this kernel")
    args = p.parse_args()
    parts = [args.part] if args.part else list(PARTS)
    cp, torch = course_tools.require_cuda("cupy", "torch")
    import triton

    # cuBLAS accumulates fp16 and bf16 products in fp32 then, like the Triton kernel, throughout.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    print(f"triton {triton.__version__}, torch {torch.__version__}, cupy {cp.__version__}, "
          f"{torch.cuda.get_device_name()}")
    modules = {
        "add": lambda: cp.RawModule(code=ADD_SOURCE.read_text(), options=("-std=c++17",)),
        "softmax": lambda: cp.RawModule(code=SOFTMAX_SOURCE.read_text(), options=("-std=c++17",)),
        "matmul": lambda: None,
    }
    checks = {"add": check_add, "softmax": check_softmax, "matmul": lambda _: check_matmul()}
    benches = {"add": bench_add, "softmax": bench_softmax, "matmul": lambda _: bench_matmul()}
    loaded = {part: modules[part]() for part in parts}
    if not all([checks[part](loaded[part]) for part in parts]):  # every part checked, then any timed
        return 1
    if args.bench:
        for part in parts:
            benches[part](loaded[part])
    return 0


if __name__ == "__main__":
    sys.exit(main())
