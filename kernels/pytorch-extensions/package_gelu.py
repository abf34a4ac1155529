# package_gelu.py: builds the course_ext package (kernels/pytorch-extensions/setup.py, a
# CUDAExtension of csrc/fused_gelu.cu and csrc/register.cpp, plus course_ext/__init__.py) with pip
# into build/pytorch-extensions/site, then checks its torch.library operator and the Triton one
# (triton_gelu.py): values, autograd, torch.library.opcheck and torch.compile(fullgraph=True).
# With --bench it times both fused operators, forward and backward, against the strongest
# configurations PyTorch offers: the composite and F.gelu, eager, in a CUDA graph where launches can
# matter, and under torch.compile in each mode (course_tools.torch_peers), each checked against float64
# at the timed size before it is timed. A benchmark run skips the API checks above (the plain run
# does them) and checks every timed implementation instead.
#
# Taught in docs/pytorch-extensions/packaging.md, torch-library.md and benchmarks.md. It builds the
# files kernels/pytorch-extensions/csrc/fused_gelu.cu, kernels/pytorch-extensions/csrc/register.cpp,
# kernels/pytorch-extensions/course_ext/__init__.py and kernels/pytorch-extensions/setup.py.
# Run:   python kernels/pytorch-extensions/package_gelu.py
#        python kernels/pytorch-extensions/package_gelu.py --bench            (every size)
#        python kernels/pytorch-extensions/package_gelu.py --bench --large    (2^24 and 2^26 only)
#        python kernels/pytorch-extensions/package_gelu.py --bench --small    (2^16 and 2^20 only)
#
# The benchmark is recorded as two runs, each its own process, to keep each under a minute of
# compilation (every configuration is compiled per size); they take switches, not values, so the GPU
# run keeps them together on one GPU and one build (course/gpu_run.py).
# course: gpu
# course: run
# course: bench --bench --large
# course: bench --bench --small
import hashlib
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

torch = None  # imported in main(), after the arguments are checked
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kernels/pytorch-extensions"
SITE = ROOT / "build/pytorch-extensions/site"
SOURCES = ["setup.py", "pyproject.toml", "csrc/fused_gelu.cu", "csrc/register.cpp", "course_ext/__init__.py"]


# --8<-- [start:install]
def install_package() -> None:
    """pip-install course_ext into build/pytorch-extensions/site, unless that build is current."""
    digest = hashlib.sha256(torch.__version__.encode())  # a new torch needs a rebuild too (ABI)
    for name in SOURCES:
        digest.update((PACKAGE / name).read_bytes())
    stamp = SITE / ".course-build-hash"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        print("course_ext: build is current")
        return
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--upgrade",
           "--target", str(SITE), str(PACKAGE)]
    print("building: " + " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)
    stamp.write_text(digest.hexdigest())
# --8<-- [end:install]


def check_compiled(label, op) -> bool:
    """The operator inside a torch.compile'd function: one graph, same values, same gradients."""
    from course_tools import check_close, check_true

    def f(x):
        return op(x * 2.0 - 1.0) * 3.0

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(f)(torch.randn(64, device="cuda"))
    ok = check_true(f"{label}_compiles_without_graph_breaks", explanation.graph_break_count == 0, 1,
                    f"graph_breaks={explanation.graph_break_count}")
    compiled = torch.compile(f, fullgraph=True)      # fullgraph: a graph break would be an error
    x = torch.randn(1000, 1003, device="cuda", requires_grad=True)
    y_eager, y_comp = f(x), compiled(x)
    g = torch.randn_like(y_eager)
    (dx_eager,) = torch.autograd.grad(y_eager, x, g)
    (dx_comp,) = torch.autograd.grad(y_comp, x, g)
    ok &= check_close(f"{label}_compiled_forward", y_comp, y_eager, 1e-5, 1e-5)
    ok &= check_close(f"{label}_compiled_backward", dx_comp, dx_eager, 1e-5, 1e-5)
    return ok


# --8<-- [start:opcheck]
def run_opcheck(label, op_overload) -> bool:
    """torch.library.opcheck: schema, fake kernel, autograd registration and AOT dispatch agree."""
    from course_tools import check_true

    samples = [torch.randn(33, 7, device="cuda", requires_grad=True),
               torch.randn(5, device="cuda", dtype=torch.float64),
               torch.randn(9, 4, device="cuda").t()]          # non-contiguous
    failures, tests = [], 0
    for x in samples:
        result = torch.library.opcheck(op_overload, (x,), raise_exception=False)
        tests += len(result)
        failures += [f"{k}: {v}" for k, v in result.items() if v != "SUCCESS"]
    for f in failures:
        print(f"  opcheck {label}: {f}")
    return check_true(f"{label}_opcheck", not failures, tests, f"samples={len(samples)}")
# --8<-- [end:opcheck]


SMALL, LARGE = [1 << 16, 1 << 20], [1 << 24, 1 << 26]
TOL = (1e-5, 3e-5)  # float32 against float64, as check_operator's float32 bound (gelu_reference.py)


# --8<-- [start:bench]
def backward_peers(fn, x, g, label: str, nbytes: float, modes):
    """torch_peers for the backward alone: (impl, run) where run() returns dx of fn at x for the
    incoming gradient g, on a forward built once (autograd's graph is kept: retain_graph=True)."""
    def grad_of(y):
        return lambda: torch.autograd.grad(y, x, g, retain_graph=True)[0]

    yield f"{label}, eager", grad_of(fn(x))
    why = (f"moves {nbytes / 2**20:.0f} MiB, so the GPU works far longer than a launch takes; CUDA graphs "
           "remove launch overhead, which time_ms keeps out of the measured GPU time")
    if nbytes >= course_tools.LAUNCH_BOUND_BYTES:
        course_tools.pruned(f"{label}, eager in a CUDA graph", why)
    else:
        yield f"{label}, eager in a CUDA graph", graphed_backward(fn, x, g)
    for mode in modes:
        impl = f"{label}, torch.compile {mode}"
        if mode == "reduce-overhead":
            course_tools.pruned(impl, "its CUDA graph trees run one step at a time, a forward and then that "
                                "forward's backward; the backward here is replayed alone on one forward, which "
                                "such a tree does not do; the eager backward in a CUDA graph stands for it")
            continue
        torch._dynamo.reset()                       # compile afresh for each mode
        run = grad_of(torch.compile(fn, mode=mode, dynamic=False)(x))  # AOTAutograd compiles the backward too
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        yield impl, run


def graphed_backward(fn, x, g):
    """The backward of fn at x captured in a CUDA graph. Autograd runs each backward op on its forward
    op's stream, so the forward runs on the capture stream, before the capture; so is the leaf made there
    (a leaf from the default stream made a capture fail: 'would make the legacy stream depend on a
    capturing blocking stream')."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x = x.detach().clone().requires_grad_()
        y = fn(x)
        for _ in range(3):                          # warm up off the default stream, as for any capture
            torch.autograd.grad(y, x, g, retain_graph=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        (dx,) = torch.autograd.grad(y, x, g, retain_graph=True)

    def run():
        graph.replay()
        return dx
    return run


def run_benchmarks(course_impls: dict, sizes: list[int]) -> bool:
    """Times every implementation at each size, forward and backward: PyTorch's configurations (peers)
    and the course's fused operators, each checked against the float64 composite first."""
    from gelu_reference import gelu_backward_composite, gelu_composite

    check, bench, time_ms = course_tools.check_close_on_device, course_tools.bench, course_tools.time_ms
    pytorch = {  # label -> (function, torch.compile modes)
        "PyTorch composite, fp32": (gelu_composite, course_tools.COMPILE_MODES),
        "PyTorch F.gelu(approximate='tanh'), fp32": (lambda t: torch.nn.functional.gelu(t, approximate="tanh"), ()),
    }
    course_tools.pruned("PyTorch F.gelu(approximate='tanh'), fp32, torch.compile (every mode)",
                        "Inductor decomposes aten.gelu with approximate='tanh' into the composite's formula, and "
                        "its backward likewise, so it generates the kernels the composite's compiled rows time")
    ok = True
    for n in sizes:
        torch.manual_seed(n)
        x = torch.randn(n, device="cuda") * 3          # values where tanh is neither linear nor saturated
        g = torch.randn(n, device="cuda")
        want = {"forward": gelu_composite(x.double()), "backward": gelu_backward_composite(g.double(), x.double())}
        xg = x.clone().requires_grad_()
        for direction in ("forward", "backward"):
            case = f"GELU {direction}, fp32, n = 2^{n.bit_length() - 1}"
            moved = 4 * n * (2 if direction == "forward" else 3)  # x -> y; (grad, x) -> dx

            def measure(impl, run, peer):
                good = check(course_tools.slug(f"{impl} {direction} {n}"), run(), want[direction], *TOL)
                if good:
                    bench(case, impl, time_ms(run), moved, peer=peer, n=n, direction=direction)
                return good

            for label, (fn, modes) in pytorch.items():  # each configuration compiled when its turn comes
                if direction == "forward":                # x needs no gradient: no autograd graph is recorded
                    configurations = course_tools.torch_peers(fn, (x,), label, moved, modes)
                else:
                    configurations = backward_peers(fn, xg, g, label, moved, modes)
                for impl, run in configurations:
                    ok &= measure(impl, run, True)
            for impl, op in course_impls.items():
                if direction == "forward":
                    ok &= measure(impl, lambda op=op: op(x), False)
                else:
                    y = op(xg)                            # the graph is built once; only backward is timed
                    ok &= measure(impl, lambda y=y: torch.autograd.grad(y, xg, g, retain_graph=True)[0], False)
    return ok
# --8<-- [end:bench]


def main() -> int:
    global torch
    p = course_tools.parser("build, check and time the packaged fused GELU")
    p.add_argument("--bench", action="store_true", help="time every implementation instead of the API checks")
    p.add_argument("--small", action="store_true", help="with --bench: only 2^16 and 2^20 elements")
    p.add_argument("--large", action="store_true", help="with --bench: only 2^24 and 2^26 elements")
    args = p.parse_args()
    if (args.small or args.large) and not args.bench:
        p.error("--small and --large choose the sizes --bench times; give --bench too")
    if args.small and args.large:
        p.error("--small and --large exclude each other (give neither for every size)")
    sizes = SMALL if args.small else LARGE if args.large else SMALL + LARGE
    torch = course_tools.require_cuda("torch")        # course_ext's kernels need a CUDA GPU and CUDA torch
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {torch.cuda.get_device_name()}")
    install_package()
    sys.path.insert(0, str(SITE))
    import course_ext                                   # loads _C: the operators are registered

    from gelu_reference import check_operator
    from triton_gelu import triton_gelu

    if args.bench:  # the plain run does the API checks; here every timed implementation is checked
        return 0 if run_benchmarks({"CUDA extension (course_ext)": course_ext.fused_gelu, "Triton op": triton_gelu},
                                   sizes) else 1
    ok = check_operator("package", course_ext.fused_gelu, "cuda",
                        dtypes=(torch.float32, torch.float64, torch.float16, torch.bfloat16), bad_device="cpu")
    ok &= run_opcheck("package", torch.ops.course_ext.fused_gelu.default)
    ok &= check_compiled("package", course_ext.fused_gelu)
    ok &= run_opcheck("triton", torch.ops.course_triton.gelu.default)
    ok &= check_compiled("triton", triton_gelu)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
