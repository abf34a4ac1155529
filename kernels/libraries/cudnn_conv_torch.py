"""cudnn_conv_torch.py: checks cudnn_conv.cu's convolution against PyTorch.

Taught in docs/libraries/cudnn.md. Builds kernels/libraries/cudnn_conv.cu with the course's flags, runs
it with --dump so that it writes its input, filter and output as raw float32, and compares the output
with torch.nn.functional.conv2d computed in float64 on the CPU (no cuDNN involved), and with PyTorch's
own GPU convolution (which calls cuDNN) for the same tensors.
Run: python kernels/libraries/cudnn_conv_torch.py
"""
# course: gpu
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from course.programs import build, program_for  # noqa: E402  (the course's own build flags)

SHAPE = dict(n=3, c=7, h=17, w=23, k=4, r=5, pad=2, stride=2)


def check(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> bool:
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= atol + rtol * np.abs(want))  # NaN counts as bad
    if bad.any() or got.size == 0:
        i = int(np.argmax(bad)) if bad.any() else 0
        print(f"CHECK FAIL {name} n={got.size} first_bad={i} got={got.flat[i] if got.size else 'none'} want={want.flat[i] if want.size else 'none'}")
        return False
    print(f"CHECK PASS {name} n={got.size} max_abs_err={err.max():.3g} rtol={rtol:g} atol={atol:g}")
    return True


def main() -> int:
    program = program_for("kernels/libraries/cudnn_conv.cu")
    built = build(program)
    if built.returncode != 0:
        print(built.stderr, file=sys.stderr)
        return 1
    s = SHAPE
    args = []
    for key, value in s.items():
        args += [f"--{key}", str(value)]
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([str(program.executable), *args, "--dump", tmp], capture_output=True, text=True)
        print(run.stdout, end="")
        if run.returncode != 0:
            print(run.stderr, file=sys.stderr)
            return 1
        x = np.fromfile(Path(tmp) / "x.f32", dtype=np.float32).reshape(s["n"], s["c"], s["h"], s["w"])
        w = np.fromfile(Path(tmp) / "w.f32", dtype=np.float32).reshape(s["k"], s["c"], s["r"], s["r"])
        y = np.fromfile(Path(tmp) / "y.f32", dtype=np.float32)

    # --8<-- [start:compare]
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    want = F.conv2d(xt.double(), wt.double(), stride=s["stride"], padding=s["pad"]).numpy()
    ok = check("cudnn_conv_vs_torch_cpu_fp64", y.reshape(want.shape), want, 5e-3, 5e-3)
    # PyTorch on the GPU goes through cuDNN too; with TF32 off it must agree to fp32 accuracy.
    torch.backends.cudnn.allow_tf32 = False
    gpu = F.conv2d(xt.cuda(), wt.cuda(), stride=s["stride"], padding=s["pad"]).cpu().numpy()
    ok &= check("torch_cuda_conv_vs_torch_cpu_fp64", gpu, want, 1e-4, 1e-4)
    # --8<-- [end:compare]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
