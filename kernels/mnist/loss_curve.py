# loss_curve.py: the final project's end-to-end check, as karpathy's llm.c test_gpt2 does it: 50 training
# steps of the CUDA program (versions 3 and 4) from the same initial weights and on the same batches as
# PyTorch in float64, their losses compared step by step.
#
# Taught in docs/mnist/tensor-cores-checks.md. Run: python kernels/mnist/loss_curve.py
# (builds mnist_train with check_layers.py's build command, or takes --binary PATH; the data directory as
# mnist_torch.py takes it: --data-dir, else $MNIST_DIR, else data/mnist).
#
# course: gpu
# course: run
import math
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# --8<-- [start:compare_curve]
CURVE_STEPS, CURVE_BATCH = 50, 64
# What the comparison can ask. This training is chaotic: with batch norm on batch statistics and a large
# step, a difference in the last bit changes which pixel wins a max-pool or which unit a ReLU keeps a few
# steps later, and from then on the two runs follow different (equally good) paths. The first GPU run
# showed it: version 3 (fp32) matched float64 to a few 1e-6 for ten steps, then drifted by up to 0.1;
# version 4 (inputs rounded to bf16, unit roundoff 2^-8 against fp32's 2^-24) drifted from the second step. So:
#   early:  the first EARLY steps step by step, |cuda - torch| <= rtol * |torch|: fp32 to 1e-4 (rounding
#           alone stays far below; one wrong gradient moves step 1's loss by a good part of a step's
#           progress, about 0.25 here), bf16 to 1e-2 for its first two steps (one step's rounding);
#   trend:  the mean loss of the last 25 steps (half the curve: ten steps are too few to average out
#           the paths' differences; a GPU run saw 16% at ten steps and 10% at 25) within 15% of
#           PyTorch's, and below half of the first step's: the same training, not a diverged or stalled one.
CURVE_CHECKS = {"fused": {"early": 10, "rtol": 1e-4}, "tc": {"early": 2, "rtol": 1e-2}}
TREND_STEPS, TREND_RTOL = 25, 0.15


def read_weights(path: Path) -> list[np.ndarray]:
    """The weights file that mnist_train writes (see its --save): magic, version, shapes, float32 data."""
    data = path.read_bytes()
    if data[:8] != b"MNISTCNN":
        raise ValueError(f"{path}: not a weights file of mnist_train")
    version, count = struct.unpack_from("<II", data, 8)
    if version != 1 or count != 10:
        raise ValueError(f"{path}: format version {version} with {count} tensors, expected 1 and 10")
    at, shapes = 16, []
    for _ in range(count):
        (rank,) = struct.unpack_from("<I", data, at)
        shapes.append(struct.unpack_from(f"<{rank}I", data, at + 4))
        at += 4 + 4 * rank
    values = np.frombuffer(data, dtype="<f4", offset=at)
    if values.size != sum(math.prod(s) for s in shapes):
        raise ValueError(f"{path}: {values.size} weights, expected {sum(math.prod(s) for s in shapes)}")
    out, k = [], 0
    for shape in shapes:
        out.append(values[k:k + math.prod(shape)].reshape(shape).copy())
        k += math.prod(shape)
    return out


def compare_curve(data, data_dir: Path, binary_arg: str | None) -> bool:
    """Runs mnist_train --loss-curve (its initial weights, and 50 steps' losses of versions 3 and 4 on
    the training images in file order), trains PyTorch in float64 from the same weights on the same
    batches, and compares the curves step by step, as llm.c's test_gpt2 compares its losses with
    PyTorch's. The CUDA program is built here (with check_layers.py's build command) and run as a
    subprocess: the harness runs each program on its own, so this one cannot count on another run
    having left files behind."""
    from check_layers import ROOT, build  # noqa: E402  (it imports this module: import it only here)
    # its own binary: the harness builds build/mnist/mnist_train too, and the two must not race
    binary = Path(binary_arg) if binary_arg else ROOT / "build" / "mnist" / "mnist_train_curve"
    if not binary_arg:
        build(binary, "kernels/mnist/mnist_train.cu")
    out_dir = ROOT / "build" / "mnist" / "loss_curve"
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*"):
        old.unlink()
    subprocess.run([str(binary.resolve()), "--loss-curve", str(out_dir), "--data-dir", str(data_dir),
                    "--batch", str(CURVE_BATCH)], check=True)
    device = torch.device("cuda")
    model = Net().to(device).double()
    with torch.no_grad():
        for p, w in zip(model.parameters(), read_weights(out_dir / "init.bin"), strict=True):
            if tuple(p.shape) != w.shape:
                raise ValueError(f"init.bin: a tensor of shape {w.shape} where the model has {tuple(p.shape)}")
            p.copy_(torch.from_numpy(w))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.0)
    images = torch.from_numpy(data["train_images"].copy()).to(device)
    labels = torch.from_numpy(data["train_labels"].astype(np.int64)).to(device)
    ref = []
    for s in range(CURVE_STEPS):   # batch s: images s*64 .. s*64+63, in file order, as mnist_train takes them
        x, y = gather(images, labels, torch.arange(s * CURVE_BATCH, (s + 1) * CURVE_BATCH, device=device))
        loss = F.cross_entropy(model(x.double()), y)   # the same fp32-normalised pixels, then float64
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ref.append(loss.item())
    ok = True
    for name, label in (("fused", "version 3 (fp32)"), ("tc", "version 4 (bf16, fp32 accumulate)")):
        path = out_dir / f"losses-{name}.txt"
        if not path.exists():
            print(f"NOTE {label}: no curve (mnist_train skips it on this GPU)")
            continue
        got = [float(v) for v in path.read_text().split()]
        print(f"step  PyTorch float64  CUDA {label}  difference")
        for s, (w, g) in enumerate(zip(ref, got)):
            print(f"{s:4d}  {w:15.6f}  {g:15.6f}  {g - w:+.2e}")
        ok &= course_tools.check_true(f"loss_curve_{name}_has_{CURVE_STEPS}_steps", len(got) == CURVE_STEPS, 1)
        if len(got) != CURVE_STEPS:
            continue
        early, rtol = CURVE_CHECKS[name]["early"], CURVE_CHECKS[name]["rtol"]
        ok &= course_tools.check_close(f"loss_curve_{name}_first_{early}_steps_vs_torch_fp64", np.array(got[:early]),
                                       np.array(ref[:early]), rtol, 0.0)
        mean_got, mean_ref = np.mean(got[-TREND_STEPS:]), np.mean(ref[-TREND_STEPS:])
        ok &= course_tools.check_true(
            f"loss_curve_{name}_last_{TREND_STEPS}_steps_mean_within_{TREND_RTOL:g}_of_torch",
            bool(abs(mean_got - mean_ref) <= TREND_RTOL * mean_ref and mean_got < 0.5 * got[0]), TREND_STEPS,
            f"mean_cuda={mean_got:.4f} mean_torch={mean_ref:.4f} first_cuda={got[0]:.4f}")
    return ok
# --8<-- [end:compare_curve]


def main():
    ap = course_tools.parser(
        "Compare mnist_train's loss curves (versions 3 and 4, 50 steps) with PyTorch's in float64.")
    ap.add_argument("--data-dir")
    ap.add_argument("--binary", help="a built mnist_train (default: build one)")
    args = ap.parse_args()
    # PyTorch and the model after the GPU check, so that a machine without one gets a clean exit 1.
    global torch, F, Net, LR, gather
    torch = course_tools.require_cuda("torch")
    import torch.nn.functional as F
    from mnist_torch import LR, IdxError, Net, data_dir_from, gather, load_mnist
    try:
        data = load_mnist(data_dir_from(args.data_dir))
    except IdxError as e:
        sys.exit(f"error: {e}")  # a missing or damaged file: the message, and exit code 1
    sys.exit(0 if compare_curve(data, data_dir_from(args.data_dir), args.binary) else 1)


if __name__ == "__main__":
    main()
