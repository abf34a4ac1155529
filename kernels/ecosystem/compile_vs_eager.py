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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

torch = None  # imported in main(), after the arguments are checked


# --8<-- [start:function]
def bias_gelu_residual(x, bias, scale):
    """A transformer-style epilogue: four element-wise operations. Eager PyTorch runs each as its own
    kernel, writing a full-size intermediate to memory and reading it back for the next one."""
    return torch.nn.functional.gelu(x + bias) * scale + x
# --8<-- [end:function]


# --8<-- [start:timing]
def time_call(fn, *args) -> float:
    """Median GPU time of fn(*args) in ms: course_tools.time_ms (CUDA events, warm-up, L2 flushed before
    each repeat, a GPU-side sleep so that the host queues fn's kernels before the start event: Python's
    and torch.compile's launch overhead, guards included, is not timed)."""
    return course_tools.time_ms(lambda: fn(*args), warmup=5, repeats=50)
# --8<-- [end:timing]


def main() -> int:
    global torch
    p = course_tools.parser("a bias + GELU + residual function, eager and under torch.compile, checked and timed")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--cols", type=int, default=1027)
    p.add_argument("--bench", action="store_true", help="also time both on 8192 x 8192")
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()
    if not (1 <= args.rows <= 1 << 16 and 1 <= args.cols <= 1 << 16):
        p.error("--rows and --cols must be between 1 and 65536")
    torch = course_tools.require_cuda("torch")
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

    ok = course_tools.check_close("eager_vs_float64", eager, want, 1e-5, 1e-5)
    ok &= course_tools.check_close("compiled_vs_float64", got, want, 1e-5, 1e-5)

    if args.bench and ok:
        rows, cols = 8192, 8192
        x = torch.randn(rows, cols, device="cuda")
        bias, scale = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
        want = bias_gelu_residual(x.double(), bias.double(), scale.double())
        # Minimal traffic: read x once, write the output once (bias and scale are tiny).
        nbytes = 2 * x.numel() * x.element_size() + 2 * cols * 4
        flops = 0  # GELU's transcendental work is not counted: this function is memory-bound
        case = f"bias+GELU+residual, {rows}x{cols} float32"
        for config in ("eager in a CUDA graph", "torch.compile reduce-overhead"):
            course_tools.pruned(
                config, f"the function moves {nbytes / 2**20:.0f} MiB, so the GPU works far longer than "
                "a launch takes; CUDA graphs remove launch overhead, which time_ms keeps out of the "
                "measured GPU time")
        for mode in ("eager", "default", "max-autotune-no-cudagraphs"):
            fn, impl = bias_gelu_residual, "eager (4 kernels), fp32"
            if mode != "eager":
                torch._dynamo.reset()  # a fresh compile per mode; each mode is checked and timed before the next
                fn, impl = (torch.compile(bias_gelu_residual, mode=mode, dynamic=False),
                            f"torch.compile {mode} (fused), fp32")
            got = fn(x, bias, scale)  # compiles for this shape before timing
            if course_tools.check_close(course_tools.slug(f"{impl} {rows}x{cols}"), got, want, 1e-5, 1e-5):
                course_tools.bench(case, impl, time_call(fn, x, bias, scale), nbytes, flops, peer=mode == "eager",
                                   size=x.numel())
            else:
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
