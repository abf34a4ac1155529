# check_layers.py: checks every layer of the CUDA implementation, forward and backward, against
# PyTorch (float64) on the same weights and the same batch, for each version (naive, libraries,
# fused, tf32) and for the fused step replayed as a CUDA graph.
#
# Taught in docs/mnist/naive.md. It writes random weights, a small random uint8 "data set" and the
# batch's indices to build/mnist/check_b<batch>/, runs `mnist_check --check-layers` on them (one
# training step per version, dumping activations, gradients and updated weights), and compares.
# Run:   python kernels/mnist/check_layers.py                   (builds build/mnist/mnist_check_layers)
#        python kernels/mnist/check_layers.py --binary build/mnist/mnist_check
#        python kernels/mnist/check_layers.py --plant zeros-small   (the comparison must reject zeros
#                                                planted where PyTorch's gradients are small)
#
# course: gpu
# course: run --batches 37,1
# course: run --plant zeros-small
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import course_tools  # noqa: E402
from mnist_torch import LR, MEAN, STD, Net  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARAM_NAMES = ["conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias",
               "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
failed = 0


# --8<-- [start:compare]
def compare(got, want, rtol, atol, noise=None):
    """(verdict, detail). Element by element |got - want| <= atol + rtol |want|, as
    course_tools.check_close, with atol set from the tensor's largest value. Alone, that passes zeros
    written wherever |want| <= atol, and gradients have many such small elements. So on S, the elements
    whose reference the atol alone would let be zero, the result must also be nearer the reference than
    zero is, in L2: ||got - want||_S <= ||want||_S / 2 + noise sqrt(|S|), where noise is the rounding
    error expected of one element (default: atol / 100, well above FP32's; pass more for TF32)."""
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    if got.size != want.size or got.size == 0:
        return False, f"size_mismatch got={got.size} want={want.size}"
    noise = atol / 100 if noise is None else noise
    with np.errstate(invalid="ignore"):
        err = np.where(got == want, 0.0, np.abs(got - want))  # NaN never equals: it fails below
    bad = ~(err <= atol + rtol * np.abs(want))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        return False, f"first_bad={i} got={got[i]:.9g} want={want[i]:.9g}"
    small = np.abs(want) <= atol
    err_l2, want_l2 = float(np.linalg.norm(err[small])), float(np.linalg.norm(want[small]))
    ok = err_l2 <= 0.5 * want_l2 + noise * np.sqrt(small.sum())
    detail = (f"max_abs_err={err.max():.3g} rtol={rtol:.1g} atol={atol:.1g} small={int(small.sum())} "
              f"small_err_l2={err_l2:.3g} small_l2={want_l2:.3g}")
    return bool(ok), detail if ok else "small_values_off " + detail


def check(name, got, want, rtol, atol, noise=None):
    """compare(), printed as the harness's CHECK line."""
    global failed
    ok, detail = compare(got, want, rtol, atol, noise)
    failed += not course_tools.check_true(name, ok, np.asarray(want).size, detail)
# --8<-- [end:compare]


def build(binary: Path, source: str = "kernels/mnist/mnist_check.cu"):
    binary.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nvcc", "-std=c++17", "-O3", "-arch=native", "-o", str(binary), source, "-lcublas"]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)


# --8<-- [start:reference]
def reference(params, images, labels, idx):
    """PyTorch in float64: the batch, every activation the CUDA code dumps, the loss and the gradients."""
    p = [t.double().requires_grad_() for t in params]
    w1, g1, b1, w2, g2, b2, w3, b3, w4, b4 = p
    x = ((images[idx].double() / 255.0 - MEAN) / STD).reshape(-1, 1, 28, 28)
    y = labels[idx].long()
    act = {"x": x}
    act["c1"] = F.conv2d(x, w1, padding=1)
    act["p1"] = F.max_pool2d(F.relu(F.batch_norm(act["c1"], None, None, g1, b1, training=True, eps=1e-5)), 2)
    act["c2"] = F.conv2d(act["p1"], w2, padding=1)
    act["p2"] = F.max_pool2d(F.relu(F.batch_norm(act["c2"], None, None, g2, b2, training=True, eps=1e-5)), 2)
    act["h"] = F.relu(F.linear(act["p2"].flatten(1), w3, b3))
    act["logits"] = F.linear(act["h"], w4, b4)
    loss = F.cross_entropy(act["logits"], y)
    loss.backward()
    return ({k: v.detach().numpy() for k, v in act.items()}, loss.item(), [t.grad.numpy() for t in p])
# --8<-- [end:reference]


# --8<-- [start:tf32]
def check_tf32(batch, act, loss, grads, params, load, offsets):
    """TF32 rounds each product's inputs to 10 mantissa bits. Through the whole network that moves some
    max-pool winners and ReLU masks, which changes single gradient values by more than any elementwise
    tolerance. So each TF32 convolution is checked on its own inputs (as the GPU computed them), with a
    tolerance of TF32 rounding; the forward pass end to end, whose errors stay small, ten times looser
    than FP32; the gradients end to end only as a relative L2 distance (a note, not a check). The
    small-values rule (compare) expects an error of a fifth of the atol per element of a TF32 kernel
    (the recorded errors stay below an eighth of it), and end to end as much as the atol itself:
    there TF32's rounding, carried through the layers, is as large as the smallest values."""
    tag, dt = f"b{batch}_tf32", torch.float64
    t = {k: torch.from_numpy(load(f"tf32.{k}").astype(np.float64))
         for k in ("x", "p1", "c1", "c2", "dc2", "dp1", "dc1")}
    w1, w2 = params[0].to(dt), params[3].to(dt)
    x, p1 = t["x"].reshape(batch, 1, 28, 28), t["p1"].reshape(batch, 32, 14, 14)
    dc2, dc1 = t["dc2"].reshape(batch, 64, 14, 14), t["dc1"].reshape(batch, 32, 28, 28)
    got_grads = load("tf32.grads")
    own = {   # each TF32 kernel's output, and float64 of the same operation on the same inputs
        "conv1_forward": (t["c1"], F.conv2d(x, w1, padding=1)),
        "conv2_forward": (t["c2"], F.conv2d(p1, w2, padding=1)),
        "conv2_input_grad": (t["dp1"], torch.nn.grad.conv2d_input(p1.shape, w2, dc2, padding=1)),
        "conv2_weight_grad": (got_grads[offsets[3]:offsets[4]],
                              torch.nn.grad.conv2d_weight(p1, w2.shape, dc2, padding=1)),
        "conv1_weight_grad": (got_grads[offsets[0]:offsets[1]],
                              torch.nn.grad.conv2d_weight(x, w1.shape, dc1, padding=1)),
    }
    for name, (got, want) in own.items():
        want = want.numpy()
        atol = 5e-3 * np.abs(want).max() + 1e-7
        check(f"{tag}_{name}", got, want, 1e-2, atol, noise=atol / 5)
    for name, want in act.items():
        atol = 1e-3 * np.abs(want).max() + 1e-6
        check(f"{tag}_{name}", load(f"tf32.{name}"), want, 1e-2, atol, noise=atol)
    check(f"{tag}_loss", load("tf32.loss"), [loss], 1e-3, 1e-6)
    before = torch.cat([p.flatten() for p in params]).double().numpy()
    check(f"{tag}_sgd_update", load("tf32.params"), before - LR * got_grads, 1e-6, 1e-7)
    for k, name in enumerate(PARAM_NAMES):
        g, want = got_grads[offsets[k]:offsets[k + 1]], grads[k].ravel()
        print(f"NOTE {tag} grad {name}: relative L2 distance to float64 = "
              f"{np.linalg.norm(g - want) / np.linalg.norm(want):.3g}")
# --8<-- [end:tf32]


def check_batch(binary: Path, batch: int, seed: int, tf32: bool):
    out = ROOT / "build" / "mnist" / f"check_b{batch}"
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    net = Net()
    with torch.no_grad():  # batch-norm scale and shift away from 1 and 0, so their gradients matter
        for bn in (net.bn1, net.bn2):
            bn.weight.copy_(1 + 0.2 * torch.randn_like(bn.weight))
            bn.bias.copy_(0.2 * torch.randn_like(bn.bias))
    params = [t.detach().clone() for t in net.parameters()]
    count = 101
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (count, 784), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, 10, (count,), dtype=torch.uint8, generator=gen)
    idx = torch.randint(0, count, (batch,), dtype=torch.int32, generator=gen)
    torch.cat([t.flatten() for t in params]).float().numpy().tofile(out / "params.f32")
    images.numpy().tofile(out / "images.u8")
    labels.numpy().tofile(out / "labels.u8")
    idx.numpy().tofile(out / "indices.i32")
    subprocess.run([str(binary), "--check-layers", str(out)], cwd=ROOT, check=True)

    act, loss, grads = reference(params, images, labels, idx.long())
    flat_params = torch.cat([t.flatten() for t in params]).double().numpy()
    sizes = [t.numel() for t in params]
    offsets = np.cumsum([0] + sizes)
    new_params = flat_params - LR * np.concatenate([g.ravel() for g in grads])

    def load(name):
        return np.fromfile(out / f"{name}.f32", dtype=np.float32)

    # The FP32 versions must match PyTorch layer by layer, end to end, to float rounding.
    for version in ("naive", "libraries", "fused"):
        tag = f"b{batch}_{version}"
        for name, want in act.items():   # forward: every layer's output
            check(f"{tag}_{name}", load(f"{version}.{name}"), want, 1e-3, 1e-4 * np.abs(want).max() + 1e-6)
        check(f"{tag}_loss", load(f"{version}.loss"), [loss], 1e-4, 1e-6)
        got_grads, got_params = load(f"{version}.grads"), load(f"{version}.params")
        for k, name in enumerate(PARAM_NAMES):   # backward: every parameter's gradient, then SGD
            g = grads[k].ravel()
            scale = np.abs(g).max()
            check(f"{tag}_grad_{name}", got_grads[offsets[k]:offsets[k + 1]], g, 2e-3, 2e-3 * scale + 1e-7)
            check(f"{tag}_sgd_{name}", got_params[offsets[k]:offsets[k + 1]], new_params[offsets[k]:offsets[k + 1]],
                  1e-6, LR * 2e-3 * scale + 1e-7)
    if tf32:
        check_tf32(batch, act, loss, grads, params, load, offsets)
    check(f"b{batch}_graph_loss", load("graph.loss"), [loss], 1e-4, 1e-6)
    check(f"b{batch}_graph_params", load("graph.params"), new_params, 1e-6,
          LR * 2e-3 * max(np.abs(g).max() for g in grads) + 1e-7)


# --8<-- [start:plant]
def planted_zeros_caught(batch: int, seed: int) -> bool:
    """--plant zeros-small: the comparison must reject PyTorch's float64 gradients rounded to float32
    (what a right kernel returns) with zeros written where |grad| <= atol, the elementwise test's blind
    spot, and must accept them unplanted. On the CPU: the reference alone, no CUDA program."""
    torch.manual_seed(seed)
    params = [t.detach().clone() for t in Net().parameters()]
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (101, 784), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, 10, (101,), dtype=torch.uint8, generator=gen)
    idx = torch.randint(0, 101, (batch,), generator=gen)
    _, _, grads = reference(params, images, labels, idx)
    plants = caught = accepted = 0
    for name, g in zip(PARAM_NAMES, grads):
        want = g.ravel()
        atol = 2e-3 * np.abs(want).max() + 1e-7   # the gradient checks' tolerance (check_batch)
        right = want.astype(np.float32)
        accepted += compare(right, want, 2e-3, atol)[0]
        small = (np.abs(want) <= atol) & (want != 0)   # a zero where the gradient is zero is no fault
        if not small.any():
            continue  # no small values in this tensor: nothing to plant
        plants += 1
        planted = np.where(small, 0.0, right)
        rejected = not compare(planted, want, 2e-3, atol)[0]
        alone = compare(planted, want, 2e-3, atol, noise=np.inf)[0]   # the elementwise test alone
        print(f"NOTE plant {name}: {int(small.sum())} of {want.size} gradients zeroed; elementwise alone "
              f"{'accepts' if alone else 'rejects'}; with the small values {'rejects' if rejected else 'accepts'}")
        caught += rejected
    ok = course_tools.check_true("planted_zeros_small_caught", plants > 0 and caught == plants, plants,
                                 f"caught={caught} of {plants}")
    ok &= course_tools.check_true("unplanted_grads_accepted", accepted == len(grads), len(grads),
                                  f"accepted={accepted} of {len(grads)}")
    return ok
# --8<-- [end:plant]


def main():
    ap = course_tools.parser("Check every layer of the MNIST CNN (mnist_model.cuh), forward and backward, against "
                             "PyTorch in float64.")
    ap.add_argument("--binary", help="a built mnist_check (default: build it as build/mnist/mnist_check_layers)")
    ap.add_argument("--batches", default="37,1", help="comma-separated batch sizes, each in [1, 1024]")
    ap.add_argument("--plant", choices=["zeros-small"],
                    help="instead of the checks: show that the comparison rejects this planted fault")
    args = ap.parse_args()
    if args.plant:
        sys.exit(0 if planted_zeros_caught(batch=37, seed=10) else 1)
    try:
        batches = [int(s) for s in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches expects comma-separated integers, got {args.batches!r}")
    if not all(1 <= b <= 1024 for b in batches):
        ap.error("--batches: each batch must be in [1, 1024]")
    course_tools.require_cuda("torch")  # the CUDA program needs a GPU
    # The TF32 variant (tensor cores) needs compute capability 8.0; mnist_check skips it on older GPUs.
    tf32 = torch.cuda.get_device_capability() >= (8, 0)
    if not tf32:
        print("NOTE the TF32 checks are skipped: TF32 tensor cores need compute capability 8.0")
    binary = Path(args.binary) if args.binary else ROOT / "build" / "mnist" / "mnist_check_layers"
    if not args.binary:
        build(binary)
    for i, b in enumerate(batches):
        check_batch(binary.resolve(), b, seed=10 + i, tf32=tf32)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
