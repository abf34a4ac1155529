# package_gelu.py: builds the course_ext package (kernels/pytorch-extensions/setup.py, a
# CUDAExtension of csrc/fused_gelu.cu and csrc/register.cpp, plus course_ext/__init__.py) with pip
# into build/pytorch-extensions/site, then checks its torch.library operator and the Triton one
# (triton_gelu.py): values, autograd, torch.library.opcheck and torch.compile(fullgraph=True).
# With --bench it times both fused operators against the eager composite, torch.compile of the
# composite and PyTorch's own gelu, forward and backward.
#
# Taught in docs/pytorch-extensions/packaging.md, torch-library.md and benchmarks.md. It builds the
# files kernels/pytorch-extensions/csrc/fused_gelu.cu, kernels/pytorch-extensions/csrc/register.cpp,
# kernels/pytorch-extensions/course_ext/__init__.py and kernels/pytorch-extensions/setup.py.
# Run:   python kernels/pytorch-extensions/package_gelu.py
#        python kernels/pytorch-extensions/package_gelu.py --bench
#
# course: gpu
# course: run
# course: bench --bench
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


# --8<-- [start:bench]
def run_benchmarks(impls) -> None:
    for n in [1 << 16, 1 << 20, 1 << 24, 1 << 26]:
        x = torch.randn(n, device="cuda", requires_grad=True)
        g = torch.randn(n, device="cuda")
        for direction in ("forward", "backward"):
            case = f"GELU {direction}, fp32, n = 2^{n.bit_length() - 1}"
            moved = 4 * n * (2 if direction == "forward" else 3)  # x -> y; (grad, x) -> dx
            for impl, op in impls.items():
                if direction == "forward":
                    def fn(op=op):
                        with torch.no_grad():     # no graph: the forward alone
                            return op(x)
                else:
                    y = op(x)                     # the graph is built once; only backward is timed
                    fn = lambda y=y: torch.autograd.grad(y, x, g, retain_graph=True)  # noqa: E731
                course_tools.bench(case, impl, course_tools.time_ms(fn), moved, peer=impl.startswith("eager"), n=n,
                                   direction=direction)
# --8<-- [end:bench]


def main() -> int:
    global torch
    p = course_tools.parser("build, check and time the packaged fused GELU")
    p.add_argument("--bench", action="store_true", help="also time every implementation")
    args = p.parse_args()
    torch = course_tools.require_cuda("torch")        # course_ext's kernels need a CUDA GPU and CUDA torch
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {torch.cuda.get_device_name()}")
    install_package()
    sys.path.insert(0, str(SITE))
    import course_ext                                   # loads _C: the operators are registered

    from gelu_reference import check_operator, gelu_composite
    from triton_gelu import triton_gelu

    ok = check_operator("package", course_ext.fused_gelu, "cuda",
                        dtypes=(torch.float32, torch.float64, torch.float16, torch.bfloat16), bad_device="cpu")
    ok &= run_opcheck("package", torch.ops.course_ext.fused_gelu.default)
    ok &= check_compiled("package", course_ext.fused_gelu)
    ok &= run_opcheck("triton", torch.ops.course_triton.gelu.default)
    ok &= check_compiled("triton", triton_gelu)
    if not ok:
        return 1
    if args.bench:
        torch._dynamo.reset()
        run_benchmarks({
            "eager composite": gelu_composite,
            "torch.compile(composite)": torch.compile(gelu_composite),
            "CUDA extension (course_ext)": course_ext.fused_gelu,
            "Triton op": triton_gelu,
            "F.gelu(approximate='tanh')": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
