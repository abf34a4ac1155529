"""The headline that opens every generated results table: per case, the best version against the best peer.

A results table lists every row a program measured; a reader wants the answer first. For each case the
headline gives the fastest *version* (the rows the page teaches), the fastest *peer* (the strongest
thing a performance engineer would use instead), the speed ratio between them, and the best version's
share of a *reference*: the bandwidth of a same-bytes copy measured in the same run where the program
times one, otherwise the roofline of the GPU's datasheet (bytes at the datasheet's memory bandwidth,
FLOPs at its peak for the row's precision), labelled as datasheet. The roofline is a ceiling; the copy
is not (a kernel that only reads, or whose writes stay in L2, can move its bytes faster than a copy),
so a share of the copy above 100% is printed as it is.

Rows are sorted into the three roles by rules a results directive can override with globs over the
implementation names (`ours="v*"`, `peer="cuBLAS*"`, `reference="cudaMemcpy*"`, `reference=none`), keep only
some cases (`cases="softmax*"`), or leave out the datasheet roofline where the program's bytes are not
device-memory bytes (`datasheet=off`):

- reference: a copy of the same bytes (`cudaMemcpy ...`, `... same bytes`, `Tensor.copy_`);
- peer: a row the program marks `"peer": true`, and every row of a second program named in the
  directive (a framework's benchmark beside the course's);
- version: every other row of the first program.
"""

from __future__ import annotations

import fnmatch
import re

# Dense (no sparsity) peak rates and memory bandwidth from NVIDIA's datasheets, SXM form factor.
# Keys are the GPU names the record stores (`nvidia-smi --query-gpu=name`). FP64 has two rates: the
# CUDA cores' DFMA (34 TFLOP/s: a double-precision loop, a reduction in double) and the tensor cores'
# DMMA (67 TFLOP/s: cuBLAS's DGEMM).
DATASHEETS = {
    "NVIDIA H100 80GB HBM3": {
        "source": "H100 SXM5 datasheet",
        "bandwidth": 3.35e12,
        "peak": {"fp64": 34e12, "fp64-tensor": 67e12, "fp32": 67e12, "tf32": 494.7e12, "16-bit": 989.4e12, "fp8": 1978.9e12},
    },
    "NVIDIA H200": {
        "source": "H200 SXM datasheet",
        "bandwidth": 4.8e12,
        "peak": {"fp64": 34e12, "fp64-tensor": 67e12, "fp32": 67e12, "tf32": 494.7e12, "16-bit": 989.4e12, "fp8": 1978.9e12},
    },
}
PRECISION_NAMES = {"fp64": "FP64", "fp64-tensor": "FP64 tensor", "fp32": "FP32", "tf32": "TF32 tensor",
                   "16-bit": "BF16/FP16 tensor", "fp8": "FP8 tensor"}

_COPY = re.compile(r"cudaMemcpy|same bytes|Tensor\.copy_", re.IGNORECASE)


_PRECISIONS = (("fp32", r"fp32 math|\bfma math"), ("fp8", r"fp8|e4m3|e5m2"),
               ("tf32", r"tf32|default math"),  # cuDNN's default math allows TF32 on fp32 data
               ("16-bit", r"bf16|fp16|half|hgemm|tensorop"), ("fp64-tensor", r"dgemm"),
               # "double" as a type, not "double-buffered"
               ("fp64", r"fp64|(?<![\w-])double(?![\w-])"), ("fp32", r"fp32|float"))


def precision(impl: str, case: str = "") -> str:
    """The arithmetic a row uses, as its implementation name says, else as its case says, else FP32."""
    for text in (impl.lower(), case.lower()):
        for key, pattern in _PRECISIONS:
            if re.search(pattern, text):
                return key
    return "fp32"


def datasheet_for(gpu: str) -> dict | None:
    return next((d for name, d in DATASHEETS.items() if gpu.startswith(name)), None)


def _match(impl: str, pattern: str | None) -> bool:
    return pattern is not None and fnmatch.fnmatchcase(impl, pattern)


def roles(rows: list[dict], own: set[int], opts: dict) -> dict[str, dict[str, list[dict]]]:
    """{case: {"ours": [...], "peer": [...], "reference": [...]}} in the record's case order.
    `own` holds the ids of the rows measured by the directive's first program."""
    by_case: dict[str, dict[str, list[dict]]] = {}
    for b in rows:
        impl = b["impl"]
        if "cases" in opts and not _match(b["case"], opts["cases"]):
            continue
        if "reference" in opts:
            role = "reference" if _match(impl, opts["reference"]) else None
        else:
            role = "reference" if _COPY.search(impl) else None
        if role is None:
            if "peer" in opts:
                role = "peer" if _match(impl, opts["peer"]) else None
            elif b.get("peer") or id(b) not in own:
                role = "peer"
        if role is None:
            role = "ours" if ("ours" not in opts or _match(impl, opts["ours"])) else None
        if role:
            by_case.setdefault(b["case"], {"ours": [], "peer": [], "reference": []})[role].append(b)
    return by_case


def _fastest(rows: list[dict]) -> dict | None:
    """The fastest row whose timing reproduced: an `unstable` row (course/bench.py) is never the best."""
    timed = [b for b in rows if b.get("time_ms") and not b.get("unstable")]
    return min(timed, key=lambda b: b["time_ms"]) if timed else None


def _faster_unstable(rows: list[dict], best: dict | None) -> dict | None:
    """An unstable row that would have beaten `best`: then no ratio can be stated for the case."""
    shaky = [b for b in rows if b.get("time_ms") and b.get("unstable")
             and (best is None or b["time_ms"] < best["time_ms"])]
    return min(shaky, key=lambda b: b["time_ms"]) if shaky else None


def reference_share(best: dict, copies: list[dict], sheet: dict | None) -> tuple[float, str, bool] | None:
    """(share, what the reference is, whether it is a ceiling) for one row: against the same run's copy
    where there is one (not a ceiling), otherwise against the datasheet roofline for the row's precision
    (a ceiling)."""
    t = best["time_ms"] * 1e-3
    copy = _fastest(copies)
    if copy and best.get("bytes") and copy.get("bytes"):
        what = "of the copy's bandwidth" if _COPY.search(copy["impl"]) else f"of the bandwidth of “{copy['impl']}”"
        return (best["bytes"] / t) / (copy["bytes"] / (copy["time_ms"] * 1e-3)), what, False
    if sheet is None or not (best.get("bytes") or best.get("flops")):
        return None
    prec = precision(best["impl"], best["case"])
    memory_bound = best.get("bytes", 0) / sheet["bandwidth"]
    compute_bound = best.get("flops", 0) / sheet["peak"][prec]
    if compute_bound >= memory_bound:
        return compute_bound / t, f"of the {PRECISION_NAMES[prec]} peak ({sheet['source']})", True
    return memory_bound / t, f"of the memory bandwidth ({sheet['source']})", True


def comparison_problems(rows: list[dict], own: set[int], opts: dict) -> list[str]:
    """What makes a results section's comparisons untrustworthy, one sentence each: per case, the best
    version, the best peer and the reference must come from one sitting on one GPU (rows carry `_where`,
    course/claims.py). Unstable rows are never picked (see _fastest)."""
    problems = []
    for case, r in roles(rows, own, opts).items():
        picked = [b for b in (_fastest(r["ours"]), _fastest(r["peer"]), _fastest(r["reference"])) if b]
        places = {b.get("_where") for b in picked}
        if len(places) > 1:
            problems.append(f"case {case!r} compares rows of {len(places)} runs: " + "; ".join(
                f"{b['impl']} ({b.get('_where_text', 'unknown run')})" for b in picked))
    return problems


def _ms(x: float) -> str:
    return f"{x:.3g} ms" if x < 1000 else f"{x / 1000:.3g} s"


def _ratio_text(speed: float) -> str:
    # One more decimal near parity, as near 100% below: 0.996× must not read as 1.00×.
    return f"{speed:.{3 if 0.95 <= speed <= 1.05 else 2}f}×"


def _above_ceiling(share: tuple[float, str, bool] | None) -> bool:
    """Faster than the datasheet roofline: the row counts nominal FLOPs or different bytes."""
    return bool(share) and share[2] and share[0] > 1.2


def _share_text(share: tuple[float, str, bool] | None) -> str:
    if not share:
        return ""
    if _above_ceiling(share):
        return "above the datasheet ceiling: the row's FLOP or byte count is nominal"
    pct = 100 * share[0]
    return f"{pct:.{1 if 95 <= pct <= 105 else 0}f}% {share[1]}"  # 99.6% must not read as 100%


def goals_paragraph(goals: list[dict]) -> str:
    """The goals a page states about these programs (claims with goal_min or goal_max, course/claims.py:
    goal_outcomes), met or missed, as the record stands: what the reader came for, so they lead."""
    if not goals:
        return ""
    met = sum(g["status"] == "met" for g in goals)
    parity = sum(g["status"] == "parity" for g in goals)
    lines = [f"**The goals this page states, as the record stands: {met} of {len(goals)} met"
             + (f", {parity} within the measured spread (parity)" if parity else "") + ".**", ""]
    lines += [f'- <span class="course-goal course-goal-{g["status"]}">{g["status"]}</span>: {g["text"]}'
              for g in goals]
    return "\n".join(lines) + "\n\n"


def headline(rows: list[dict], own: set[int], gpu: str, opts: dict, when: str = "",
             goals: list[dict] | None = None) -> tuple[str, str | None]:
    """The headline (markdown): the page's goals for these programs first, met or missed (goals_paragraph),
    then one sentence stating the result of the last case that compares with something (the record's
    order puts the largest size last), then a four-column table of every case that does, narrow enough
    for a phone; and the metric the plot should show ("tflops", "gbps" or "time_ms", following the
    reference the best versions are measured against). A case with neither a peer nor a reference
    states nothing a reader can judge: it is left to the full table, and with no such case at all the
    headline is only the goals."""
    sheet = datasheet_for(gpu) if opts.get("datasheet", "on") != "off" else None
    lines = ["| Case | Fastest version | Fastest peer | Result |", "|---|---|---|---|"]
    metrics, sentences, ratios = [], [], []
    measured = False  # any case with a row: then there is something to plot
    for case, r in roles(rows, own, opts).items():
        best, peer = _fastest(r["ours"]), _fastest(r["peer"])
        subject = best or peer  # a framework's own benchmark: its fastest configuration
        if subject is None:
            continue
        measured = True
        speed = peer["time_ms"] / best["time_ms"] if best and peer else None
        shaky = [u for u in (_faster_unstable(r["ours"], best), _faster_unstable(r["peer"], peer)) if u]
        share = reference_share(subject, r["reference"], sheet)
        if speed is None and not shaky and not share:
            continue  # nothing to compare with: the full table has the row
        if shaky:  # the true best may be a row whose timing did not reproduce: state no ratio
            speed = None
            ratio = "no ratio: " + "; ".join(f"{u['impl']} was faster but unstable" for u in shaky)
        else:
            ratio = f"**{_ratio_text(speed)}** the peer's speed" if speed is not None else ""
            if speed is not None:
                ratios.append(speed)
        if share and not _above_ceiling(share):
            metrics.append("tflops" if "peak" in share[1] else "gbps")
        cell = "; ".join(x for x in (ratio, _share_text(share)) if x)
        lines.append("| " + " | ".join([
            case, f"{best['impl']}, {_ms(best['time_ms'])}" if best else "(none: peers only)",
            f"{peer['impl']}, {_ms(peer['time_ms'])}" if peer else "no peer timed", cell,
        ]) + " |")
        # The sentence a reader wants first, for this case.
        where = f"on {gpu}" if gpu else ""
        where += f" ({when})" if when and where else ""
        if best and speed is not None:
            text = (f"At {case}, the fastest version ({best['impl']}) runs at **{_ratio_text(speed)}** the speed "
                    f"of the fastest peer ({peer['impl']})")
        elif best and peer and shaky:
            text = (f"At {case}, no speed ratio is stated for the fastest version ({best['impl']}): "
                    + "; ".join(f"{u['impl']} was faster but its timing did not reproduce" for u in shaky))
        elif best:
            text = f"At {case}, the fastest version is {best['impl']} ({_ms(best['time_ms'])})"
        else:
            text = f"At {case}, the fastest configuration is {peer['impl']} ({_ms(peer['time_ms'])})"
        if share and not _above_ceiling(share):
            text += f", reaching {_share_text(share)}"
        sentences.append(text + (f", measured {where}" if where else "") + ".")
    top = goals_paragraph(goals or [])
    if len(lines) == 2:
        return top, ("time_ms" if measured else None)
    lead = sentences[-1]
    if len(ratios) > 1:
        lo, hi = min(ratios), max(ratios)
        lead += (f" Over the {len(ratios)} cases the ratio runs from {_ratio_text(lo)} to {_ratio_text(hi)}."
                 if _ratio_text(lo) != _ratio_text(hi) else f" It is the same in all {len(ratios)} cases.")
    metric = max(set(metrics), key=metrics.count) if metrics else "time_ms"
    return top + '<p class="course-headline" markdown>' + lead + "</p>\n\n" + "\n".join(lines) + "\n", metric
