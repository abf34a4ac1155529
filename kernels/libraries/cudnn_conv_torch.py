"""cudnn_conv_torch.py: checks cudnn_conv.cu's convolution against PyTorch, and with --bench times
PyTorch's own convolution (which calls cuDNN) on the layer that cudnn_conv.cu --bench times.

Taught in docs/libraries/cudnn.md. Builds kernels/libraries/cudnn_conv.cu with nvcc (the page's build
command, plus the include and library folders of the nvidia-cudnn wheel when the toolkit has no cuDNN),
runs it with --dump so that it writes its input, filter and output as raw float32, and compares the
output with torch.nn.functional.conv2d computed in float64 on the CPU (no cuDNN involved), and with
PyTorch's own GPU convolution (which calls cuDNN) for the same tensors.
Run: python kernels/libraries/cudnn_conv_torch.py [--bench]
"""
# course: gpu
# course: depends kernels/libraries/cudnn_conv.cu
# course: bench --bench
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernels/libraries/cudnn_conv.cu"
SHAPE = dict(n=3, c=7, h=17, w=23, k=4, r=5, pad=2, stride=2)


def cudnn_flags() -> list[str]:
    """-I, -L and rpath flags for cuDNN: none when the toolkit has it, else the nvidia-cudnn wheel's."""
    nvcc = shutil.which("nvcc")
    if nvcc and (Path(nvcc).resolve().parent.parent / "include" / "cudnn.h").is_file():
        return ["-lcudnn"]
    try:
        import nvidia.cudnn  # the wheel: nvidia/cudnn/{include,lib}
    except ImportError:
        sys.exit("error: cuDNN is in neither the CUDA toolkit nor an installed nvidia-cudnn wheel; "
                 "pip install -e '.[libs]'")
    base = Path(list(nvidia.cudnn.__path__)[0])
    libdir = base / "lib"
    # The wheel ships only libcudnn.so.9: link it by its file name (-l:), and find it at run time (rpath).
    return [f"-I{base / 'include'}", f"-L{libdir}", "-l:libcudnn.so.9", f"-Xlinker=-rpath,{libdir}"]


def build(out: Path) -> None:
    """nvcc -O3 -arch=native -o <out> kernels/libraries/cudnn_conv.cu -lcudnn, as on the page."""
    cmd = ["nvcc", "-std=c++17", "-O3", "-arch=native", "-o", str(out), str(SOURCE), *cudnn_flags()]
    if shutil.which("nvcc") is None:
        sys.exit("error: nvcc is not on PATH; this program builds kernels/libraries/cudnn_conv.cu with it")
    built = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"error: building cudnn_conv failed:\n{' '.join(cmd)}\n{built.stderr}")


def run_dump(exe: Path, folder: Path):
    import numpy as np

    s = SHAPE
    args = [x for key, value in s.items() for x in (f"--{key}", str(value))]
    run = subprocess.run([str(exe), *args, "--dump", str(folder)], capture_output=True, text=True)
    print(run.stdout, end="")
    if run.returncode != 0:
        sys.exit(f"error: cudnn_conv failed (exit {run.returncode}):\n{run.stderr}")
    x = np.fromfile(folder / "x.f32", dtype=np.float32).reshape(s["n"], s["c"], s["h"], s["w"])
    w = np.fromfile(folder / "w.f32", dtype=np.float32).reshape(s["k"], s["c"], s["r"], s["r"])
    y = np.fromfile(folder / "y.f32", dtype=np.float32)
    return x, w, y


def check(torch, x, w, y) -> bool:
    import torch.nn.functional as F

    s = SHAPE
    # --8<-- [start:compare]
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    want = F.conv2d(xt.double(), wt.double(), stride=s["stride"], padding=s["pad"])
    # cudnn_conv.cu runs with the math type cuDNN chose; default math permits TF32, hence 5e-3.
    got = torch.from_numpy(y).reshape(want.shape)
    ok = course_tools.check_close("cudnn_conv_vs_torch_cpu_fp64", got, want, 5e-3, 5e-3)
    # PyTorch on the GPU goes through cuDNN too; with TF32 off it must agree to fp32 accuracy.
    torch.backends.cudnn.allow_tf32 = False
    gpu = F.conv2d(xt.cuda(), wt.cuda(), stride=s["stride"], padding=s["pad"])
    ok &= course_tools.check_close("torch_cuda_conv_vs_torch_cpu_fp64", gpu, want, 1e-4, 1e-4)
    # --8<-- [end:compare]
    return ok


# --8<-- [start:bench]
def bench(torch) -> bool:
    """The layer cudnn_conv.cu --bench times (3x3, 64 -> 64 channels on 56x56, batch 32, fp32), through
    every configuration PyTorch offers for it: NCHW and channels_last (NHWC) memory, fp32 IEEE and TF32
    math, cudnn.benchmark off (cuDNN's heuristic picks) and on (find, cached per shape), eager and
    torch.compile max-autotune (which also tries Inductor's Triton convolution templates). Each
    configuration is checked against float64 on the same inputs before it is timed."""
    import torch.nn.functional as F

    n, c, h, w, k = 32, 64, 56, 56, 64
    gen = torch.Generator(device="cuda").manual_seed(2026)
    x = torch.rand(n, c, h, w, device="cuda", generator=gen) * 4 - 2
    f = torch.rand(k, c, 3, 3, device="cuda", generator=gen) * 2 - 1
    flops = 2.0 * n * k * h * w * c * 9
    nbytes = 4.0 * (x.numel() + f.numel() + n * k * h * w)
    want = F.conv2d(x[:2].double(), f.double(), padding=1)  # two images: the check's sample
    # Errors are bounded by a multiple of sum |x w| over an output's 576 products: fp32 accumulation by
    # ~576 * 2^-24 of it, TF32's inputs (10 explicit mantissa bits) by ~2^-10 of it; margins for the
    # Winograd and FFT algorithms. A typical output is ~1/24 of that sum, so a wrong one cannot pass.
    scale = F.conv2d(x[:2].double().abs(), f.double().abs(), padding=1).clamp_min(1e-30)
    tolerance = {False: 1e-4, True: 2.0 ** -8}
    course_tools.pruned("bf16 or fp16 data", "the page compares fp32 convolutions, cudnn_conv.cu's data type")
    course_tools.pruned("torch.compile default", "Inductor lowers a lone conv2d to the same cuDNN call as eager "
                        "(an extern aten.convolution kernel); only max-autotune adds candidates")
    course_tools.pruned(
        "CUDA graphs (eager in a graph, torch.compile reduce-overhead)",
        f"one convolution of {nbytes / 2**20:.0f} MiB and {flops / 1e9:.1f} GFLOP runs for far longer "
        "than a launch takes; graphs remove launch overhead, which time_ms keeps out of the measurement")
    ok = True
    for layout in ("NCHW", "NHWC"):
        xl = x if layout == "NCHW" else x.contiguous(memory_format=torch.channels_last)
        fl = f if layout == "NCHW" else f.contiguous(memory_format=torch.channels_last)
        case = f"conv 3x3, 32x64x56x56 -> 64, fp32 {layout}" + (" (channels_last)" if layout == "NHWC" else "")
        for tf32 in (False, True):
            math = "TF32" if tf32 else "fp32 IEEE"
            torch.backends.cudnn.allow_tf32 = tf32
            runs = []
            for find in (False, True):
                runs.append((f"torch conv2d, {math}, cudnn.benchmark {'on' if find else 'off'}", find,
                             lambda: F.conv2d(xl, fl, padding=1)))
            if layout == "NHWC":  # Inductor makes convolutions channels_last itself (layout_optimization)
                torch._dynamo.reset()
                torch.backends.cudnn.benchmark = True
                compiled = torch.compile(lambda a, b: F.conv2d(a, b, padding=1), mode="max-autotune-no-cudagraphs",
                                         dynamic=False)
                runs.append((f"torch.compile max-autotune-no-cudagraphs conv2d, {math}", True,
                             lambda: compiled(xl, fl)))
            for impl, find, run in runs:
                torch.backends.cudnn.benchmark = find
                got = run()  # the first call finds (benchmark on) or compiles and autotunes (torch.compile)
                # Each output over its own sum of |x w|: the bound scales with the data, zeros fail.
                good = course_tools.check_close(course_tools.slug(f"{impl} {layout}"), got[:2].double() / scale,
                                                want / scale, 0.0, tolerance[tf32])
                ok &= good
                if good:
                    course_tools.bench(case, impl, course_tools.time_ms(run), nbytes, flops, peer=True)
        if layout == "NCHW":
            course_tools.pruned(f"torch.compile on {case}", "Inductor's layout_optimization turns convolutions "
                                "channels_last itself; the compiled rows are timed once, on NHWC input")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = True
    return ok
# --8<-- [end:bench]


def main() -> int:
    p = course_tools.parser("Check cudnn_conv.cu against PyTorch; --bench times PyTorch's convolution.")
    p.add_argument("--bench", action="store_true", help="also time PyTorch's conv2d on a ResNet-50 layer")
    args = p.parse_args()
    torch = course_tools.require_cuda("torch")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "cudnn_conv"
        build(exe)
        x, w, y = run_dump(exe, Path(tmp))
    ok = check(torch, x, w, y)
    if ok and args.bench:
        ok &= bench(torch)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
