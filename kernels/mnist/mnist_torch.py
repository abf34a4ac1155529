# mnist_torch.py: the PyTorch reference of the course's MNIST CNN, its training loop, and the PyTorch
# side of the benchmark: a grid over the knobs a performance engineer combines (precision FP32, TF32 or
# bf16 autocast; contiguous or channels_last; cudnn.benchmark off or on; torch.compile of nothing, the
# model or the whole step, in mode default or max-autotune-no-cudagraphs; the whole step captured in a
# CUDA graph or not), each configuration checked against one eager FP32 step and then timed, per step
# and per epoch, likely fastest first, within a time budget.
#
# Taught in docs/mnist/reference.md (the model and the loop) and docs/mnist/results.md (the benchmark).
# Run:   python kernels/mnist/mnist_torch.py --train --epochs 8        (trains, checks test accuracy)
#        python kernels/mnist/mnist_torch.py --bench --batch 64        (checks and times the grid)
#        python kernels/mnist/mnist_torch.py --configs list            (the configurations, in running order)
#        python kernels/mnist/mnist_torch.py --bench --batch 64 --configs 'bf16-nhwc-*-graph'   (some of them)
#        python kernels/mnist/mnist_torch.py --time-to-99 --seeds 5 --epochs 3   (the seed runs' recipe in the
#                                              fastest configuration: each seed to >= 99%, the time to 99%)
# The data directory is --data-dir, else $MNIST_DIR, else data/mnist (the four standard IDX files,
# gzipped or not; see docs/mnist/data.md for where to get them).
#
# course: gpu
# course: run --train --epochs 8
# course: bench --bench --batch 64 --budget-s 90
# course: bench --bench --batch 256 --budget-s 90
# course: bench --bench --batch 1024 --budget-s 90
# course: bench --time-to-99 --seeds 5 --epochs 3
# course: measured compile_s cudagraph_skips graphs epoch_s step_ms test_accuracy
import time

T_START = time.perf_counter()   # a benchmark's budget counts from here: start-up and loading included

import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch._dynamo  # noqa: F401, E402  (the benchmark reads its exceptions and counters)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
# The data loading and the benchmark's grid of configurations live in sibling modules (kernels/mnist/).
from mnist_data import FILES, IdxError, data_dir_from, load_mnist, read_idx  # noqa: E402, F401
from mnist_grid import (COMPILE_RESERVE_S, COMPILES, GRID, PRECISIONS, PRUNED_BEFORE_RUNNING,  # noqa: E402, F401
                        Config, Precision, describe, first_line, order_key, progress_line, report, retime_selection,
                        second_share, select_configs, step_bytes, step_flops)

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


# --8<-- [start:time_to_99]
# The recipe of the seed runs (mnist_train.cu --seeds, the same on both sides): plain SGD, the learning
# rate warmed up linearly over WARMUP_STEPS steps to PEAK_LR, then decayed to 0 along half a cosine at
# the run's last step. Timed here with the grid's fastest configuration at batch 64 in the record.
PEAK_LR = 0.1
WARMUP_STEPS = 100
TIME_TO_99_CONFIG = "bf16-nhwc-bench-model-default-graph"


def lr_at(t, total: int, peak: float = PEAK_LR, warmup: int = WARMUP_STEPS):
    """The learning rate of step t (from 0) of a run of `total` steps, as tc::LrSchedule::at computes it.
    t is an int, or a tensor on the GPU (inside a captured step, which reads the step from the device)."""
    if isinstance(t, torch.Tensor):
        tf = t.float()
        progress = ((tf - warmup) / max(1, total - warmup)).clamp(0.0, 1.0)
        return torch.where(tf < warmup, peak * (tf + 1) / warmup, 0.5 * peak * (1 + torch.cos(math.pi * progress)))
    if t < warmup:
        return peak * (t + 1) / warmup
    return 0.5 * peak * (1 + math.cos(math.pi * min(1.0, (t - warmup) / max(1, total - warmup))))


def time_to_99(data, device, key: str, seeds: int, epochs: int, batch: int) -> bool:
    """Trains configuration `key` from seeds 1..seeds with the schedule, evaluating after every epoch;
    each run must end at 99.0% or more. BENCH rows: each run's training time and final accuracy, and the
    time to 99% (training time, evaluation and the one-time compile and capture not included, up to the
    end of the first epoch at 99.0% or more; the median over the seeds that got there)."""
    cfg = next(c for c in GRID if c.key == key)
    precision = PRECISIONS[cfg.precision]
    tr_x = torch.from_numpy(data["train_images"].copy()).to(device)
    tr_y = torch.from_numpy(data["train_labels"].astype(np.int64)).to(device)
    te_x = torch.from_numpy(data["test_images"].copy()).to(device)
    te_y = torch.from_numpy(data["test_labels"].astype(np.int64)).to(device)
    n = tr_x.shape[0]
    steps = n // batch
    total = epochs * steps
    ok, to_99 = True, []
    with settings(precision, cfg.cudnn_benchmark):
        model, opt = make_model(0, device, channels_last=cfg.channels_last)
        for group in opt.param_groups:
            group["lr"] = PEAK_LR
        configured = AsConfigured(model, cfg.channels_last, precision.bf16_autocast)
        net = torch.compile(configured, mode=cfg.mode, dynamic=False) if cfg.compile == "model" else configured
        run_step = torch.zeros((), dtype=torch.long, device=device)  # the run's step, read by the schedule

        def step_fn(idx):
            x, y = gather(tr_x, tr_y, idx)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            # Plain SGD moves each weight by lr x its gradient, so the loss scaled by lr_at(t) / PEAK_LR
            # with the optimizer at PEAK_LR is the schedule's step, computed on the GPU from run_step:
            # a captured step replays it with each step's own learning rate.
            (loss * (lr_at(run_step, total) / PEAK_LR)).backward()
            opt.step()
            run_step.add_(1)
            return loss

        perm = torch.arange(n, device=device)
        graph = GraphStep(step_fn, opt, perm, batch) if cfg.graph else None   # compiles and captures
        for _ in range(0 if cfg.graph else 3):      # compiles (the weights are reset below)
            step_fn(perm[:batch])
        for seed in range(1, seeds + 1):
            torch.manual_seed(seed)
            fresh = Net()                                  # make_model(seed)'s initial weights
            with torch.no_grad():
                for p, q in zip(model.parameters(), fresh.parameters()):
                    p.copy_(q)
            run_step.zero_()
            gen = torch.Generator(device=device).manual_seed(seed)
            accs, seconds = [], []
            for _ in range(epochs):
                order = torch.randperm(n, device=device, generator=gen)
                if graph is not None:
                    graph.perm.copy_(order)
                    graph.step_no.zero_()
                start = time.perf_counter()
                if device.type == "cuda":
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                for s in range(steps):
                    if graph is not None:
                        graph()
                    else:
                        step_fn(order[s * batch:(s + 1) * batch])
                if device.type == "cuda":
                    b.record()
                    b.synchronize()
                    seconds.append(a.elapsed_time(b) / 1e3)
                else:
                    seconds.append(time.perf_counter() - start)
                accs.append(evaluate(configured, te_x, te_y)[0])
            reached = next((e + 1 for e, acc in enumerate(accs) if acc >= 99.0), 0)
            if reached:
                to_99.append((sum(seconds[:reached]), reached))
            print(f"seed {seed}: test accuracy by epoch " + ", ".join(f"{acc:.2f}%" for acc in accs)
                  + f"; trained in {sum(seconds):.3f} s", flush=True)
            ok &= course_tools.check_true(f"torch_seed_{seed}_test_accuracy_at_least_99_after_{epochs}_epochs",
                                          accs[-1] >= 99.0, 10000,
                                          f"seed={seed} accuracy={accs[-1]:.2f}% first_at_99_epoch={reached} "
                                          f"epochs={epochs} batch={batch} config={key}")
            course_tools.bench(f"seed {seed}, {epochs} epochs, batch {batch}", cfg.impl, sum(seconds) * 1e3,
                               total * step_bytes(batch, sum(p.numel() for p in model.parameters())),
                               total * step_flops(batch), peer=True, batch=batch, seed=seed,
                               test_accuracy=round(accs[-1], 2), **cfg.fields())
    if to_99:
        secs, reached = sorted(to_99)[(len(to_99) - 1) // 2]   # the lower median: a seed's own time
        print(f"time to 99%: {secs:.3f} s (median of {len(to_99)} seeds that reached it)", flush=True)
        course_tools.bench(f"time to 99%, batch {batch}", cfg.impl, secs * 1e3,
                           reached * steps * step_bytes(batch, sum(p.numel() for p in model.parameters())),
                           reached * steps * step_flops(batch), peer=True, batch=batch, epochs=reached,
                           **cfg.fields())
    return ok
# --8<-- [end:time_to_99]


# --8<-- [start:graph]
class GraphStep:
    """The whole training step, as step_fn(idx) runs it (gather, forward, backward, SGD; eager or
    compiled), captured once in a CUDA graph. The batch's indices come from a device-side step counter,
    so every replay takes the next batch."""

    def __init__(self, step_fn, opt, perm, batch):
        self.steps = perm.shape[0] // batch
        self.perm = perm                                  # refilled in place each epoch
        self.step_no = torch.zeros(1, dtype=torch.long, device=perm.device)
        rows = perm[: self.steps * batch].view(self.steps, batch)

        def step():
            idx = rows.index_select(0, self.step_no).flatten()
            loss = step_fn(idx)
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
    (as mnist_bench.cu does), after warm-up: each step is charged with its own launch costs, which is what
    separates eager PyTorch from a CUDA graph. The L2 cache is not flushed: weights staying in L2 from one
    step to the next is part of what a real training loop gets."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    # Each step between two CUDA events, waited for (course_tools.event_ms).
    return statistics.median(course_tools.event_ms(step) for _ in range(repeats))


def epoch_ms(run_epoch):
    """One full epoch (reshuffle included) from its first step to its last; the CPU may run ahead. The
    warmup and timed steps of median_step_ms, which run first, are its warm-up."""
    torch.cuda.synchronize()
    return course_tools.event_ms(run_epoch)
# --8<-- [end:timing]


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
        with torch.autocast(x.device.type, dtype=torch.bfloat16, cache_enabled=False):
            return self.net(x).float()


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


@dataclass
class Prepared:
    """What the configurations of one group share: the model, its optimizer, the initial weights and the
    step function, compiled where the group compiles (compiled and run once here)."""
    model: nn.Module
    opt: torch.optim.Optimizer
    initial: list
    step_fn: object      # idx -> loss
    build_s: float
    notes: dict = field(default_factory=dict)


def prepare(group: tuple, images_u8, labels, batch: int) -> Prepared:
    precision_name, channels_last, what, mode = group
    precision = PRECISIONS[precision_name]
    t0 = time.perf_counter()
    model, opt = make_model(0, images_u8.device, channels_last=channels_last)
    initial = [p.detach().clone() for p in model.parameters()]
    net = model
    if channels_last or precision.bf16_autocast:
        net = AsConfigured(model, channels_last, precision.bf16_autocast)
    if what == "model":
        net = torch.compile(net, mode=mode, dynamic=False)

    def step_fn(idx):
        return train_step(net, opt, images_u8, labels, idx)

    first = torch.arange(batch, device=images_u8.device)
    notes = {}
    if what == "step":
        # The training set never moves: a static address, so that nothing copies it per call.
        torch._dynamo.mark_static_address(images_u8)
        torch._dynamo.mark_static_address(labels)
        step_fn, notes = compile_whole_step(step_fn, mode, first)
    else:
        step_fn(first)   # compiles what is compiled (lazily, at the first call), so that errors show here
    if images_u8.is_cuda:
        torch.cuda.synchronize()
    return Prepared(model, opt, initial, step_fn, time.perf_counter() - t0, notes)


@dataclass
class Built:
    """A configuration ready to run: `step` takes the next batch of a fixed permutation, `run_epoch`
    reshuffles and runs one epoch, `check_step` runs one step on images 0..B-1."""
    step: object
    run_epoch: object
    check_step: object


def build(cfg: Config, prep: Prepared, images_u8, batch: int) -> Built:
    """Wraps a group's step function as the configuration runs it: replayed from a CUDA graph or called."""
    device, n = images_u8.device, images_u8.shape[0]
    everything = torch.arange(n, device=device)
    perm = torch.randperm(n, device=device, generator=torch.Generator(device=device).manual_seed(1))
    if cfg.graph:
        g = GraphStep(prep.step_fn, prep.opt, perm.clone(), batch)

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
        return Built(g, run_epoch, check_step)

    steps = n // batch
    counter = [0]

    def step():
        s = counter[0] % steps
        counter[0] += 1
        return prep.step_fn(perm[s * batch:(s + 1) * batch])

    def run_epoch():
        p = torch.randperm(n, device=device)
        for s in range(steps):
            prep.step_fn(p[s * batch:(s + 1) * batch])
    return Built(step, run_epoch, lambda: prep.step_fn(everything[:batch]))


@dataclass
class Reference:
    loss: float
    updates: list   # per parameter: weights after the step minus before, float64


def fp32_reference(batch: int, images_u8, labels) -> Reference:
    """One eager step in IEEE FP32 from make_model(0)'s weights, on images 0..B-1, with cuDNN off:
    PyTorch's own convolution and batch-norm kernels, so that the reference is independent of cuDNN and
    leaves nothing in cuDNN's plan cache (which would decide the algorithms of later configurations)."""
    saved = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        with settings(PRECISIONS["fp32"], cudnn_benchmark=False):
            model, opt = make_model(0, images_u8.device)
            before = [p.detach().clone() for p in model.parameters()]
            loss = train_step(model, opt, images_u8, labels, torch.arange(batch, device=images_u8.device)).item()
            return Reference(loss, [(p.detach() - w).double() for p, w in zip(model.parameters(), before)])
    finally:
        torch.backends.cudnn.enabled = saved


def step_errors(model, initial, loss: float, ref: Reference) -> tuple[float, list]:
    """The loss's relative error and, per parameter tensor, the update's largest error over the largest
    element of the reference's update (NaN where the step produced NaN)."""
    errs = [((p.detach() - w).double() - r).abs().max().item() / max(r.abs().max().item(), 1e-30)
            for p, w, r in zip(model.parameters(), initial, ref.updates)]
    return abs(loss - ref.loss) / abs(ref.loss), errs


def check_one_step(cfg: Config, prep: Prepared, built: Built, ref: Reference, batch: int) -> tuple[bool, str]:
    """From the same initial weights, on the same batch, the configuration's step gives the reference's
    loss and weight update within its precision's tolerance. The weights are reset first: warm-up and
    earlier configurations of the group have moved them."""
    with torch.no_grad():
        for p, w in zip(prep.model.parameters(), prep.initial):
            p.copy_(w)
    loss = built.check_step().item()
    loss_err, errs = step_errors(prep.model, prep.initial, loss, ref)
    tol = PRECISIONS[cfg.precision]
    ok = all(e <= tol.update_tol for e in errs) and loss_err <= tol.loss_tol   # NaN fails both
    worst = max(errs) if all(math.isfinite(e) for e in errs) else math.nan
    errors = (f"loss_rel_err={loss_err:.1e} (tol {tol.loss_tol:g}) "
              f"update_rel_err={worst:.1e} (tol {tol.update_tol:g}, {cfg.precision})")
    course_tools.check_true(f"batch{batch}_{cfg.key}_step_matches_fp32_eager", ok,
                            sum(r.numel() for r in ref.updates) + 1,
                            f"loss={loss:.6f} fp32_eager_loss={ref.loss:.6f} {errors}")
    return ok, errors


def cleanup():
    """Between groups: Dynamo forgets what it compiled (no recompile limit carries over) and the
    allocator gives back the memory of the group's graphs."""
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def run_phase(configs, batch: int, images_u8, labels, ref: Reference, repeats: int, deadline: float, emit):
    """Checks and times `configs` (all with one cudnn.benchmark value, in order, a group's configurations
    together) in this process, until `deadline` (time.perf_counter()). emit(outcome) receives, per
    configuration, one dict: kind "timed", "failed" (its check), "pruned" (it cannot run: the error) or
    "not reached" (the budget was spent)."""
    i = 0
    while i < len(configs):
        j = i + 1
        while j < len(configs) and configs[j].group == configs[i].group:
            j += 1
        group, i = configs[i:j], j
        prep, prep_error = None, None
        for cfg in group:
            left = deadline - time.perf_counter()
            if left <= 0:
                emit({"kind": "not reached", "key": cfg.key,
                      "why": "the budget (--budget-s) was spent"})
                continue
            if prep is None and prep_error is None and left < COMPILE_RESERVE_S[cfg.mode]:
                emit({"kind": "not reached", "key": cfg.key,
                      "why": f"less than the {COMPILE_RESERVE_S[cfg.mode]:g} s "
                             f"a {cfg.mode} compile needs was left of the budget (--budget-s)"})
                continue
            if prep is None and prep_error is None:
                print(
                    f"  compiling/preparing {cfg.precision} {'channels_last' if cfg.channels_last else 'contiguous'} "
                    f"{cfg.compile_token} ({left:.0f} s of budget left)", flush=True)
                try:
                    with settings(PRECISIONS[cfg.precision], cfg.cudnn_benchmark):
                        prep = prepare(cfg.group, images_u8, labels, batch)
                except Exception as e:  # noqa: BLE001  the group cannot run here: each of its configurations says why
                    prep_error = f"compile/first step: {first_line(e)}"
            if prep_error is not None:
                emit({"kind": "pruned", "key": cfg.key, "why": prep_error})
                continue
            emit(run_config(cfg, prep, batch, images_u8, ref, repeats))
        prep = None
        try:
            cleanup()
        except Exception as e:  # noqa: BLE001
            print(f"cleanup after {group[0].compile_token} failed: {first_line(e)}", flush=True)


def run_config(cfg: Config, prep: Prepared, batch: int, images_u8, ref: Reference, repeats: int) -> dict:
    stage, built = "capture" if cfg.graph else "build", None
    try:
        with settings(PRECISIONS[cfg.precision], cfg.cudnn_benchmark):
            t0 = time.perf_counter()
            built = build(cfg, prep, images_u8, batch)
            torch.cuda.synchronize()
            capture_s = time.perf_counter() - t0
            stage = "check"
            ok, errors = check_one_step(cfg, prep, built, ref, batch)
            if not ok:
                return {"kind": "failed", "key": cfg.key, "why": errors}
            stage = "timing"
            t_step = median_step_ms(built.step, repeats)
            t_epoch = epoch_ms(built.run_epoch)
        return {"kind": "timed", "key": cfg.key, "step_ms": t_step, "epoch_ms": t_epoch, "check": errors,
                "compile_s": round(prep.build_s, 1), "capture_s": round(capture_s, 2),
                "n_params": sum(p.numel() for p in prep.model.parameters()), "notes": prep.notes}
    except Exception as e:  # noqa: BLE001  a configuration that cannot run is reported; the others go on
        return {"kind": "pruned", "key": cfg.key, "why": f"{stage}: {first_line(e)}"}
    finally:
        built = None


def run_worker(configs, batch: int, repeats: int, budget_s: float, cudnn_benchmark: bool, data_dir: Path,
               counter: list):
    """The configurations of the other cudnn.benchmark value, in a process of their own: cuDNN keeps the
    plan it chose for a convolution (keyed by shapes, layout, data type and TF32, not by the benchmark
    flag) for the rest of the process, so in one process the configurations run later would reuse the
    plans of those run first. Its outcomes come back as GRID lines; its other lines are passed on."""
    if not configs:
        return []
    cmd = [sys.executable, "-u", str(Path(__file__).resolve()), "--bench", "--worker", "--batch", str(batch),
           "--cudnn-benchmark", "on" if cudnn_benchmark else "off", "--budget-s", f"{max(budget_s, 1):.1f}",
           "--repeats", str(repeats), "--configs", ",".join(c.key for c in configs), "--data-dir", str(data_dir)]
    print(
        f"batch {batch}: {len(configs)} configurations with cudnn.benchmark "
        f"{'on' if cudnn_benchmark else 'off'} go to a process of their own, with {budget_s:.0f} s of budget",
        flush=True)
    outcomes = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    for line in proc.stdout:
        if line.startswith("GRID "):
            o = json.loads(line[5:])
            outcomes.append(o)
            counter[0] += 1
            print(progress_line(counter[0], batch, o), flush=True)
        else:
            print(line, end="", flush=True)
    code = proc.wait()
    seen = {o["key"] for o in outcomes}
    for c in configs:
        if c.key not in seen:
            outcomes.append({"kind": "not reached", "key": c.key,
                             "why": f"the process running it exited with code {code} first"})
    return outcomes


def bench(data, device, data_dir, batches, repeats, configs, budget_s, benchmark_values, worker) -> int:
    """Checks and times the configurations at each batch size; returns how many failed their check."""
    tr_x = torch.from_numpy(data["train_images"].copy()).to(device)
    tr_y = torch.from_numpy(data["train_labels"].astype(np.int64)).to(device)
    n = tr_x.shape[0]
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        torch._dynamo.config.fail_on_recompile_limit_hit = True  # an error, not a silent fall back to eager
    by_key = {c.key: c for c in GRID}
    failed = 0
    for bi, b in enumerate(batches):
        start = T_START if bi == 0 else time.perf_counter()   # the budget includes start-up and loading
        ref = fp32_reference(b, tr_x, tr_y)
        counter, outcomes = [0], []

        def emit(o):
            outcomes.append(o)
            counter[0] += 1
            if worker:
                print("GRID " + json.dumps(o), flush=True)
            else:
                print(progress_line(counter[0], b, o), flush=True)
        phases = [(v, [c for c in configs if c.cudnn_benchmark == v]) for v in benchmark_values]
        phases = [(v, cs) for v, cs in phases if cs]
        # The first value's configurations run here, within half the budget when there is a second; the
        # second's in a process of their own (run_worker), with its own half (second_share).
        deadline = start + (budget_s / 2 if len(phases) > 1 else budget_s)
        for v, cs in phases[:1]:
            print(f"batch {b}: {len(configs)} configurations; the {len(cs)} with cudnn.benchmark "
                  f"{'on' if v else 'off'} run in this process", flush=True)
            run_phase(cs, b, tr_x, tr_y, ref, repeats, deadline, emit)
        for v, cs in phases[1:]:
            outcomes += run_worker(cs, b, repeats, second_share(start, budget_s, time.perf_counter()), v,
                                   data_dir, counter)
        failed += sum(o["kind"] == "failed" for o in outcomes)
        if worker:
            continue
        report(b, n, outcomes, by_key, time.perf_counter() - start, budget_s)
    return failed


def main():
    ap = course_tools.parser("The PyTorch reference of the MNIST CNN: training run and benchmark.")
    ap.add_argument("--data-dir")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--batch", type=int,
                    help=f"batch size (training: default {BATCH}; --bench: one size, default 64, 256 and 1024)")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--configs", help="with --bench: the configurations to time, comma-separated keys or globs "
                                      "(default: all); 'list' prints them, in the order they run, and exits")
    ap.add_argument("--cudnn-benchmark", choices=("both", "on", "off"), default="both",
                    help="with --bench: the configurations with cudnn.benchmark on, off, or both (default; "
                         "on here, then off in a second process)")
    ap.add_argument("--budget-s", type=float, help="with --bench: once a batch size's run (start-up included) "
                                                   "has taken this many seconds, the configurations not yet "
                                                   "started are reported as not reached (default 200)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # run_worker's child process
    ap.add_argument("--curves", help="write the training curves and misclassified digits to this JSON file")
    ap.add_argument("--cpu", action="store_true", help="train on the CPU (slow; for machines without a GPU)")
    ap.add_argument("--time-to-99", action="store_true",
                    help="train --seeds seeds for --epochs epochs with the seed runs' schedule, in the "
                         f"configuration --configs names (default {TIME_TO_99_CONFIG}): BENCH rows, time to 99%%")
    ap.add_argument("--seeds", type=int, default=5, help="with --time-to-99: seeds 1..N")
    args = ap.parse_args()
    if not (1 <= args.epochs <= 1000 and (args.batch is None or 1 <= args.batch <= 60000)
            and 1 <= args.repeats <= 100000):
        ap.error("--epochs must be in [1, 1000], --batch in [1, 60000] and --repeats in [1, 100000]")
    if args.cpu and args.bench:
        ap.error("--bench times the GPU; it cannot be combined with --cpu")
    if args.time_to_99 and (args.train or args.bench or args.configs == "list"):
        ap.error("--time-to-99 is a mode of its own: give it without --train, --bench and --configs list")
    if args.time_to_99 and not 1 <= args.seeds <= 100:
        ap.error("--seeds must be in [1, 100]")
    configs = GRID
    if args.configs is not None and args.configs != "list":
        configs = select_configs(ap, args.configs)
    if args.time_to_99 and args.configs is not None and len(configs) != 1:
        ap.error("--time-to-99 trains one configuration: --configs must name exactly one")
    values = {"both": (True, False), "on": (True,), "off": (False,)}[args.cudnn_benchmark]
    configs = tuple(c for c in configs if c.cudnn_benchmark in values)
    retiming = args.bench and not args.worker and bool(os.environ.get("COURSE_RETIME"))
    if retiming:
        configs = retime_selection(configs, os.environ["COURSE_RETIME"])
    if args.configs == "list":
        if args.bench or args.train:
            ap.error("--configs list prints the configurations and exits; give it alone")
        for c in configs:
            print(f"{c.key:38s} {c.impl}")
        for key, why in PRUNED_BEFORE_RUNNING.items():
            print(f"PRUNED {key}: {why}")
        print(f"{len(configs)} configurations (cudnn.benchmark {args.cudnn_benchmark}) of a grid of {len(GRID)}")
        return
    for name, given in (("--configs", args.configs is not None), ("--budget-s", args.budget_s is not None),
                        ("--cudnn-benchmark", args.cudnn_benchmark != "both"), ("--worker", args.worker)):
        if given and not args.bench and not (name == "--configs" and args.time_to_99):
            ap.error(f"{name} belongs to the benchmark; use it with --bench")
    if args.worker and (args.batch is None or args.cudnn_benchmark == "both"):
        ap.error("--worker runs one batch size with one cudnn.benchmark value")
    budget_s = 200.0 if args.budget_s is None else args.budget_s
    if not (1 <= budget_s <= 86400):   # also rejects nan and inf
        ap.error(f"--budget-s must be in [1, 86400] seconds, not {args.budget_s}")
    if retiming:
        # The rows to time were reached by an earlier process within the budget; three times it lets a
        # slower start (colder compile caches) reach them all, and still bounds the run.
        budget_s *= 3
        print(f"repeat timing process: {len(configs)} configurations an earlier process timed "
              f"(COURSE_RETIME), budget {budget_s:.0f} s", flush=True)
    if not args.cpu:
        course_tools.require_cuda("torch")
    data_dir = data_dir_from(args.data_dir)
    try:
        data = load_mnist(data_dir)
    except IdxError as e:
        sys.exit(f"error: {e}")  # a missing or damaged file: the message, and exit code 1
    set_precision()
    device = torch.device("cpu" if args.cpu else "cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}",
          flush=True)
    if args.time_to_99:
        key = configs[0].key if args.configs is not None else TIME_TO_99_CONFIG
        if not time_to_99(data, device, key, args.seeds, args.epochs, args.batch or BATCH):
            sys.exit("error: a seed run ended below 99% test accuracy (see CHECK FAIL)")
        return
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
        failed = bench(data, device, data_dir.resolve(), [args.batch] if args.batch else [64, 256, 1024],
                       args.repeats, configs, budget_s, values, args.worker)
        if failed:
            sys.exit(f"error: {failed} configuration(s) failed their check against eager FP32 (see CHECK FAIL)")


if __name__ == "__main__":
    main()
