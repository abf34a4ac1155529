"""compile_vs_eager.py: the same PyTorch function run eagerly (one kernel per operation) and under
torch.compile (Inductor fuses the operations into generated Triton kernels), checked and timed.

Taught in docs/ecosystem/compilers.md.
Run: python kernels/ecosystem/compile_vs_eager.py --rows 1000 --cols 1027      (check only)
     python kernels/ecosystem/compile_vs_eager.py --bench                      (also time both)
"""
# course: gpu
# course: run --rows 1 --cols 1
# course: run --rows 1000 --cols 1027
# course: bench --bench
import argparse
import json
import sys
import time

import torch


# --8<-- [start:function]
def bias_gelu_residual(x, bias, scale):
    """A transformer-style epilogue: four element-wise operations. Eager PyTorch runs each as its own
    kernel, writing a full-size intermediate to memory and reading it back for the next one."""
    return torch.nn.functional.gelu(x + bias) * scale + x
# --8<-- [end:function]


# --8<-- [start:timing]
def time_ms(fn, *args, warmup=5, repeats=50):
    """Median time of fn(*args) with CUDA events, after warm-up, L2 cache flushed before each repeat.
    A GPU-side sleep before the start event lets the host queue fn's kernels first, so Python's and
    torch.compile's launch overhead (guards included) is not timed: the figures compare GPU work."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        flush.zero_()  # evict the inputs from L2, as a real model's previous layer would
        torch.cuda._sleep(1_000_000)  # ~0.5 ms of GPU work, so the host queues fn() before the start event runs
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]
# --8<-- [end:timing]


def bench_line(case, impl, t_ms, nbytes, flops, peer, **extra):
    print("BENCH " + json.dumps({"case": case, "impl": impl, "time_ms": t_ms, "bytes": nbytes,
                                 "flops": flops, "peer": peer, **extra}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--cols", type=int, default=1027)
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    if args.rows < 1 or args.cols < 1:
        print("error: --rows and --cols must be at least 1", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)

    # --8<-- [start:compile]
    compiled = torch.compile(bias_gelu_residual)  # nothing is compiled yet: that happens at the first call

    x = torch.randn(args.rows, args.cols, device="cuda")
    bias, scale = torch.randn(args.cols, device="cuda"), torch.randn(args.cols, device="cuda")
    want = bias_gelu_residual(x.double(), bias.double(), scale.double())  # float64 reference
    eager = bias_gelu_residual(x, bias, scale)
    started = time.perf_counter()
    got = compiled(x, bias, scale)  # traces, generates Triton code, compiles it, then runs it
    torch.cuda.synchronize()
    print(f"first compiled call (tracing + code generation + compilation): {time.perf_counter() - started:.1f} s")
    # --8<-- [end:compile]

    rtol, atol = 1e-5, 1e-5
    ok = True
    for name, out in (("eager_vs_float64", eager), ("compiled_vs_float64", got)):
        err = (out.double() - want).abs()
        good = bool((err <= atol + rtol * want.abs()).all()) and out.numel() > 0
        ok = ok and good
        print(f"CHECK {'PASS' if good else 'FAIL'} {name} n={out.numel()} max_abs_err={err.max().item():.3g} "
              f"rtol={rtol:g} atol={atol:g}")

    if args.bench and ok:
        rows, cols = 8192, 8192
        x = torch.randn(rows, cols, device="cuda")
        bias, scale = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
        compiled(x, bias, scale)  # compile for this shape before timing
        # Minimal traffic: read x once, write the output once (bias and scale are tiny).
        nbytes = 2 * x.numel() * x.element_size() + 2 * cols * 4
        flops = 0  # GELU's transcendental work is not counted: this function is memory-bound
        case = f"bias+GELU+residual, {rows}x{cols} float32"
        bench_line(case, "eager (4 kernels)", time_ms(bias_gelu_residual, x, bias, scale), nbytes, flops, True,
                   size=x.numel())
        bench_line(case, "torch.compile (fused)", time_ms(compiled, x, bias, scale), nbytes, flops, False,
                   size=x.numel())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
