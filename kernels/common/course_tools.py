"""course_tools.py: the one helper module the course's Python programs share.

Taught in docs/conventions.md. The Python counterpart of kernels/common/course.cuh:

    parser(description)        argparse that exits 1 on a bad option (argparse's own 2 is the
                               harness's "waived" code, which would turn a typo into a skip)
    int_in(low, high)          an argparse type: an integer in [low, high], else a usage error
    peer_parser(...)           parser(description) with the --bench and --seed every peer program takes
    peer_start(...)            peer_parser's command line parsed, torch required, its versions printed
    check_then_bench(...)      a peer's whole main: each check case run, or with --bench each
                               benchmark case, and the exit status
    require_cuda(*modules)     import the GPU modules a program needs, or exit 1 with a plain
                               message: no traceback on a machine without a GPU or without them
    time_ms(fn, ...)           CUDA-event timing: warm-up, L2 flush, host overhead kept out, median
    event_ms(fn)               one fn() timed between two CUDA events (time_ms's measurement)
    check_close(...)           element-wise comparison in float64 that prints the harness's CHECK line
    check_close_on_device(...) the same comparison done where the tensors are (for hundreds of MiB)
    check_true(...)            a CHECK line for a check that is not an element-wise comparison
    check_scaled(...)          a low-precision result against float64, held to twice the error of
                               the same computation rounded in the kernel's precision
    check_planted(...)         a fault planted in a result: passes only if check_scaled rejects it
    check_close_each(...)      check_close with an absolute tolerance per element (softmax: relative)
    plant_zeros_small(...)     zeros where outputs are small; check_each_planted reports whether the
                               check rejects them (a --plant zeros-small run)
    bench(...)                 a BENCH line (JSON) for the GPU record
    torch_peers(...)           the PyTorch configurations of one operation (eager, CUDA graph,
                               torch.compile modes), each compiled before it is yielded
    pruned(config, reason)     a PRUNED line: a configuration left out, and why
    slug(text)                 a one-word CHECK name from an implementation's name

A program under kernels/<chapter>/ imports it with two lines:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    import course_tools
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

EXIT_FAIL = 1
EXIT_WAIVED = 2  # the GPU lacks a feature the program needs: the harness reports a skip


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 here, which the harness reads as "waived"
        self.print_usage(sys.stderr)
        sys.exit(f"{self.prog}: error: {message}")  # exit code 1


def parser(description: str | None = None) -> argparse.ArgumentParser:
    """An argparse parser that rejects unknown options, missing values and malformed numbers with a
    usage message and exit code 1."""
    return _Parser(description=description, allow_abbrev=False)


def int_in(low: int, high: int):
    """An argparse type: an integer from low to high inclusive, else a usage error naming the bounds
    (p.add_argument("--n", type=int_in(1, 1 << 30), default=1000))."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value
    return parse


def peer_parser(description: str, bench_help: str, seed: int = 2026) -> argparse.ArgumentParser:
    """parser(description) with the options of a program that checks a peer and, with --bench, times it:
    --bench (bench_help says what it times) and --seed (the inputs' seed). A program with no options of
    its own calls peer_start instead."""
    p = parser(description)
    p.add_argument("--bench", action="store_true", help=bench_help)
    p.add_argument("--seed", type=int, default=seed)
    return p


def peer_start(description: str, bench_help: str, seed: int = 2026, cudnn: bool = False):
    """The start of a peer program with no options of its own: its command line parsed by
    peer_parser(description, bench_help, seed), torch imported with a GPU required (require_cuda), and
    the line that says what the run measured with: torch's version, its CUDA version, cuDNN's (with
    cudnn=True) and the GPU's name. Returns (args, torch)."""
    args = peer_parser(description, bench_help, seed).parse_args()
    torch = require_cuda("torch")
    versions = f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
    if cudnn:
        versions += f"cuDNN {torch.backends.cudnn.version()}, "
    print(versions + torch.cuda.get_device_name())
    return args, torch


def check_then_bench(run_case, description: str, bench_help: str, check_cases, bench_cases) -> None:
    """The main of a peer program with no options of its own (peer_start's): without --bench,
    run_case(torch, *case, seed, bench=False) for each check case (seeds --seed, --seed + 1, ...); with
    it, run_case(torch, *case, seed, bench=True) for each benchmark case (run_case checks each before
    timing it). Gradients are off. Exits 1 if a check failed, else 0."""
    args, torch = peer_start(description, bench_help)
    with torch.no_grad():
        ok = True
        if not args.bench:
            for i, case in enumerate(check_cases):
                ok &= run_case(torch, *case, args.seed + i, bench=False)
        else:
            for case in bench_cases:
                ok &= run_case(torch, *case, args.seed, bench=True)
    sys.exit(0 if ok else 1)


def require_cuda(*modules: str):
    """Import `modules` (default: torch) and check that a CUDA GPU is usable; on failure print one
    plain line and exit 1. Returns the imported modules, in order."""
    names = modules or ("torch",)
    loaded = []
    for name in names:
        try:
            loaded.append(importlib.import_module(name))
        except ImportError as e:
            sys.exit(f"error: {e.name or name} is not installed; install the course's GPU extra: "
                     f"pip install -e '.[gpu]'")
    torch = sys.modules.get("torch")
    if torch is not None and not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU is available (torch.cuda.is_available() is False); "
                 "this program needs an NVIDIA GPU and its driver (try `nvidia-smi`)")
    cupy = sys.modules.get("cupy")
    if cupy is not None and torch is None:
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # CUDARuntimeError without a driver
            sys.exit(f"error: no CUDA GPU is available ({e}); try `nvidia-smi`")
        if count == 0:
            sys.exit("error: no CUDA GPU is available; try `nvidia-smi`")
    return loaded[0] if len(loaded) == 1 else tuple(loaded)



# --8<-- [start:timing]
def time_ms(fn, warmup: int = 3, repeats: int = 20, flush_l2: bool = True) -> float:
    """Median time of fn() in milliseconds, with CUDA events, after warm-up, as course::time_kernel_ms.

    Before each repeat a buffer twice the size of L2 is written and then read, so repeats do not read
    a warm cache (why the read: docs/first-kernels/timing.md, kernels/first-kernels/l2_flush.cu).
    Python takes tens of microseconds to launch a kernel (torch.compile's guards and Triton's launcher
    more): a GPU-side sleep before the start event lets the host queue all of fn's work first, so
    that only GPU time is measured. CuPy and Triton launch on PyTorch's current stream (by default the
    legacy default stream), so the events bracket exactly the work fn enqueues."""
    import torch

    flush = flush_max = None
    if flush_l2:
        flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
        flush_max = torch.empty((), dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(repeats):
        if flush is not None:
            # The fill evicts fn's data but leaves L2 full of dirty lines, whose write-back fn's own misses
            # would pay for; reading the buffer back writes them back here and leaves clean lines.
            flush.fill_(i & 0xFF)
            torch.amax(flush, dim=0, out=flush_max)  # a read of every byte, on the GPU: no host sync
        torch.cuda._sleep(1_000_000)  # about half a millisecond of GPU time
        times.append(event_ms(fn))
    return sorted(times)[repeats // 2]


def event_ms(fn) -> float:
    """The GPU time of one fn() in milliseconds: a CUDA event before it and one after, waited for."""
    import torch

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)
# --8<-- [end:timing]


def bench(case: str, impl: str, ms: float, nbytes: float, flops: float = 0, peer: bool = False, **extra) -> None:
    """One BENCH line: bytes is the fewest bytes the operation must move, flops its arithmetic; peer
    marks the library or framework row the course's kernels are compared with."""
    row = {"case": case, "impl": impl, "time_ms": float(f"{ms:.6g}"), "bytes": round(nbytes), "flops": round(flops),
           "peer": bool(peer), **extra}
    print("BENCH " + json.dumps(row), flush=True)


# --8<-- [start:check]
def check_close(name: str, got, want, rtol: float, atol: float) -> bool:
    """|got - want| <= atol + rtol * |want| element-wise, in float64 (equal infinities match); NaN never
    passes. got and want
    are PyTorch tensors or anything numpy.asarray accepts. Prints the harness's CHECK line."""
    try:
        import torch
        is_tensor = isinstance(got, torch.Tensor) or isinstance(want, torch.Tensor)
    except ImportError:
        is_tensor = False
    if is_tensor:
        g = got.detach().double().flatten().cpu().numpy()
        w = want.detach().double().flatten().cpu().numpy() if isinstance(want, torch.Tensor) else want
    else:
        g, w = got, want
    import numpy as np

    g = np.asarray(g, dtype=np.float64).ravel()
    w = np.broadcast_to(np.asarray(w, dtype=np.float64).ravel(), g.shape)
    with np.errstate(invalid="ignore"):
        err = np.where(g == w, 0.0, np.abs(g - w))  # equal infinities match; NaN never equals
        bad = ~((g == w) | (err <= atol + rtol * np.abs(w)))  # rtol 0 * inf is NaN; NaN compares false
    if g.size == 0:
        print(f"CHECK FAIL {name} n=0 (nothing was compared)")
        return False
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        print(f"CHECK FAIL {name} n={g.size} first_bad={i} got={g[i]:.9g} want={w[i]:.9g}")
        return False
    print(f"CHECK PASS {name} n={g.size} max_abs_err={float(err.max()):.3g} rtol={rtol:.1g} atol={atol:.1g}")
    return True
# --8<-- [end:check]


def check_close_on_device(name: str, got, want, rtol: float, atol: float) -> bool:
    """check_close for PyTorch tensors, computed in float64 on their own device: the same test and
    CHECK line, without copying hundreds of MiB to the host for numpy (seconds per check on a GPU)."""
    import torch

    g = got.detach().reshape(-1).double()
    w = want.detach().double().to(g.device).reshape(-1).expand_as(g) if want.numel() == 1 else \
        want.detach().double().to(g.device).reshape(-1)
    if g.numel() == 0:
        print(f"CHECK FAIL {name} n=0 (nothing was compared)")
        return False
    if w.shape != g.shape:
        print(f"CHECK FAIL {name} n={g.numel()} got {g.numel()} values, want {w.numel()}")
        return False
    same = g == w  # equal infinities match; NaN never equals
    err = torch.where(same, torch.zeros_like(g), (g - w).abs())
    bad = ~(same | (err <= atol + rtol * w.abs()))  # NaN compares false: fails
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        print(f"CHECK FAIL {name} n={g.numel()} first_bad={i} got={float(g[i]):.9g} want={float(w[i]):.9g}")
        return False
    print(f"CHECK PASS {name} n={g.numel()} max_abs_err={float(err.max()):.3g} rtol={rtol:.1g} atol={atol:.1g}")
    return True


def check_true(name: str, ok: bool, n: int, detail: str = "") -> bool:
    """A check that is not an element-wise comparison: n says how many facts were checked."""
    status = "PASS" if ok and n > 0 else "FAIL"
    print(f"CHECK {status} {name} n={n} {detail}".rstrip())
    return status == "PASS"


# --8<-- [start:torch_peers]
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
LAUNCH_BOUND_BYTES = 16 << 20  # below this, a kernel runs for microseconds: launches and gaps can matter


def slug(text: str) -> str:
    """A CHECK name (one word) from an implementation's name: "torch.sum, fp32, eager" -> "torch.sum_fp32_eager"."""
    import re

    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")


def pruned(config: str, reason: str) -> None:
    """A configuration left out of a comparison, and why: a PRUNED line, not a silent omission."""
    print(f"PRUNED {config}: {reason}", flush=True)


def torch_peers(fn, args, label: str, nbytes: float, modes=COMPILE_MODES, cuda_graph: bool = True):
    """Yield (impl, run) for each way a performance engineer would run fn(*args) in PyTorch: eager;
    eager captured once in a CUDA graph and replayed; torch.compile in each mode (dynamic=False: one
    kernel per shape, as for a model with fixed shapes). run() runs once and returns fn's result
    (valid until the next run). Each configuration is compiled and warmed up before it is yielded, so
    the caller checks its output, then times it; the next one is compiled only after that.

    CUDA graphs (the graph and reduce-overhead configurations) remove host launch overhead and the gaps
    between kernels; for an operation moving `nbytes` >= LAUNCH_BOUND_BYTES they are pruned, with the
    reason printed: the GPU then runs for far longer than a launch takes, time_ms keeps host overhead
    out of the measurement anyway, and replaying on fixed addresses means copying a fresh input in."""
    import torch

    yield f"{label}, eager", lambda: fn(*args)
    big = nbytes >= LAUNCH_BOUND_BYTES
    why = (f"moves {nbytes / 2**20:.0f} MiB, so the GPU works far longer than a launch takes; CUDA graphs "
           "remove launch overhead, which time_ms keeps out of the measured GPU time")
    if cuda_graph and big:
        pruned(f"{label}, eager in a CUDA graph", why)
    elif cuda_graph:
        yield f"{label}, eager in a CUDA graph", _graphed(torch, fn, args)
    for mode in modes:
        impl = f"{label}, torch.compile {mode}"
        if mode == "reduce-overhead" and big:
            pruned(impl, why + ", and its graph would first copy each fresh input into graph-owned memory")
            continue
        torch._dynamo.reset()  # compile afresh: Dynamo's cache would otherwise serve the previous mode's code
        compiled = torch.compile(fn, mode=mode, dynamic=False)
        if mode == "reduce-overhead":
            def run(c=compiled):
                torch.compiler.cudagraph_mark_step_begin()  # a new step: the previous outputs may be overwritten
                return c(*args)
        else:
            def run(c=compiled):
                return c(*args)
        for _ in range(3):  # compile; reduce-overhead also warms up and records its graph
            run()
        torch.cuda.synchronize()
        yield impl, run


def _graphed(torch, fn, args):
    """fn(*args) captured once in a torch.cuda.CUDAGraph: run() replays it and returns the captured output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as torch.cuda.graph's documentation asks
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)

    def run():
        graph.replay()
        return out
    return run
# --8<-- [end:torch_peers]


# --8<-- [start:scaled]
# The attention chapter's criterion (attention_common.cuh's compare_scaled, FlashAttention's tests'
# convention): a result's error against float64 may be at most twice the error of the same computation
# done in the kernel's precision ("rounded": rounded exactly where the kernel rounds), both against
# float64. So the tolerance follows the data, small where the values are small. Two tests:
#  - every element: |got - exact| <= tol = 2 max|rounded - exact| + floor (a kernel writing zeros
#    where |exact| < tol fails; below_tol is the share of such reference values);
#  - every group of rows: rms(got - exact) <= 2 rms(rounded - exact) + rms_all(rounded - exact) / 2
#    + floor, so that a tile shifted by far less than tol fails too.
# floor = 2^-12 rms(exact): room for the fp32 arithmetic where the rounded path is exact.
def compare_scaled(got, exact, rounded, group: int) -> dict:
    """The verdict of the criterion above on flat float64 arrays, groups of `group` elements."""
    import numpy as np

    g, x, r = (np.asarray(a, dtype=np.float64).ravel() for a in (got, exact, rounded))
    n = g.size
    v = {"ok": False, "n": n, "tol": 0.0, "below_tol": 0.0, "max_err": 0.0, "ref_max_err": 0.0, "rms_ratio": 0.0,
         "bad": -1, "bad_group": -1}
    if n == 0:
        return v
    ref_err = np.abs(r - x)
    floor = 2.0**-12 * float(np.sqrt(np.mean(x * x)))
    v["ref_max_err"] = float(ref_err.max())
    tol = v["tol"] = 2 * v["ref_max_err"] + floor
    with np.errstate(invalid="ignore"):
        err = np.where(g == x, 0.0, np.abs(g - x))  # NaN stays NaN and fails below
    v["below_tol"] = float(np.mean(np.abs(x) < tol))
    bad = ~(err <= tol)
    if bad.any():
        v["bad"] = int(np.flatnonzero(bad)[0])
    v["max_err"] = float(err[~bad].max()) if (~bad).any() else 0.0
    pad = -n % group                                        # the last group may be short
    sq_err = np.concatenate([err * err, np.zeros(pad)]).reshape(-1, group).sum(1)
    sq_ref = np.concatenate([ref_err * ref_err, np.zeros(pad)]).reshape(-1, group).sum(1)
    count = np.full(sq_err.size, float(group))
    count[-1] = group - pad
    allowed = 2 * np.sqrt(sq_ref / count) + float(np.sqrt(np.mean(ref_err * ref_err))) / 2 + floor
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.sqrt(sq_err / count) / allowed
    # A group fails on a ratio above 1 or NaN, or on any error where nothing is allowed (all zeros).
    group_bad = np.where(allowed > 0, ~(ratio <= 1.0), sq_err > 0)
    if group_bad.any():
        v["bad_group"] = int(np.flatnonzero(group_bad)[0])
    good = (allowed > 0) & ~group_bad
    v["rms_ratio"] = float(ratio[good].max()) if good.any() else 0.0
    v["ok"] = v["bad"] < 0 and v["bad_group"] < 0
    return v


def _flat64(a):
    """A tensor (any device, any dtype) or array as a flat float64 NumPy array."""
    if hasattr(a, "detach"):
        return a.detach().double().flatten().cpu().numpy()
    import numpy as np

    return np.asarray(a, dtype=np.float64).ravel()


def check_scaled(name: str, got, exact, rounded, row_len: int, group_rows: int = 16) -> bool:
    """got (the kernel's result) against exact (float64), the tolerance from rounded (the same
    computation in the kernel's precision), rows of row_len values, in groups of group_rows rows.
    Prints the CHECK line with the effective tolerance and below_tol."""
    g, x, r = _flat64(got), _flat64(exact), _flat64(rounded)
    v = compare_scaled(g, x, r, group_rows * row_len)
    head = f"{name} n={v['n']} below_tol={100 * v['below_tol']:.3g}% tol={v['tol']:.3g}"
    if v["n"] == 0:
        print(f"CHECK FAIL {name} n=0 (nothing was compared)")
    elif v["ok"]:
        print(f"CHECK PASS {head} max_err={v['max_err']:.3g} rounded_ref_max_err={v['ref_max_err']:.3g} "
              f"rms_ratio={v['rms_ratio']:.3g}")
    elif v["bad"] >= 0:
        i = v["bad"]
        print(f"CHECK FAIL {head} first_bad={i} got={g[i]:.9g} want={x[i]:.9g}")
    else:
        print(f"CHECK FAIL {head} bad_group={v['bad_group']} (rms error over twice the rounded reference's)")
    return bool(v["ok"])
# --8<-- [end:scaled]


PLANTS = ("zeros-small", "tile")


def planted(fault: str, got, exact, row_len: int, old_atol: float):
    """A copy of got (flat float64) with a fault planted, as attention_common.cuh's planted():
    zeros-small: zeros wherever |exact| < old_atol (the old fixed tolerance); tile: one tile of 64
    rows, three fifths of the way through, shifted by 1% of the typical (RMS) magnitude."""
    import numpy as np

    g, x = _flat64(got).copy(), _flat64(exact)
    if fault == "zeros-small":
        g[np.abs(x) < old_atol] = 0.0
        return g
    if fault != "tile":
        raise ValueError(f"unknown fault {fault!r} (known: {', '.join(PLANTS)})")
    shift = 0.01 * float(np.sqrt(np.mean(x * x))) if x.size else 0.0
    first = x.size // row_len * 3 // 5 // 64 * 64
    g[first * row_len:(first + 64) * row_len] += shift
    return g


def check_planted(fault: str, got, exact, rounded, row_len: int, old_rtol: float, old_atol: float,
                  suffix: str = "", group_rows: int = 16) -> bool:
    """CHECK PASS planted_<fault>_caught<suffix> only if the clean result passes check_scaled's
    criterion and the result with the fault planted fails it; also says whether the old fixed
    tolerance (|err| <= old_atol + old_rtol |exact|) would have let the fault through."""
    import numpy as np

    g, x, r = _flat64(got), _flat64(exact), _flat64(rounded)
    clean = compare_scaled(g, x, r, group_rows * row_len)
    bad = planted(fault, g, x, row_len, old_atol)
    fault_v = compare_scaled(bad, x, r, group_rows * row_len)
    old_ok = bool(np.all(np.abs(bad - x) <= old_atol + old_rtol * np.abs(x)))
    caught = clean["ok"] and not fault_v["ok"]
    print(f"CHECK {'PASS' if caught else 'FAIL'} planted_{fault}_caught{suffix} n={g.size} "
          f"clean={'pass' if clean['ok'] else 'FAIL'} planted={'pass' if fault_v['ok'] else 'rejected'} "
          f"old_tol={'accepted' if old_ok else 'rejected'} below_tol={100 * clean['below_tol']:.3g}% "
          f"tol={clean['tol']:.3g}")
    return caught


# --8<-- [start:check_each]
# A softmax output is exp(x - max) / sum with every term positive, so fp32 rounding changes each output
# by a share of itself however small it is: the check is relative per element, as softmax_reference.cuh's
# (kSoftmaxRtol, kSoftmaxAtol). The only absolute slack is float's smallest normal number, below which
# an output may correctly flush to zero. A fixed atol of 1e-9 or 1e-6 was not relative: in a row of
# thousands of scores in [-8, 8) many outputs are below it, and a kernel writing zeros there passed.
SOFTMAX_RTOL = 1e-4
SOFTMAX_ATOL = 1.1754943508222875e-38  # FLT_MIN


def _each_verdict(got, want, atol_each, rtol: float) -> dict:
    """|got - want| <= atol_each + rtol |want| element-wise in float64, where the tensors are (PyTorch
    tensors stay on their device) or in NumPy. Equal infinities match; NaN never passes."""
    try:
        import torch
        is_tensor = isinstance(got, torch.Tensor)
    except ImportError:
        is_tensor = False
    if is_tensor:
        g = got.detach().reshape(-1).double()
        as_t = lambda a: (a.detach().double().to(g.device) if isinstance(a, torch.Tensor)  # noqa: E731
                          else torch.as_tensor(a, dtype=torch.float64, device=g.device)).reshape(-1)
        w, a = as_t(want), as_t(atol_each)
        w = w.expand_as(g) if w.numel() == 1 else w
        a = a.expand_as(g) if a.numel() == 1 else a
        n, shape_ok = g.numel(), w.shape == g.shape and a.shape == g.shape
        if not shape_ok or n == 0:
            return {"n": n, "shape_ok": shape_ok, "ok": False}
        same = g == w
        err = torch.where(same, torch.zeros_like(g), (g - w).abs())
        tol = a + rtol * w.abs()
        bad = ~(same | (err <= tol))
        first = int(bad.nonzero()[0, 0]) if bool(bad.any()) else -1
        share = torch.where(tol > 0, err / tol, torch.zeros_like(err))
        v = {"max_err": float(err.max()), "max_share": float(share[~bad].max()) if first < 0 else 0.0,
             "min_atol": float(a.min()), "max_atol": float(a.max()),
             "below_tol": float((w.abs() <= tol).double().mean())}
        if first >= 0:
            v.update(got=float(g[first]), want=float(w[first]), tol=float(tol[first]))
    else:
        import numpy as np

        g = np.asarray(got, dtype=np.float64).ravel()
        w, a = np.asarray(want, dtype=np.float64).ravel(), np.asarray(atol_each, dtype=np.float64).ravel()
        w = np.broadcast_to(w, g.shape) if w.size == 1 else w
        a = np.broadcast_to(a, g.shape) if a.size == 1 else a
        n, shape_ok = g.size, w.shape == g.shape and a.shape == g.shape
        if not shape_ok or n == 0:
            return {"n": n, "shape_ok": shape_ok, "ok": False}
        with np.errstate(invalid="ignore", divide="ignore"):
            same = g == w
            err = np.where(same, 0.0, np.abs(g - w))
            tol = a + rtol * np.abs(w)
            bad = ~(same | (err <= tol))
            first = int(np.flatnonzero(bad)[0]) if bad.any() else -1
            share = np.where(tol > 0, err / tol, 0.0)
        v = {"max_err": float(err.max()), "max_share": float(share[~bad].max()) if first < 0 else 0.0,
             "min_atol": float(a.min()), "max_atol": float(a.max()),
             "below_tol": float(np.mean(np.abs(w) <= tol))}
        if first >= 0:
            v.update(got=float(g[first]), want=float(w[first]), tol=float(tol[first]))
    v.update(n=n, shape_ok=True, ok=first < 0, first=first)
    return v


def check_close_each(name: str, got, want, atol_each, rtol: float) -> bool:
    """check_close with an absolute tolerance per element (a scalar or one per element, as course.cuh's
    check_close_each): |got - want| <= atol_each + rtol |want|. PyTorch tensors are compared on their
    own device (no copy of hundreds of MiB to the host). The CHECK line also gives below_tol, the share
    of elements so small that a zero written in their place would pass."""
    v = _each_verdict(got, want, atol_each, rtol)
    n = v["n"]
    if n == 0:
        print(f"CHECK FAIL {name} n=0 (nothing was compared)")
    elif not v["shape_ok"]:
        print(f"CHECK FAIL {name} n={n} want or atol_each does not match got's {n} values")
    elif not v["ok"]:
        print(f"CHECK FAIL {name} n={n} first_bad={v['first']} got={v['got']:.9g} want={v['want']:.9g} "
              f"tol={v['tol']:.3g}")
    else:
        print(f"CHECK PASS {name} n={n} max_abs_err={v['max_err']:.3g} rtol={rtol:.1g} "
              f"atol={v['min_atol']:.2g}..{v['max_atol']:.2g} worst_err_over_tol={v['max_share']:.2g} "
              f"below_tol={100 * v['below_tol']:.3g}%")
    return bool(v["ok"])
# --8<-- [end:check_each]


# --8<-- [start:plant_zeros_small]
PLANT_CHOICES = ("zeros-small",)  # what --plant accepts (parser.add_argument("--plant", choices=...))


def plant_zeros_small(got, want, below: float):
    """A copy of got with zeros wherever want is nonzero (and not NaN) with |want| < below (the old fixed
    atol): what a kernel that loses small outputs writes, as course.cuh's plant_zeros_small. Returns
    (copy, how many were zeroed); a tensor stays on its device."""
    if hasattr(got, "detach"):
        import torch

        w = (want.detach().to(got.device) if isinstance(want, torch.Tensor)
             else torch.as_tensor(want, device=got.device))
        small = (w.abs() > 0) & (w.abs() < below)
        return torch.where(small, torch.zeros_like(got), got), int(small.sum())
    import numpy as np

    g, w = np.array(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    small = (np.abs(w) > 0) & (np.abs(w) < below)
    g[small] = 0.0
    return g, int(small.sum())


def report_planted_zeros_small(check: str, planted_n: int, check_passed: bool) -> bool:
    """The planted verdict, the same line as course.cuh's report_planted_zeros_small: PASS only if
    something was planted and the real check rejected it."""
    caught = planted_n > 0 and not check_passed
    why = ("(no element was small enough to plant: the run proves nothing)" if planted_n == 0 else
           "(the check rejected zeros written where outputs are small)" if caught else
           "(the check ACCEPTED zeros written where outputs are small)")
    print(f"CHECK {'PASS' if caught else 'FAIL'} planted_zeros_small_caught n={planted_n} check={check} {why}",
          flush=True)
    return caught


def check_each_planted(name: str, got, want, atol_each, rtol: float, old_atol: float) -> bool:
    """--plant zeros-small for check_close_each: the same check, quietly, on got with zeros wherever
    0 < |want| < old_atol; prints CHECK PASS planted_zeros_small_caught only if it rejects them."""
    bad, n = plant_zeros_small(got, want, old_atol)
    passed = bool(_each_verdict(bad, want, atol_each, rtol)["ok"])
    return report_planted_zeros_small(name, n, passed)
# --8<-- [end:plant_zeros_small]
