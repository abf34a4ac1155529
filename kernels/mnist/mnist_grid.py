# mnist_grid.py: the PyTorch side of the MNIST benchmark, as configurations: the precisions, what
# torch.compile compiles, every combination of the knobs and their running order (docs/mnist/results.md).
# Pure Python (no torch), so the grid can be listed and tested anywhere. Not a program: a module
# mnist_torch.py imports.
from dataclasses import dataclass

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
