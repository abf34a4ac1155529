# mnist_grid.py: the PyTorch side of the MNIST benchmark, as configurations: the precisions, what
# torch.compile compiles, every combination of the knobs and their running order (docs/mnist/results.md).
# Pure Python (no torch), so the grid can be listed and tested anywhere. Not a program: a module
# mnist_torch.py imports.
import fnmatch
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# --8<-- [start:configs]
@dataclass(frozen=True)
class Precision:
    """A precision a configuration runs in, and how close its one checked step must come to the
    reference, one eager FP32 step (fp32_reference): update_tol bounds, for each parameter tensor, the
    largest difference of the weight update divided by the largest element of the FP32 update; loss_tol
    the loss's relative difference. Both scale with the data. Each is several times the largest error
    that one step in that precision showed against a float64 step on the CPU (inputs rounded to TF32 or
    bf16) at batch 64, 256 and 1024; batch norm's mean subtraction makes the convolutions' weight
    gradients small differences of large sums, which loses more digits than the inputs' rounding alone.
    A wrong step misses by the size of the update (a step that updates nothing misses by 1)."""
    name: str            # as the impl strings name it
    token: str           # as the configuration keys name it
    conv: str            # cuDNN's convolutions: "tf32" or "ieee" (FP32), as fp32_precision names them
    matmul: str          # matrix products (the linear layers): "tf32" or "ieee"
    bf16_autocast: bool  # forward and loss under torch.autocast(bfloat16); weights and SGD stay FP32
    update_tol: float
    loss_tol: float


PRECISIONS = {p.name: p for p in (
    Precision("bf16-autocast", "bf16", "tf32", "ieee", True, 0.5, 2e-2),   # mixed precision
    Precision("tf32", "tf32", "tf32", "tf32", False, 0.2, 1e-3),          # TF32 for convolutions and linear layers
    Precision("fp32", "fp32", "ieee", "ieee", False, 0.02, 1e-4),         # IEEE FP32, TF32 off (CUDA versions 1 to 3)
)}

# What torch.compile compiles, and in which mode: none (eager); the model (forward and backward; the
# gather, loss and SGD step stay eager); or the whole step (gather, forward, loss, backward, SGD). Modes
# "reduce-overhead" and "max-autotune" are "default" and "max-autotune-no-cudagraphs" plus Inductor's
# own CUDA graphs, one per compiled piece; the grid's CUDA-graph knob captures the whole step instead.
COMPILES = (("none", ""), ("model", "default"), ("step", "default"),
            ("model", "max-autotune-no-cudagraphs"), ("step", "max-autotune-no-cudagraphs"))


@dataclass(frozen=True)
class Config:
    """One point of the grid: `key` selects it (--configs), `impl` names it in the BENCH rows."""
    precision: str        # a key of PRECISIONS
    channels_last: bool   # model weights and input batch in NHWC memory format (else contiguous NCHW)
    cudnn_benchmark: bool # torch.backends.cudnn.benchmark, for the whole process that runs it
    compile: str          # "none" | "model" | "step"
    mode: str             # torch.compile's mode, where something is compiled
    graph: bool           # the whole step captured in one CUDA graph (GraphStep) and replayed

    @property
    def compile_token(self) -> str:
        if self.compile == "none":
            return "eager"
        return f"{self.compile}-{'autotune' if self.mode.startswith('max-autotune') else self.mode}"

    @property
    def key(self) -> str:
        return "-".join([PRECISIONS[self.precision].token, "nhwc" if self.channels_last else "nchw",
                         "bench" if self.cudnn_benchmark else "nobench", self.compile_token,
                         "graph" if self.graph else "nograph"])

    @property
    def way(self) -> str:
        """How the step runs, without the settings: the row names' first part."""
        inner = {"none": "eager step" if self.graph else "eager", "model": f"compile(model, {self.mode})",
                 "step": f"compile(step, {self.mode})"}[self.compile]
        if not self.graph:
            return inner
        return f"CUDA graph(step, {inner})" if self.compile == "model" else f"CUDA graph({inner})"

    @property
    def impl(self) -> str:
        knobs = [name for name, on in (("channels_last", self.channels_last),
                                       ("cudnn.benchmark", self.cudnn_benchmark)) if on]
        return " ".join(["PyTorch", self.way, *knobs, self.precision])   # the precision last, as globs expect

    @property
    def group(self) -> tuple:
        """What compiled code depends on (with the batch size, fixed per run): configurations of one group
        share one model and one compiled function; cudnn.benchmark and the graph capture do not change
        what Inductor generates."""
        return (self.precision, self.channels_last, self.compile, self.mode)

    def fields(self) -> dict:
        return {"config": self.key, "precision": self.precision,
                "memory_format": "channels_last" if self.channels_last else "contiguous",
                "cudnn_benchmark": self.cudnn_benchmark, "compile": self.compile,
                "compile_mode": self.mode or "none", "cuda_graph": self.graph}


def order_key(c: Config) -> tuple:
    """Likely fastest first, within a budget that may not reach the end: the compiled model and the
    captured eager step (cheap to build), then the compiled whole step, then autotuning (whose compiles
    take longest), and eager without a graph last (launch-bound, and its epochs are slow to time); within
    each, bf16 before TF32 before FP32, channels_last before contiguous. A group's configurations run
    one after another (they share its compiled code), the captured one first."""
    tier = {("model", "default"): 0, ("step", "default"): 1, ("model", "max-autotune-no-cudagraphs"): 2,
            ("step", "max-autotune-no-cudagraphs"): 3, ("none", ""): 0 if c.graph else 4}[(c.compile, c.mode)]
    precision = list(PRECISIONS).index(c.precision)
    return (tier, precision, not c.channels_last, c.compile == "none", not c.graph)


# Seconds of budget a group must have left to start compiling (a compile cannot be stopped halfway):
# about what one takes from Inductor's on-disk caches; a compile from cold caches takes longer.
COMPILE_RESERVE_S = {"": 0.0, "default": 8.0, "max-autotune-no-cudagraphs": 20.0}


GRID = tuple(sorted((Config(p, cl, cb, comp, mode, g)
                     for p in PRECISIONS for cl in (True, False) for cb in (True, False)
                     for comp, mode in COMPILES for g in (True, False)),
                    key=lambda c: (not c.cudnn_benchmark, order_key(c))))

# Combinations left out before running, with the reason (printed as PRUNED lines): none. Every knob
# changes what runs in every combination (cudnn.benchmark included: even max-autotune leaves the
# convolutions' backward passes to cuDNN), so no combination is provably identical to another. A
# combination that fails to compile, capture or run is pruned when it fails, with the error.
PRUNED_BEFORE_RUNNING: dict = {}
# --8<-- [end:configs]


# How the benchmark reports the grid: its sizes, progress lines, BENCH rows and summary, and the
# --configs selection. Pure Python too.

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


def first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: " + (text.splitlines()[0][:limit] if text else "")


def describe(o: dict) -> str:
    if o["kind"] == "timed":
        said = "".join(f", {k}={v}" for k, v in o["notes"].items() if k != "fullgraph_why")
        return (f"step {o['step_ms']:.4f} ms, epoch {o['epoch_ms'] / 1e3:.3f} s; check {o['check']}; "
                f"compiled in {o['compile_s']:g} s{said}")
    prefix = {"failed": "FAILED its check, not timed: ", "pruned": "pruned: ", "not reached": "not reached: "}
    return prefix[o["kind"]] + o["why"]


def progress_line(i: int, batch: int, o: dict) -> str:
    if o["kind"] == "pruned":
        return f"PRUNED {o['key']}: {o['why']}"
    return f"[{i}] batch {batch} {o['key']}: {describe(o)}"


def report(b: int, n: int, outcomes: list, by_key: dict, took_s: float, budget_s: float):
    """BENCH rows (every timed configuration is a peer row), then a summary short enough for the end of
    the output, which is what the GPU record keeps."""
    timed = [o for o in outcomes if o["kind"] == "timed"]
    steps_per_epoch = n // b
    # The plots draw, of each way of running the step, the fastest configuration at this batch size.
    fastest_of_way = {}
    for kind, col in (("step", "step_ms"), ("epoch", "epoch_ms")):
        for o in timed:
            w = by_key[o["key"]].way
            if (kind, w) not in fastest_of_way or o[col] < fastest_of_way[(kind, w)][col]:
                fastest_of_way[(kind, w)] = o
    for kind, col in (("step", "step_ms"), ("epoch", "epoch_ms")):
        for o in sorted(timed, key=lambda o: o[col]):
            cfg = by_key[o["key"]]
            steps_in = 1 if kind == "step" else steps_per_epoch
            plot = {}
            if fastest_of_way[(kind, cfg.way)] is o:
                plot = {"step_ms": round(o[col], 6)} if kind == "step" else {"epoch_s": round(o[col] / 1e3, 6)}
            notes = {k: v for k, v in o["notes"].items() if k != "fullgraph_why"}
            course_tools.bench(f"{kind}, batch {b}", cfg.impl, o[col], steps_in * step_bytes(b, o["n_params"]),
                               steps_in * step_flops(b), peer=True, batch=b, kind=kind, steps=steps_in,
                               compile_s=o["compile_s"], **cfg.fields(), **plot, **notes)
    counts = {k: sum(o["kind"] == k for o in outcomes) for k in ("timed", "failed", "pruned", "not reached")}
    print(f"\nbatch {b}: grid of {len(GRID)} configurations, {len(outcomes)} asked for, {counts['timed']} timed, "
          f"{counts['failed']} failed their check, {counts['pruned']} pruned, {counts['not reached']} not reached "
          f"(--budget-s {budget_s:g}), in {took_s:.0f} s", flush=True)
    print("timed, fastest step first:  key, step ms, epoch s, compile s", flush=True)
    for o in sorted(timed, key=lambda o: o["step_ms"]):
        print(f"  {o['key']:38s} {o['step_ms']:8.4f} {o['epoch_ms'] / 1e3:7.3f} {o['compile_s']:6.1f}", flush=True)
    why_steps = {o["notes"]["fullgraph_why"] for o in timed if "fullgraph_why" in o["notes"]}
    for why in sorted(why_steps):
        print(f"compile(step, fullgraph=True) refused: {why}", flush=True)
    # Last, as the end of the output is what the record keeps: what did not run, and why (the
    # configurations that share a reason on one line).
    for kind, label in (("failed", "FAILED"), ("pruned", "PRUNED"), ("not reached", "NOT REACHED")):
        reasons = {}
        for o in outcomes:
            if o["kind"] == kind:
                reasons.setdefault(o["why"], []).append(o["key"])
        for why, keys in reasons.items():
            print(f"{label} {', '.join(keys)}: {why}", flush=True)


def second_share(start: float, budget_s: float, now: float) -> float:
    """Seconds of budget for the second cudnn.benchmark value's process: what is left, but never less
    than half the budget. The first process may overrun its half (a compile cannot stop halfway; a
    compile from cold caches can take half a minute), and the second half of the grid (in one sitting,
    the fastest configuration of all) must not be left to what that overrun spares."""
    return max(start + budget_s - now, budget_s / 2)


def retime_selection(configs: tuple, retime_json: str | None) -> tuple:
    """A repeat timing process (course/bench.py sets COURSE_RETIME to the rows an earlier process timed,
    as a JSON list of impl names) times those configurations only: left to the budget, each process
    would reach a different set, and the fastest row could be timed by one process alone."""
    if not retime_json:
        return configs
    wanted = set(json.loads(retime_json))
    return tuple(c for c in configs if c.impl in wanted)


def select_configs(ap, text: str) -> tuple:
    """--configs: comma-separated keys of GRID or globs over them (bf16-nhwc-*), each matching at least
    one; run in GRID's order."""
    names = text.split(",")
    if any(not name.strip() for name in names):
        ap.error(f"--configs {text!r}: an empty name; give comma-separated names or globs (see --configs list)")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        ap.error(f"--configs: {', '.join(repeated)} named more than once")
    unknown = [name for name in names if not any(fnmatch.fnmatchcase(c.key, name) for c in GRID)]
    if unknown:
        ap.error(f"--configs: {', '.join(unknown)} matches no configuration (see --configs list)")
    return tuple(c for c in GRID if any(fnmatch.fnmatchcase(c.key, name) for name in names))
