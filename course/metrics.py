"""What each quantity a chart or a headline shows means: its name in words, its unit, and which way is
better. The one table of it: plots, their captions and results headlines read it, never guess it from
a field's name, and a quantity that is not here is an error (say what it is here first).

`better` is "lower" (a time, a footprint), "higher" (a rate) or "" for a size on an axis, which no
caption may call best; `best` is how a caption names the best row of a role ("the fastest version").
"""

from __future__ import annotations

from dataclasses import dataclass

from course.svg import number


@dataclass(frozen=True)
class Metric:
    words: str        # "time per training step": an axis title, without its unit
    unit: str = ""    # "ms", "GB/s", "bytes" (drawn in KiB, MiB, GiB), "%", "×"; "" for a count
    better: str = ""  # "lower", "higher", or "" where neither is (a size)
    best: str = "the fastest {role}"  # the best row of a role, in a caption

    def axis(self) -> str:
        """The axis title: words and unit, "time per training step (ms)"."""
        return f"{self.words} ({self.unit})" if self.unit and self.unit != "×" else self.words

    def value(self, x: float) -> str:
        """A figure with its unit, as a caption states it: "3.5 ms", "2.01 GiB", "1.93×"."""
        if self.unit == "bytes":
            return binary_size(x)
        if self.unit in ("%", "×"):
            return f"{number(x)}{self.unit}"
        return f"{number(x)} {self.unit}".strip()

    def direction(self) -> str:
        return f"{self.better} is better" if self.better else ""


def binary_size(x: float) -> str:
    """A byte count in binary units: "1 KiB", "32.5 GiB"."""
    for power, suffix in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if abs(x) >= 1024 ** power:
            return f"{number(x / 1024 ** power)} {suffix}"
    return f"{number(x)} bytes"


_TIME = "the fastest {role}"
_LEAN = "the {role} that allocates the least"
METRICS: dict[str, Metric] = {
    # Measured (or derived from a row's time, bytes and FLOPs: course/site/rows.py).
    "time_ms": Metric("time per call", "ms", "lower", _TIME),
    "step_ms": Metric("time per training step", "ms", "lower", _TIME),
    "epoch_s": Metric("time per epoch", "s", "lower", _TIME),
    "gbps": Metric("bandwidth", "GB/s", "higher", _TIME),
    "tflops": Metric("throughput", "TFLOP/s", "higher", _TIME),
    "pct_peer": Metric("speed as a share of the peer's", "%", "higher", _TIME),
    "speedup": Metric("speed-up", "×", "higher", _TIME),
    "algbw_gbps": Metric("algorithm bandwidth", "GB/s", "higher", _TIME),
    "busbw_gbps": Metric("bus bandwidth", "GB/s", "higher", _TIME),
    **{f"busbw_gbps_{n}gpus": Metric(f"bus bandwidth on {n} GPUs", "GB/s", "higher", _TIME) for n in (2, 4, 8)},
    "alloc_bytes": Metric("memory allocated", "bytes", "lower", _LEAN),
    "test_accuracy": Metric("test accuracy", "%", "higher", "the most accurate {role}"),
    # Sizes: what a case is, on a chart's x axis.
    "size": Metric("problem size n"),
    "n": Metric("elements n"),
    "seq": Metric("sequence length (tokens)"),
    "batch": Metric("batch size"),
    "cols": Metric("row length (elements)"),
    "taps": Metric("filter taps"),
    "stride": Metric("stride (elements)"),
    "mib": Metric("buffer size", "MiB"),
    "size_bytes": Metric("message size", "bytes"),
}


class UnknownMetric(ValueError):
    pass


def metric(key: str) -> Metric:
    """The metric of a field; a field not in METRICS is an error, never silently called best."""
    try:
        return METRICS[key]
    except KeyError:
        raise UnknownMetric(f"{key!r} is not in course/metrics.py's METRICS: say there what it measures, "
                            f"its unit and whether lower or higher is better") from None
