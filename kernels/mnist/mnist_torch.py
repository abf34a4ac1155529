# mnist_torch.py: the PyTorch reference of the course's MNIST CNN, its training loop, and the PyTorch
# side of the benchmark (eager, torch.compile, and the whole step captured in one CUDA graph).
#
# Taught in docs/mnist/reference.md (the model and the loop) and docs/mnist/results.md (the benchmark).
# Run:   python kernels/mnist/mnist_torch.py --train --epochs 8        (trains, checks test accuracy)
#        python kernels/mnist/mnist_torch.py --bench                   (times a step and an epoch per mode)
# The data directory is --data-dir, else $MNIST_DIR, else data/mnist (the four standard IDX files,
# gzipped or not; see docs/mnist/data.md for where to get them).
#
# course: gpu
# course: run --train --epochs 8
# course: bench --bench
import gzip
import json
import math
import os
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# --8<-- [start:hparams]
# The hyper-parameters both implementations share.
LR = 0.05           # plain SGD: no momentum, no weight decay, no schedule
BATCH = 64
EPOCHS = 8
MEAN, STD = 0.1307, 0.3081   # MNIST's pixel mean and standard deviation (after /255)
EVAL_CHUNK = 1000   # the test set is evaluated 1000 images at a time (batch-norm uses batch statistics)
# --8<-- [end:hparams]


# --8<-- [start:precision]
def set_precision():
    """PyTorch's default float32 precision, stated explicitly (the fp32_precision API of PyTorch 2.9 and
    later, which replaces the allow_tf32 flags): cuDNN's convolutions may use TF32 tensor cores, matrix
    products (the linear layers, through cuBLAS) stay in IEEE FP32."""
    torch.backends.cudnn.conv.fp32_precision = "tf32"
    torch.backends.cuda.matmul.fp32_precision = "ieee"
# --8<-- [end:precision]

FILES = {
    "train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte",
}


class IdxError(Exception):
    pass


# --8<-- [start:loader]
def read_idx(path: Path, magic: int, count: int, dims: tuple) -> np.ndarray:
    """Reads one IDX file (gzipped or raw), checking its magic number, shape and size."""
    candidates = [path.with_name(path.name + ".gz"), path]
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise IdxError(f"{path.name}: not found (looked for {' and '.join(str(p) for p in candidates)}); "
                       f"set --data-dir or MNIST_DIR to the folder holding the MNIST files")
    opener = gzip.open if found.suffix == ".gz" else open
    try:
        with opener(found, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise IdxError(f"{found}: cannot read ({e}); is the download complete?") from e
    ndim = 1 + len(dims)
    if len(data) < 4 + 4 * ndim:
        raise IdxError(f"{found}: {len(data)} bytes, too short for an IDX header")
    got_magic = struct.unpack(">I", data[:4])[0]
    if got_magic != magic:
        raise IdxError(f"{found}: magic number 0x{got_magic:08x}, expected 0x{magic:08x}: not this IDX file")
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    if shape != (count, *dims):
        raise IdxError(f"{found}: shape {shape}, expected {(count, *dims)}")
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != math.prod(shape):
        raise IdxError(f"{found}: {body.size} data bytes, expected {math.prod(shape)}: truncated or padded")
    return body.reshape(shape)


def load_mnist(data_dir: Path) -> dict:
    """The four arrays as uint8; labels checked to lie in 0..9."""
    out = {}
    for key, count in (("train", 60000), ("test", 10000)):
        out[f"{key}_images"] = read_idx(data_dir / FILES[f"{key}_images"], 0x803, count, (28, 28))
        labels = read_idx(data_dir / FILES[f"{key}_labels"], 0x801, count, ())
        if labels.max() > 9:
            raise IdxError(f"{FILES[key + '_labels']}: label {labels.max()} out of range 0..9")
        out[f"{key}_labels"] = labels
    return out
# --8<-- [end:loader]


def data_dir_from(arg: str | None) -> Path:
    return Path(arg or os.environ.get("MNIST_DIR") or "data/mnist")


# --8<-- [start:model]
class Net(nn.Module):
    """conv3x3(1->32) BN ReLU pool2, conv3x3(32->64) BN ReLU pool2, linear 3136->128, ReLU, linear 128->10.

    The convolutions have no bias: batch norm subtracts the per-channel mean right after, which
    cancels any bias exactly. Batch norm keeps no running statistics (track_running_stats=False),
    so training and evaluation both normalise with the statistics of the batch at hand.
    """

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32, track_running_stats=False)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(64, track_running_stats=False)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)  # logits; F.cross_entropy applies log-softmax itself
# --8<-- [end:model]


# --8<-- [start:step]
def gather(images_u8, labels, idx):
    """The batch: images picked by index from the uint8 training set on the GPU, normalised."""
    x = images_u8.index_select(0, idx).unsqueeze(1).float().div_(255.0).sub_(MEAN).div_(STD)
    return x, labels.index_select(0, idx)


def train_step(model, opt, images_u8, labels, idx):
    x, y = gather(images_u8, labels, idx)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss
# --8<-- [end:step]


def evaluate(model, images_u8, labels):
    """Test accuracy (%) and the predictions, EVAL_CHUNK images at a time."""
    preds = []
    with torch.no_grad():
        for i in range(0, images_u8.shape[0], EVAL_CHUNK):
            idx = torch.arange(i, min(i + EVAL_CHUNK, images_u8.shape[0]), device=images_u8.device)
            x, _ = gather(images_u8, labels, idx)
            preds.append(model(x).argmax(1))
    pred = torch.cat(preds)
    return 100.0 * (pred == labels).float().mean().item(), pred


def make_model(seed: int, device) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = Net().to(device)
    return model, torch.optim.SGD(model.parameters(), lr=LR, momentum=0.0)


# --8<-- [start:train]
def train(data, device, epochs, batch, seed=0, log_every=10):
    """The reference training run: shuffled batches (the last partial batch dropped), SGD, test
    accuracy after every epoch. Returns the curves."""
    tr_x = torch.from_numpy(data["train_images"].copy()).to(device)
    tr_y = torch.from_numpy(data["train_labels"].astype(np.int64)).to(device)
    te_x = torch.from_numpy(data["test_images"].copy()).to(device)
    te_y = torch.from_numpy(data["test_labels"].astype(np.int64)).to(device)
    model, opt = make_model(seed, device)
    gen = torch.Generator(device=device).manual_seed(seed)
    steps = tr_x.shape[0] // batch
    losses, accs = [], []
    for epoch in range(epochs):
        perm = torch.randperm(tr_x.shape[0], device=device, generator=gen)
        epoch_losses = torch.zeros(steps, device=device)
        for s in range(steps):
            epoch_losses[s] = train_step(model, opt, tr_x, tr_y, perm[s * batch:(s + 1) * batch]).detach()
        losses += epoch_losses[::log_every].tolist()   # one host sync per epoch, not per step
        acc, pred = evaluate(model, te_x, te_y)
        accs.append(acc)
        print(f"epoch {epoch + 1}: loss {epoch_losses[-50:].mean().item():.4f}  test accuracy {acc:.2f}%", flush=True)
    wrong = (pred != te_y).nonzero().flatten().tolist()
    return {"loss_every": log_every, "loss": losses, "test_accuracy": accs,
            "misclassified": [[i, int(pred[i]), int(te_y[i])] for i in wrong]}
# --8<-- [end:train]


def step_flops(b: int) -> float:
    """Multiply-adds x2 of one training step: forward, input and weight gradients (conv1 has no
    input gradient)."""
    conv1, conv2 = 2 * b * 784 * 32 * 9, 2 * b * 196 * 64 * 288
    fc1, fc2 = 2 * b * 3136 * 128, 2 * b * 128 * 10
    return 2 * conv1 + 3 * conv2 + 3 * fc1 + 3 * fc2


def step_bytes(b: int, n_params: int) -> float:
    """The fewest bytes a step must move: the batch's pixels and labels, and every parameter read
    and written once (activations could in principle stay on chip)."""
    return b * 784 + b * 4 + 2 * 4 * n_params


# --8<-- [start:graph]
class GraphStep:
    """The whole training step (gather, forward, backward, SGD) captured once in a CUDA graph. The
    batch's indices come from a device-side step counter, so every replay takes the next batch."""

    def __init__(self, model, opt, images_u8, labels, perm, batch):
        self.steps = perm.shape[0] // batch
        self.perm = perm                                  # refilled in place each epoch
        self.step_no = torch.zeros(1, dtype=torch.long, device=perm.device)
        rows = perm[: self.steps * batch].view(self.steps, batch)

        def step():
            idx = rows.index_select(0, self.step_no).flatten()
            loss = train_step(model, opt, images_u8, labels, idx)
            self.step_no.add_(1).remainder_(self.steps)
            return loss

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):                     # warm up outside the capture
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = step()

    def __call__(self):
        self.graph.replay()
        return self.loss
# --8<-- [end:graph]


def median_step_ms(step, repeats=200, warmup=20):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def epoch_ms(run_epoch):
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    run_epoch()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def bench(data, batches, repeats):
    device = torch.device("cuda")
    tr_x = torch.from_numpy(data["train_images"].copy()).to(device)
    tr_y = torch.from_numpy(data["train_labels"].astype(np.int64)).to(device)
    n = tr_x.shape[0]
    rows = []
    for b in batches:
        steps = n // b
        for mode in ("eager", "torch.compile", "CUDA graph"):
            model, opt = make_model(0, device)
            perm = torch.randperm(n, device=device, generator=torch.Generator(device=device).manual_seed(1))
            if mode == "CUDA graph":
                g = GraphStep(model, opt, tr_x, tr_y, perm, b)
                step = g

                def run_epoch(g=g):
                    g.perm.copy_(torch.randperm(n, device=device))
                    g.step_no.zero_()
                    for _ in range(g.steps):
                        g()
            else:
                net = torch.compile(model, dynamic=False) if mode == "torch.compile" else model
                counter = [0]

                def step(net=net, opt=opt, perm=perm, counter=counter, b=b, steps=steps):
                    s = counter[0] % steps
                    counter[0] += 1
                    return train_step(net, opt, tr_x, tr_y, perm[s * b:(s + 1) * b])

                def run_epoch(net=net, opt=opt, b=b, steps=steps):
                    p = torch.randperm(n, device=device)
                    for s in range(steps):
                        train_step(net, opt, tr_x, tr_y, p[s * b:(s + 1) * b])
            t_step = median_step_ms(step, repeats=repeats)
            run_epoch()  # warm-up epoch (the compiled code and graph exist already)
            t_epoch = epoch_ms(run_epoch)
            rows.append((b, mode, t_step, t_epoch, steps, sum(p.numel() for p in model.parameters())))
            print(f"batch {b:5d} {mode:14s} step {t_step:.4f} ms  epoch {t_epoch / 1e3:.3f} s", flush=True)
    # The peer of each case is PyTorch's fastest mode in this run.
    for kind, col in (("step", 2), ("epoch", 3)):
        for b in batches:
            best = min((r for r in rows if r[0] == b), key=lambda r: r[col])
            for r in (r for r in rows if r[0] == b):
                steps_in = 1 if kind == "step" else r[4]
                # Plot fields, each on one kind of row only (as in mnist_cnn.cu).
                plot = {"step_ms": round(r[col], 6)} if kind == "step" else {"epoch_s": round(r[col] / 1e3, 6)}
                course_tools.bench(f"{kind}, batch {b}", f"PyTorch {r[1]}", r[col], steps_in * step_bytes(b, r[5]),
                                   steps_in * step_flops(b), peer=r is best, batch=b, kind=kind, steps=steps_in,
                                   **plot)


def same_first_step(data, device):
    """Eager, compiled and graph-captured steps from the same weights on the same batch give the same
    loss and the same updated weights: the benchmark times three versions of one computation."""
    tr_x = torch.from_numpy(data["train_images"][:4096].copy()).to(device)
    tr_y = torch.from_numpy(data["train_labels"][:4096].astype(np.int64)).to(device)
    perm = torch.arange(4096, device=device)
    results = {}
    for mode in ("eager", "torch.compile"):
        model, opt = make_model(0, device)
        net = torch.compile(model, dynamic=False) if mode == "torch.compile" else model
        loss = train_step(net, opt, tr_x, tr_y, perm[:256])
        results[mode] = (loss.item(), torch.cat([p.detach().flatten() for p in model.parameters()]))
    le, pe = results["eager"]
    lc, pc = results["torch.compile"]
    err = (pc - pe).abs().max().item()
    ok = abs(lc - le) <= 1e-4 * abs(le) + 1e-5 and err <= 1e-4
    course_tools.check_true("torch_compile_step_matches_eager", ok, pe.numel(), f"loss_eager={le:.6f} loss_compile={lc:.6f} max_abs_err={err:.2e}")
    # CUDA graph: 3 warm-up steps before the capture, then one replay: four steps, as eager's four.
    model, opt = make_model(0, device)
    g = GraphStep(model, opt, tr_x, tr_y, perm.clone(), 256)   # 3 warm-up steps (batches 0, 1, 2)
    g()                                                        # the 4th step, batch 3 (from the graph)
    model_e, opt_e = make_model(0, device)
    for s in range(4):
        train_step(model_e, opt_e, tr_x, tr_y, perm[s * 256:(s + 1) * 256])
    pg = torch.cat([p.detach().flatten() for p in model.parameters()])
    pe4 = torch.cat([p.detach().flatten() for p in model_e.parameters()])
    err = (pg - pe4).abs().max().item()
    course_tools.check_true("cuda_graph_steps_match_eager", err <= 1e-4, pg.numel(), f"max_abs_err={err:.2e}")


def main():
    ap = course_tools.parser("The PyTorch reference of the MNIST CNN: training run and benchmark.")
    ap.add_argument("--data-dir")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--curves", help="write the training curves and misclassified digits to this JSON file")
    ap.add_argument("--cpu", action="store_true", help="train on the CPU (slow; for machines without a GPU)")
    args = ap.parse_args()
    if not (1 <= args.epochs <= 1000 and 1 <= args.batch <= 60000 and 1 <= args.repeats <= 100000):
        ap.error("--epochs must be in [1, 1000], --batch in [1, 60000] and --repeats in [1, 100000]")
    if args.cpu and args.bench:
        ap.error("--bench times the GPU; it cannot be combined with --cpu")
    if not args.cpu:
        course_tools.require_cuda("torch")
    try:
        data = load_mnist(data_dir_from(args.data_dir))
    except IdxError as e:
        sys.exit(f"error: {e}")  # a missing or damaged file: the message, and exit code 1
    set_precision()
    device = torch.device("cpu" if args.cpu else "cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}")
    if args.train or not args.bench:
        t0 = time.perf_counter()
        curves = train(data, device, args.epochs, args.batch)
        accs = curves["test_accuracy"]
        print(f"trained {args.epochs} epochs at batch {args.batch} in {time.perf_counter() - t0:.1f} s")
        # "Reaches 99%": the first epoch at or above it (the accuracy goes up and down between epochs).
        reached = next((e + 1 for e, a in enumerate(accs) if a >= 99.0), 0)
        course_tools.check_true("reference_test_accuracy_reaches_99", reached > 0, 10000,
                                f"reached_at_epoch={reached} best={max(accs):.2f}% last={accs[-1]:.2f}% "
                                f"epochs={args.epochs} batch={args.batch} lr={LR}")
        if args.curves:
            curves.update({"impl": "PyTorch eager", "batch": args.batch, "lr": LR, "epochs": args.epochs,
                           "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "CPU"})
            Path(args.curves).write_text(json.dumps(curves))
    if args.bench:
        same_first_step(data, device)
        bench(data, [64, 256, 1024], args.repeats)


if __name__ == "__main__":
    main()
