# versus_pytorch.py: the chapter's best transpose, sum and softmax kernels against PyTorch (and
# torch.compile for softmax), each against a copy of the same bytes measured in the same run.
#
# Taught in docs/memory-model/versus-pytorch.md. The CUDA kernels are the very files the C++ programs
# include: kernels/memory-model/transpose.cuh, kernels/memory-model/reduction.cuh and
# kernels/memory-model/softmax.cuh, compiled at run time by CuPy (NVRTC) and launched on PyTorch's
# tensors without copies. Every result is checked against PyTorch in float64 first.
# Run:   python kernels/memory-model/versus_pytorch.py            (checks on sizes 1, primes, odd shapes)
#        python kernels/memory-model/versus_pytorch.py --bench    (also times everything)
#
# course: gpu
# course: run
# course: bench --bench
import argparse
import sys
from pathlib import Path

try:
    import cupy as cp
    import torch
except ImportError as e:  # the course's 'gpu' extra installs both
    sys.exit(f"error: {e.name} is not installed; install the course's GPU extra: pip install -e '.[gpu]'")

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {
    "transpose": "kernels/memory-model/transpose.cuh",
    "reduction": "kernels/memory-model/reduction.cuh",
    "softmax": "kernels/memory-model/softmax.cuh",
}


# --8<-- [start:load]
def load(name: str) -> "cp.RawModule":
    """Compile one of the chapter's kernel files with NVRTC for this GPU."""
    return cp.RawModule(code=(ROOT / SOURCES[name]).read_text(), options=("-std=c++17",))


def as_cupy(t: "torch.Tensor") -> "cp.ndarray":
    return cp.from_dlpack(t)  # the same memory, no copy
# --8<-- [end:load]


# --8<-- [start:timing]
def time_ms(fn, warmup: int = 3, repeats: int = 20) -> float:
    """Median time of fn() with CUDA events, after warm-up, writing a buffer twice the size of L2
    before each repeat (as course::time_kernel_ms does). CuPy launches on the same (default)
    stream as PyTorch, so the events bracket exactly the work fn enqueues. Python takes tens of
    microseconds to launch a kernel (torch.compile's guards more): a GPU-side sleep before the start
    event lets the CPU queue all of fn's work first, so that the host's overhead is not timed."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(repeats):
        flush.fill_(i & 0xFF)
        torch.cuda._sleep(1_000_000)  # about half a millisecond of GPU time
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[repeats // 2]


def bench(case: str, impl: str, ms: float, nbytes: float, flops: float = 0, peer: bool = False) -> None:
    print(f'BENCH {{"case": "{case}", "impl": "{impl}", "time_ms": {ms:.6g}, "bytes": {nbytes:.0f}, '
          f'"flops": {flops:.0f}, "peer": {"true" if peer else "false"}}}', flush=True)
# --8<-- [end:timing]


def check(name: str, got: "torch.Tensor", want: "torch.Tensor", rtol: float, atol: float) -> bool:
    got, want = got.double().flatten(), want.double().flatten()
    err = (got - want).abs()
    bad = ~(err <= atol + rtol * want.abs())  # NaN compares false: fails
    if got.numel() == 0 or bool(bad.any()):
        i = int(bad.nonzero()[0]) if got.numel() else 0
        print(f"CHECK FAIL {name} n={got.numel()} first_bad={i} got={got[i]:.9g} want={want[i]:.9g}")
        return False
    print(f"CHECK PASS {name} n={got.numel()} max_abs_err={float(err.max()):.3g} rtol={rtol:.1g} atol={atol:.1g}")
    return True


# --8<-- [start:launchers]
# name: (threads per block, 0 for 32 x 8; tile size). The float4 kernels need rows % 4 == cols % 4 == 0.
TRANSPOSE_KERNELS = {"transpose_padded": (0, 32), "transpose_padded_vec4": (256, 32),
                     "transpose_padded_vec4_x4": (64, 32), "transpose_tile64_vec4": (256, 64)}


def make_transpose(mod, kernel: str, x: "torch.Tensor", out: "torch.Tensor"):
    """A function that launches `kernel` to write x's transpose into out (cols x rows)."""
    rows, cols = x.shape
    fn, (threads, tile) = mod.get_function(kernel), TRANSPOSE_KERNELS[kernel]
    grid, block = ((cols + tile - 1) // tile, (rows + tile - 1) // tile), (threads,) if threads else (32, 8)
    args = (as_cupy(x), as_cupy(out), cp.int32(rows), cp.int32(cols))
    return lambda: fn(grid, block, args)


SUM_KERNELS = ("reduce_vec4_x4", "reduce_chunks_x4", "reduce_chunks_x8", "reduce_chunks_x4_fused")


def make_sum(mod, kernel: str, x: "torch.Tensor", out: "torch.Tensor"):
    """A function that writes sum(x) into out[0]: one of the grid kernels, then the partials pass,
    or the fused kernel alone (the launch configurations of reduction.cu)."""
    n, sms = x.numel(), torch.cuda.get_device_properties(0).multi_processor_count
    blocks = max(1, min((n // 4 + 511) // 512, 4 * sms))
    partials = torch.empty(blocks, device="cuda")
    main, finish = mod.get_function(kernel), mod.get_function("reduce_partials")
    if kernel.endswith("_fused"):
        blocks_done = torch.zeros(1, dtype=torch.int32, device="cuda")  # the kernel leaves it at zero
        args = (as_cupy(x), as_cupy(partials), as_cupy(blocks_done), as_cupy(out), cp.int64(n))
        return lambda: main((blocks,), (512,), args)
    main_args = (as_cupy(x), as_cupy(partials), cp.int64(n))
    finish_args = (as_cupy(partials), as_cupy(out), cp.int32(blocks))

    def run():
        main((blocks,), (512,), main_args)
        finish((1,), (512,), finish_args)
    return run


SOFTMAX_KERNELS = {  # name: (threads per block, needs cols % 4 == 0); all need cols <= 8192
    "softmax_block_regs_256x32": (256, False),
    "softmax_block_regs_v4_256x8": (256, True),
    "softmax_block_regs_v4_512x4": (512, True),
}


def make_softmax(mod, kernel: str, x: "torch.Tensor", out: "torch.Tensor"):
    """A function that writes softmax(x, dim=1) into out: one block per row."""
    rows, cols = x.shape
    fn, threads = mod.get_function(kernel), SOFTMAX_KERNELS[kernel][0]
    args = (as_cupy(x), as_cupy(out), cp.int32(cols))
    return lambda: fn((rows,), (threads,), args)
# --8<-- [end:launchers]


def softmax_applies(kernel: str, cols: int) -> bool:
    return cols <= 8192 and (cols % 4 == 0 or not SOFTMAX_KERNELS[kernel][1])


def run_transpose(mod, shapes, do_bench: bool) -> bool:
    ok = True
    kernels = tuple(TRANSPOSE_KERNELS)
    for rows, cols in shapes:
        x = torch.rand(rows, cols, device="cuda") * 2 - 1
        out = torch.empty(cols, rows, device="cuda")
        want = x.double().t()
        for kernel in kernels:
            if TRANSPOSE_KERNELS[kernel][0] and (rows % 4 or cols % 4):
                continue
            out.fill_(float("nan"))  # poisoned
            make_transpose(mod, kernel, x, out)()
            ok &= check(f"{kernel}_{rows}x{cols}", out, want, 0.0, 0.0)
        if do_bench and ok:
            # --8<-- [start:bench_transpose]
            case, nbytes = f"transpose {rows} x {cols} fp32", 2.0 * x.numel() * 4
            y = torch.empty_like(x)
            bench(case, "cudaMemcpy (torch copy_, same bytes)", time_ms(lambda: y.copy_(x)), nbytes, peer=True)
            bench(case, "torch .t().contiguous()", time_ms(lambda: x.t().contiguous()), nbytes)
            for kernel in kernels:
                if not TRANSPOSE_KERNELS[kernel][0] or (rows % 4 == 0 and cols % 4 == 0):
                    bench(case, f"course {kernel}", time_ms(make_transpose(mod, kernel, x, out)), nbytes)
            # --8<-- [end:bench_transpose]
    return ok


def run_sum(mod, sizes, do_bench: bool) -> bool:
    ok = True
    for n in sizes:
        x = torch.rand(n, device="cuda") * 2 - 1
        out = torch.empty(1, device="cuda")
        want = x.double().sum().reshape(1)
        atol = 1e-5 * float(x.double().abs().sum())
        for kernel in SUM_KERNELS:
            out.fill_(float("nan"))  # poisoned
            make_sum(mod, kernel, x, out)()
            ok &= check(f"{kernel}_{n}", out, want, 0.0, atol)
        ok &= check(f"torch_sum_{n}", torch.sum(x).reshape(1), want, 0.0, atol)
        if do_bench and ok:
            # --8<-- [start:bench_sum]
            case, nbytes = f"sum of {n} fp32", 4.0 * n
            half = x[: n // 2].clone()  # the peer copies n/2 floats: n * 4 bytes read and written
            y = torch.empty_like(half)
            bench(case, "cudaMemcpy (torch copy_, same bytes moved)", time_ms(lambda: y.copy_(half)), nbytes, peer=True)
            bench(case, "torch.sum", time_ms(lambda: torch.sum(x)), nbytes, n)
            for kernel in SUM_KERNELS:
                bench(case, f"course {kernel}", time_ms(make_sum(mod, kernel, x, out)), nbytes, n)
            # --8<-- [end:bench_sum]
    return ok


def run_softmax(mod, shapes, do_bench: bool, compiled) -> bool:
    ok = True
    for rows, cols in shapes:
        x = (torch.rand(rows, cols, device="cuda") * 2 - 1) * 8
        want = torch.softmax(x.double(), dim=1)
        out = torch.empty_like(x)
        for kernel in SOFTMAX_KERNELS:
            if not softmax_applies(kernel, cols):
                continue
            out.fill_(float("nan"))  # poisoned
            make_softmax(mod, kernel, x, out)()
            ok &= check(f"{kernel}_{rows}x{cols}", out, want, 1e-4, 1e-9)
        ok &= check(f"torch_softmax_{rows}x{cols}", torch.softmax(x, dim=1), want, 1e-4, 1e-9)
        if compiled is not None:
            ok &= check(f"torch_compile_softmax_{rows}x{cols}", compiled(x), want, 1e-4, 1e-9)
        if do_bench and ok:
            # --8<-- [start:bench_softmax]
            case, nbytes = f"softmax {rows} x {cols} fp32", 2.0 * x.numel() * 4
            bench(case, "cudaMemcpy (torch copy_, same bytes)", time_ms(lambda: out.copy_(x)), nbytes, peer=True)
            bench(case, "torch.softmax", time_ms(lambda: torch.softmax(x, dim=1)), nbytes)
            if compiled is not None:
                bench(case, "torch.compile(torch.softmax)", time_ms(lambda: compiled(x)), nbytes)
            for kernel in SOFTMAX_KERNELS:
                if softmax_applies(kernel, cols):
                    bench(case, f"course {kernel}", time_ms(make_softmax(mod, kernel, x, out)), nbytes)
            # --8<-- [end:bench_softmax]
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bench", action="store_true", help="also time every kernel against PyTorch")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes a minute)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 1
    torch.manual_seed(2026)
    compiled = None
    if not args.no_compile:
        # dynamic=False: one kernel specialised for each shape, as for a model with fixed shapes.
        compiled = torch.compile(lambda t: torch.softmax(t, dim=1), dynamic=False)
    ok = run_transpose(load("transpose"), [(1, 1), (1009, 997), (1004, 100)], False)
    ok &= run_sum(load("reduction"), [1, 4099, 1000003], False)
    ok &= run_softmax(load("softmax"), [(1, 1), (97, 997), (37, 8192), (3, 1000)], False, compiled)
    if args.bench and ok:
        ok &= run_transpose(load("transpose"), [(8192, 8192)], True)
        ok &= run_sum(load("reduction"), [1 << 28], True)
        ok &= run_softmax(load("softmax"), [(8192, 8192)], True, compiled)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
