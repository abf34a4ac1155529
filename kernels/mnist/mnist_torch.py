# mnist_torch.py: the PyTorch reference of the course's MNIST CNN, its training loop, and the PyTorch
# side of the benchmark: the configurations a performance engineer would try (eager, torch.compile of
# the model or of the whole step, CUDA graphs, channels_last, cudnn.benchmark, FP32, TF32 and bf16),
# each checked against one eager FP32 step and then timed, per step and per epoch.
#
# Taught in docs/mnist/reference.md (the model and the loop) and docs/mnist/results.md (the benchmark).
# Run:   python kernels/mnist/mnist_torch.py --train --epochs 8        (trains, checks test accuracy)
#        python kernels/mnist/mnist_torch.py --bench --batch 64        (checks and times every configuration)
#        python kernels/mnist/mnist_torch.py --configs list            (the configurations, by name)
#        python kernels/mnist/mnist_torch.py --bench --batch 64 --configs eager,graph   (some of them)
#        python kernels/mnist/mnist_torch.py --compare-curve     (50 steps from mnist_cnn's initial weights:
#                                                                 its loss curves against PyTorch's)
# The data directory is --data-dir, else $MNIST_DIR, else data/mnist (the four standard IDX files,
# gzipped or not; see docs/mnist/data.md for where to get them).
#
# course: gpu
# course: run --train --epochs 8
# course: run --compare-curve
# course: bench --bench --batch 64
# course: bench --bench --batch 256
# course: bench --bench --batch 1024
import contextlib
import gc
import gzip
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch._dynamo  # noqa: F401  (the benchmark reads its exceptions and counters)
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


def make_model(seed: int, device, channels_last: bool = False) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = Net().to(device)
    if channels_last:   # the convolutions' weights in NHWC order (the same values)
        model = model.to(memory_format=torch.channels_last)
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


# --8<-- [start:timing]
def median_step_ms(step, repeats=200, warmup=20):
    """Median time of one step over `repeats` steps, each timed alone with CUDA events from an idle GPU
    (as mnist_cnn.cu does), after warm-up: each step is charged with its own launch costs, which is what
    separates eager PyTorch from a CUDA graph. The L2 cache is not flushed: weights staying in L2 from one
    step to the next is part of what a real training loop gets."""
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
    """One full epoch (reshuffle included) from its first step to its last; the CPU may run ahead."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    run_epoch()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)
# --8<-- [end:timing]


# --8<-- [start:configs]
@dataclass(frozen=True)
class Precision:
    """A precision a configuration runs in, and how close its one checked step must come to one eager
    step in FP32 with TF32 off: update_tol bounds, for each parameter tensor, the largest difference of
    the weight update divided by the largest element of the FP32 update; loss_tol the loss's relative
    difference. Each is several times the largest error that one step in that precision showed against a
    float64 step on the CPU (inputs rounded to TF32 or bf16) at batch 64, 256 and 1024; batch norm's
    mean subtraction makes the convolutions' weight gradients small differences of large sums, which
    loses more digits than the inputs' rounding alone. A wrong step misses by the size of the update."""
    name: str            # as the impl strings name it
    conv: str            # cuDNN's convolutions: "tf32" or "ieee" (FP32), as fp32_precision names them
    matmul: str          # matrix products (the linear layers): "tf32" or "ieee"
    bf16_autocast: bool  # forward and loss under torch.autocast(bfloat16); weights and SGD stay FP32
    update_tol: float
    loss_tol: float


PRECISIONS = {p.name: p for p in (
    Precision("fp32/tf32-conv", "tf32", "ieee", False, 0.2, 1e-3),   # PyTorch's default, set_precision()'s
    Precision("fp32", "ieee", "ieee", False, 0.02, 1e-4),            # TF32 off, as CUDA versions 1 to 3
    Precision("tf32", "tf32", "tf32", False, 0.2, 1e-3),             # TF32 for the linear layers too
    Precision("bf16-autocast", "tf32", "ieee", True, 0.5, 2e-2),     # mixed precision
)}
DEFAULT_PRECISION = "fp32/tf32-conv"


@dataclass(frozen=True)
class Config:
    """One way to run the training step: `key` selects it (--configs), `impl` names it in the BENCH rows."""
    key: str
    runner: str          # eager | compile-model | graph | compile-step | graph+compile-model
    mode: str = ""       # torch.compile's mode, where something is compiled
    precision: str = DEFAULT_PRECISION
    channels_last: bool = False    # model weights and input batch in NHWC memory format
    cudnn_benchmark: bool = False  # torch.backends.cudnn.benchmark, set before compiling and capturing

    @property
    def impl(self) -> str:
        what = {"eager": "eager",
                "compile-model": f"compile(model, {self.mode})",
                "graph": "CUDA graph(eager step)",
                "compile-step": f"compile(step, {self.mode})",
                "graph+compile-model": f"CUDA graph(step, compile(model, {self.mode}))"}[self.runner]
        knobs = [name for name, on in (("channels_last", self.channels_last),
                                       ("cudnn.benchmark", self.cudnn_benchmark)) if on]
        return " ".join(["PyTorch", what, *knobs, self.precision])


# Timed in this order. The last five vary one setting each of the graph-captured compiled step, whose
# convolutions and linear layers run in cuDNN and cuBLAS, the libraries those settings steer.
CONFIGS = (
    Config("eager", "eager"),
    Config("compile-model", "compile-model", "default"),
    Config("graph", "graph"),
    Config("compile-step", "compile-step", "default"),
    Config("compile-step-autotune", "compile-step", "max-autotune-no-cudagraphs"),
    Config("compile-step-autotune-graphs", "compile-step", "max-autotune"),
    Config("graph-compiled", "graph+compile-model", "default"),
    Config("graph-compiled-channels-last", "graph+compile-model", "default", channels_last=True),
    Config("graph-compiled-cudnn-benchmark", "graph+compile-model", "default", cudnn_benchmark=True),
    Config("graph-compiled-fp32", "graph+compile-model", "default", precision="fp32"),
    Config("graph-compiled-tf32", "graph+compile-model", "default", precision="tf32"),
    Config("graph-compiled-bf16", "graph+compile-model", "default", precision="bf16-autocast"),
)
# --8<-- [end:configs]


def set_tf32(conv: bool, matmul: bool):
    """TF32 on or off for cuDNN's convolutions and for matrix products. Through the older setters on
    purpose: they set the fp32_precision values as well, whereas changing only those leaves the older
    flags disagreeing with them, and then reading an older flag raises an error, which PyTorch's own
    Inductor does while autotuning (PyTorch 2.13, for one)."""
    torch.set_float32_matmul_precision("high" if matmul else "highest")
    torch.backends.cudnn.allow_tf32 = conv


@contextlib.contextmanager
def settings(precision: Precision, cudnn_benchmark: bool):
    """PyTorch's global settings for one configuration, restored afterwards. They are in force while it
    compiles and captures (what a graph or a compiled kernel bakes in) and while it runs."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark)
    set_tf32(conv=precision.conv == "tf32", matmul=precision.matmul == "tf32")
    torch.backends.cudnn.benchmark = cudnn_benchmark
    try:
        yield
    finally:
        set_tf32(conv=saved[0], matmul=saved[1])
        torch.backends.cudnn.benchmark = saved[2]


class AsConfigured(nn.Module):
    """The model as a configuration runs it: the batch converted to channels_last (make_model converted
    the weights), the forward pass under bf16 autocast. The loss then gets FP32 logits, as it would under
    autocast: cross_entropy is on autocast's list of operations that run in float32."""

    def __init__(self, net: nn.Module, channels_last: bool, bf16_autocast: bool):
        super().__init__()
        self.net, self.channels_last, self.bf16_autocast = net, channels_last, bf16_autocast

    def forward(self, x):
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if not self.bf16_autocast:
            return self.net(x)
        # No cast cache: every step, and so every replay of a captured step, casts the current weights.
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            return self.net(x).float()


@dataclass
class Built:
    """A configuration ready to run: `step` takes the next batch of a fixed permutation, `run_epoch`
    reshuffles and runs one epoch, `check_step` runs one step on images 0..B-1."""
    model: nn.Module
    initial: list
    step: object
    run_epoch: object
    check_step: object
    notes: dict = field(default_factory=dict)


def first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:limit] if text else ""


def compile_whole_step(step_fn, mode: str, first_batch):
    """torch.compile of the whole step (forward, loss, backward, SGD step, zero_grad): in one graph
    (fullgraph=True) where Dynamo can trace it so, else with graph breaks, keeping the reason. Dynamo
    only traces here (no kernel runs, no weight changes) before it reports a graph break."""
    counters = torch._dynamo.utils.counters
    graphs_before = counters["stats"]["unique_graphs"]
    notes = {"fullgraph": True}
    try:
        compiled = torch.compile(step_fn, mode=mode, fullgraph=True, dynamic=False)
        compiled(first_batch)
    except torch._dynamo.exc.Unsupported as e:
        # The first line names the graph break; an "Explanation:" line, where there is one, says where.
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        why = lines[:1] + [ln for ln in lines[1:] if ln.startswith("Explanation:")][:1]
        notes = {"fullgraph": False, "fullgraph_why": " ".join(why)[:240]}
        torch._dynamo.reset()
        graphs_before = counters["stats"]["unique_graphs"]
        compiled = torch.compile(step_fn, mode=mode, dynamic=False)
        compiled(first_batch)
    notes["graphs"] = counters["stats"]["unique_graphs"] - graphs_before
    return compiled, notes


def build(cfg: Config, batch: int, images_u8, labels) -> Built:
    """Compiles, warms up and captures one configuration; the first step runs here."""
    device, n = images_u8.device, images_u8.shape[0]
    precision = PRECISIONS[cfg.precision]
    model, opt = make_model(0, device, channels_last=cfg.channels_last)
    initial = [p.detach().clone() for p in model.parameters()]
    net = model
    if cfg.channels_last or precision.bf16_autocast:
        net = AsConfigured(model, cfg.channels_last, precision.bf16_autocast)
    if cfg.runner in ("compile-model", "graph+compile-model"):
        net = torch.compile(net, mode=cfg.mode, dynamic=False)
    everything = torch.arange(n, device=device)
    perm = torch.randperm(n, device=device, generator=torch.Generator(device=device).manual_seed(1))

    if cfg.runner in ("graph", "graph+compile-model"):
        g = GraphStep(net, opt, images_u8, labels, perm.clone(), batch)

        def check_step():
            g.perm.copy_(everything)       # batch 0 is then images 0..B-1
            g.step_no.zero_()
            loss = g()
            g.perm.copy_(perm)             # timing goes on with shuffled batches, as in the other runners
            return loss

        def run_epoch():
            g.perm.copy_(torch.randperm(n, device=device))
            g.step_no.zero_()
            for _ in range(g.steps):
                g()
        return Built(model, initial, g, run_epoch, check_step)

    def step_fn(idx):
        return train_step(net, opt, images_u8, labels, idx)

    notes = {}
    first = everything[:batch]
    if cfg.runner == "compile-step":
        # The training set never moves: without this, Inductor's CUDA graphs (mode max-autotune) would
        # copy it into a static buffer of their own before every replay, as they do with inputs.
        torch._dynamo.mark_static_address(images_u8)
        torch._dynamo.mark_static_address(labels)
        step_fn, notes = compile_whole_step(step_fn, cfg.mode, first)
    steps = n // batch
    counter = [0]

    def step():
        s = counter[0] % steps
        counter[0] += 1
        return step_fn(perm[s * batch:(s + 1) * batch])

    def run_epoch():
        p = torch.randperm(n, device=device)
        for s in range(steps):
            step_fn(p[s * batch:(s + 1) * batch])
    step()  # the first call compiles what is compiled lazily (the model's backward)
    return Built(model, initial, step, run_epoch, lambda: step_fn(first), notes)


@dataclass
class Reference:
    loss: float
    updates: list   # per parameter: weights after the step minus before, float64


def fp32_reference(batch: int, images_u8, labels) -> Reference:
    """One eager step in FP32 with TF32 off, from make_model(0)'s weights, on images 0..B-1."""
    with settings(PRECISIONS["fp32"], cudnn_benchmark=False):
        model, opt = make_model(0, images_u8.device)
        before = [p.detach().clone() for p in model.parameters()]
        loss = train_step(model, opt, images_u8, labels, torch.arange(batch, device=images_u8.device)).item()
        return Reference(loss, [(p.detach() - w).double() for p, w in zip(model.parameters(), before)])


def check_one_step(built: Built, ref: Reference, cfg: Config, batch: int) -> tuple[bool, str]:
    """From the same initial weights, on the same batch, the configuration's step gives eager FP32's loss
    and weight update within its precision's tolerance. The weights are reset first: the configuration's
    warm-up steps have moved them."""
    with torch.no_grad():
        for p, w in zip(built.model.parameters(), built.initial):
            p.copy_(w)
    loss = built.check_step().item()
    errs = [((p.detach() - w).double() - r).abs().max().item() / max(r.abs().max().item(), 1e-30)
            for p, w, r in zip(built.model.parameters(), built.initial, ref.updates)]
    loss_err = abs(loss - ref.loss) / abs(ref.loss)
    tol = PRECISIONS[cfg.precision]
    ok = all(e <= tol.update_tol for e in errs) and loss_err <= tol.loss_tol   # NaN fails both
    worst = max(errs) if all(math.isfinite(e) for e in errs) else math.nan
    errors = (f"loss_rel_err={loss_err:.1e} (tol {tol.loss_tol:g}) "
              f"update_rel_err={worst:.1e} (tol {tol.update_tol:g}, {cfg.precision})")
    course_tools.check_true(f"batch{batch}_{cfg.key}_step_matches_fp32_eager", ok,
                            sum(r.numel() for r in ref.updates) + 1,
                            f"loss={loss:.6f} fp32_eager_loss={ref.loss:.6f} {errors}")
    return ok, errors


def run_config(cfg: Config, batch: int, images_u8, labels, ref: Reference, repeats: int):
    """Builds, checks and times one configuration. Returns ("timed", row), ("failed", the check's
    errors) when its check fails (it is not timed), or ("skipped", why) when it cannot run here."""
    counters = torch._dynamo.utils.counters
    skips_before = counters["inductor"]["cudagraph_skips"]
    stage, built = "build", None
    try:
        with settings(PRECISIONS[cfg.precision], cfg.cudnn_benchmark):
            t0 = time.perf_counter()
            built = build(cfg, batch, images_u8, labels)
            torch.cuda.synchronize()
            build_s = time.perf_counter() - t0
            stage = "check"
            ok, check_errors = check_one_step(built, ref, cfg, batch)
            if not ok:
                return "failed", check_errors
            stage = "timing"
            t_step = median_step_ms(built.step, repeats)
            built.run_epoch()  # warm-up epoch (the compiled code and the graph exist already)
            t_epoch = epoch_ms(built.run_epoch)
        notes = dict(built.notes)
        if cfg.mode == "max-autotune":   # Inductor's own CUDA graphs: did it skip any?
            notes["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"] - skips_before
        n_params = sum(p.numel() for p in built.model.parameters())
        return "timed", (cfg, t_step, t_epoch, n_params, build_s, notes, check_errors)
    except Exception as e:  # noqa: BLE001  a configuration that cannot run is reported; the others go on
        return "skipped", f"{stage}: {type(e).__name__}: {first_line(e)}"
    finally:
        built = None
        try:
            torch._dynamo.reset()   # the next configuration compiles from scratch (no recompile limit)
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            print(f"cleanup after {cfg.impl} failed: {type(e).__name__}: {first_line(e)}", flush=True)


def bench(data, device, batches, repeats, configs, budget_s) -> int:
    """Checks and times each configuration at each batch size; returns how many failed their check."""
    tr_x = torch.from_numpy(data["train_images"].copy()).to(device)
    tr_y = torch.from_numpy(data["train_labels"].astype(np.int64)).to(device)
    n = tr_x.shape[0]
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        torch._dynamo.config.fail_on_recompile_limit_hit = True  # an error, not a silent fall back to eager
    failed = 0
    for b in batches:
        start = time.perf_counter()
        ref = fp32_reference(b, tr_x, tr_y)
        rows, summary, skipped, failed_here = [], [], [], 0
        for i, cfg in enumerate(configs):
            spent = time.perf_counter() - start
            if spent > budget_s:
                why = f"not started: batch {b}'s configurations had taken {spent:.0f} s (--budget-s {budget_s:g})"
                outcome, value = "skipped", why
            else:
                outcome, value = run_config(cfg, b, tr_x, tr_y, ref, repeats)
            if outcome == "timed":
                rows.append(value)
                _, t_step, t_epoch, _, build_s, notes, check_errors = value
                said = "".join(f", {k}={v}" for k, v in notes.items())
                line = (f"step {t_step:.4f} ms, epoch {t_epoch / 1e3:.3f} s; check {check_errors}; "
                        f"built in {build_s:.0f} s{said}")
            elif outcome == "failed":
                failed_here += 1
                line = f"FAILED its check, not timed: {value}"
            else:
                skipped.append((cfg, value))
                line = f"skipped: {value}"
            summary.append(f"batch {b} {cfg.key}: {line}")
            print(f"[{i + 1}/{len(configs)}] {summary[-1]}", flush=True)
        # The peer of each case is the fastest configuration in this run.
        for kind, col in (("step", 1), ("epoch", 2)):
            best = min(rows, key=lambda r: r[col]) if rows else None
            for r in rows:
                cfg, n_params, notes = r[0], r[3], r[5]
                steps_in = 1 if kind == "step" else n // b
                # Plot fields, each on one kind of row only (as in mnist_cnn.cu).
                plot = {"step_ms": round(r[col], 6)} if kind == "step" else {"epoch_s": round(r[col] / 1e3, 6)}
                course_tools.bench(f"{kind}, batch {b}", cfg.impl, r[col], steps_in * step_bytes(b, n_params),
                                   steps_in * step_flops(b), peer=r is best, batch=b, kind=kind, steps=steps_in,
                                   config=cfg.key, precision=cfg.precision, **plot,
                                   **{k: v for k, v in notes.items() if k != "fullgraph_why"})
        # Last, so that the end of the output (what the GPU record keeps) has them: one line per
        # configuration, then the configurations that did not run, as rows that say why.
        print(f"batch {b}: {len(configs)} configurations, {len(rows)} timed, {len(skipped)} skipped, "
              f"{failed_here} failed their check, in {time.perf_counter() - start:.0f} s:", flush=True)
        print("\n".join(summary), flush=True)
        for cfg, why in skipped:
            for kind in ("step", "epoch"):
                print("SKIPPED-CONFIG " + json.dumps({"case": f"{kind}, batch {b}", "impl": cfg.impl, "why": why}),
                      flush=True)
        failed += failed_here
    return failed


def select_configs(ap, text: str):
    """--configs: comma-separated keys of CONFIGS, each known and named once; timed in CONFIGS's order."""
    names = text.split(",")
    known = [c.key for c in CONFIGS]
    if any(not name.strip() for name in names):
        ap.error(f"--configs {text!r}: an empty name; give comma-separated names (see --configs list)")
    unknown = [name for name in names if name not in known]
    if unknown:
        ap.error(f"--configs: unknown configuration(s) {', '.join(unknown)}; known: {', '.join(known)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        ap.error(f"--configs: {', '.join(repeated)} named more than once")
    return tuple(c for c in CONFIGS if c.key in names)


# --8<-- [start:compare_curve]
CURVE_STEPS, CURVE_BATCH = 50, 64
# Step-by-step tolerance on the loss, |cuda - torch| <= atol + rtol * |torch|. The reference is PyTorch
# in float64. Version 3 computes in fp32 (relative rounding 2^-24 per operation): after 50 steps its
# losses stay within about 1e-5 of float64 unless a rounding moves a max-pool winner, so 2e-3 leaves
# room for a few such moves and still catches any real error (one wrong gradient moves the curve by
# the size of a step's progress, about 0.05 early on). Version 4 rounds every product's inputs to
# bf16 (2^-8, 65536 times coarser): the logits move by about 1e-3 at the first step, and the weights
# drift apart a little more at every step, so 5e-2.
CURVE_TOLERANCE = {"fused": (2e-3, 2e-3), "tc": (5e-2, 5e-2)}


def read_weights(path: Path) -> list[np.ndarray]:
    """The weights file that mnist_cnn writes (see its --save): magic, version, shapes, float32 data."""
    data = path.read_bytes()
    if data[:8] != b"MNISTCNN":
        raise ValueError(f"{path}: not a weights file of mnist_cnn")
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
    """Runs mnist_cnn --loss-curve (its initial weights, and 50 steps' losses of versions 3 and 4 on
    the training images in file order), trains PyTorch in float64 from the same weights on the same
    batches, and compares the curves step by step, as llm.c's test_gpt2 compares its losses with
    PyTorch's. The CUDA program is built here (with check_layers.py's build command) and run as a
    subprocess: the harness runs each program on its own, so this one cannot count on another run
    having left files behind."""
    from check_layers import ROOT, build  # noqa: E402  (it imports this module: import it only here)
    # its own binary: check_layers.py's run builds mnist_cnn_check, and the two runs must not race
    binary = Path(binary_arg) if binary_arg else ROOT / "build" / "mnist" / "mnist_cnn_curve"
    if not binary_arg:
        build(binary)
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
    for s in range(CURVE_STEPS):   # batch s: images s*64 .. s*64+63, in file order, as mnist_cnn takes them
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
            print(f"NOTE {label}: no curve (mnist_cnn skips it on this GPU)")
            continue
        got = [float(v) for v in path.read_text().split()]
        rtol, atol = CURVE_TOLERANCE[name]
        print(f"step  PyTorch float64  CUDA {label}  difference")
        for s, (w, g) in enumerate(zip(ref, got)):
            print(f"{s:4d}  {w:15.6f}  {g:15.6f}  {g - w:+.2e}")
        ok &= course_tools.check_close(f"loss_curve_{name}_vs_torch_fp64_{CURVE_STEPS}_steps", np.array(got),
                                       np.array(ref), rtol, atol)
        ok &= course_tools.check_true(f"loss_curve_{name}_has_{CURVE_STEPS}_steps", len(got) == CURVE_STEPS, 1)
    return ok
# --8<-- [end:compare_curve]


def main():
    ap = course_tools.parser("The PyTorch reference of the MNIST CNN: training run and benchmark.")
    ap.add_argument("--data-dir")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--batch", type=int,
                    help=f"batch size (training: default {BATCH}; --bench: one size, default 64, 256 and 1024)")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--configs", help="with --bench: the configurations to time, comma-separated "
                                      "(default: all); 'list' prints them and exits")
    ap.add_argument("--budget-s", type=float, help="with --bench: once a batch size's configurations have "
                                                   "taken this many seconds, the rest are reported as "
                                                   "skipped instead of started (default 200)")
    ap.add_argument("--curves", help="write the training curves and misclassified digits to this JSON file")
    ap.add_argument("--cpu", action="store_true", help="train on the CPU (slow; for machines without a GPU)")
    ap.add_argument("--compare-curve", action="store_true",
                    help="compare mnist_cnn's loss curves (versions 3 and 4, 50 steps) with PyTorch's")
    ap.add_argument("--binary", help="with --compare-curve: a built mnist_cnn (default: build one)")
    args = ap.parse_args()
    if args.compare_curve and (args.train or args.bench or args.cpu):
        ap.error("--compare-curve runs on its own (not with --train, --bench or --cpu)")
    if args.binary and not args.compare_curve:
        ap.error("--binary is for --compare-curve")
    if not (1 <= args.epochs <= 1000 and (args.batch is None or 1 <= args.batch <= 60000)
            and 1 <= args.repeats <= 100000):
        ap.error("--epochs must be in [1, 1000], --batch in [1, 60000] and --repeats in [1, 100000]")
    if args.cpu and args.bench:
        ap.error("--bench times the GPU; it cannot be combined with --cpu")
    if args.configs == "list":
        if args.bench or args.train:
            ap.error("--configs list prints the configurations and exits; give it alone")
        for c in CONFIGS:
            print(f"{c.key:32s} {c.impl}")
        return
    if args.configs is not None and not args.bench:
        ap.error("--configs selects benchmark configurations; use it with --bench")
    if args.budget_s is not None and not args.bench:
        ap.error("--budget-s limits the benchmark; use it with --bench")
    budget_s = 200.0 if args.budget_s is None else args.budget_s
    if not (1 <= budget_s <= 86400):   # also rejects nan and inf
        ap.error(f"--budget-s must be in [1, 86400] seconds, not {args.budget_s}")
    configs = CONFIGS if args.configs is None else select_configs(ap, args.configs)
    if not args.cpu:
        course_tools.require_cuda("torch")
    try:
        data = load_mnist(data_dir_from(args.data_dir))
    except IdxError as e:
        sys.exit(f"error: {e}")  # a missing or damaged file: the message, and exit code 1
    if args.compare_curve:
        sys.exit(0 if compare_curve(data, data_dir_from(args.data_dir), args.binary) else 1)
    set_precision()
    device = torch.device("cpu" if args.cpu else "cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}")
    if args.train or not args.bench:
        batch = args.batch or BATCH
        t0 = time.perf_counter()
        curves = train(data, device, args.epochs, batch)
        accs = curves["test_accuracy"]
        print(f"trained {args.epochs} epochs at batch {batch} in {time.perf_counter() - t0:.1f} s")
        # "Reaches 99%": the first epoch at or above it (the accuracy goes up and down between epochs).
        reached = next((e + 1 for e, a in enumerate(accs) if a >= 99.0), 0)
        course_tools.check_true("reference_test_accuracy_reaches_99", reached > 0, 10000,
                                f"reached_at_epoch={reached} best={max(accs):.2f}% last={accs[-1]:.2f}% "
                                f"epochs={args.epochs} batch={batch} lr={LR}")
        if args.curves:
            curves.update({"impl": "PyTorch eager", "batch": batch, "lr": LR, "epochs": args.epochs,
                           "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "CPU"})
            Path(args.curves).write_text(json.dumps(curves))
    if args.bench:
        failed = bench(data, device, [args.batch] if args.batch else [64, 256, 1024], args.repeats, configs, budget_s)
        if failed:
            sys.exit(f"error: {failed} configuration(s) failed their check against eager FP32 (see CHECK FAIL)")


if __name__ == "__main__":
    main()
