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
def bench(torch) -> None:
    """The layer cudnn_conv.cu --bench times (3x3, 64 -> 64 channels on 56x56, batch 32, fp32), through
    PyTorch: cudnn.benchmark off (cuDNN's heuristic picks) and on (find, cached per shape), TF32 off
    and on, NCHW and channels_last (NHWC) memory. Random inputs; the course's timer."""
    import torch.nn.functional as F

    n, c, h, w, k = 32, 64, 56, 56, 64
    gen = torch.Generator(device="cuda").manual_seed(2026)
    x = torch.rand(n, c, h, w, device="cuda", generator=gen) * 4 - 2
    f = torch.rand(k, c, 3, 3, device="cuda", generator=gen) * 2 - 1
    flops = 2.0 * n * k * h * w * c * 9
    nbytes = 4.0 * (x.numel() + f.numel() + n * k * h * w)
    for layout in ("NCHW", "NHWC"):
        xl = x if layout == "NCHW" else x.contiguous(memory_format=torch.channels_last)
        fl = f if layout == "NCHW" else f.contiguous(memory_format=torch.channels_last)
        case = f"conv 3x3, 32x64x56x56 -> 64, fp32 {layout}" + (" (channels_last)" if layout == "NHWC" else "")
        for tf32 in (False, True):
            for find in (False, True):
                torch.backends.cudnn.allow_tf32 = tf32
                torch.backends.cudnn.benchmark = find
                ms = course_tools.time_ms(lambda: F.conv2d(xl, fl, padding=1))
                impl = (f"torch conv2d, TF32 {'allowed' if tf32 else 'off'}, "
                        f"cudnn.benchmark {'on' if find else 'off'}")
                course_tools.bench(case, impl, ms, nbytes, flops, peer=layout == "NCHW" and tf32 and find)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = True
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
        bench(torch)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
