"""timeline_svg.py: draw the recorded GPU timelines of kernels/first-kernels/timeline.py as SVG figures.

Reads the program's passing run for its current code from records/gpu-record.json, and writes one
figure per TIMELINE line to docs/assets/figures/timeline-<trace>.svg: one lane per CUDA stream, one
bar per kernel, copy or memset, time left to right. Without such a run it writes a placeholder that
says so. Text and axes use currentColor (the pages inline the SVG, so it follows the light or dark
theme); bars use mid-tone colours legible on both. tests/test_timeline_svg.py checks that the
committed figures are what this script makes from the record.
Run: python scripts/timeline_svg.py           (after a GPU run that recorded timeline.py)
"""
from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course import programs, record  # noqa: E402

PROGRAM = "kernels/first-kernels/timeline.py"
FIGURES = ROOT / "docs" / "assets" / "figures"
TRACES = ("streams", "mnist-step")
# Mid-tone colours, distinguishable on white and on a dark background.
COPY_IN, COPY_OUT, MEMSET = "#3b82c4", "#d07a2a", "#8a8a8a"
KERNEL_COLOURS = ["#2e9e6a", "#8e62c8", "#c2507a", "#5a9a2a", "#b8962a", "#2a9aa8", "#a86a4a", "#6a7ad8"]
WIDTH, LEFT, RIGHT, TOP, LANE, AXIS = 760, 90, 16, 28, 22, 34


def recorded(rec: dict | None = None) -> tuple[dict[str, dict], str] | None:
    """({trace: {"names", "events"}}, where it was recorded) from the program's passing run, or None."""
    rec = record.load() if rec is None else rec
    prog = programs.program_for(PROGRAM)
    run = [r for r in prog.runs() if not r.bench][0]
    e = record.entry(rec, run.content_hash())
    if not e or e.get("outcome") != "passed" or not e.get("stdout"):
        return None
    traces = {}
    for line in e["stdout"].splitlines():
        if line.startswith("TIMELINE "):
            data = json.loads(line[len("TIMELINE "):])
            traces[data["trace"]] = data
    return traces, record.describe_run(record.run_info(rec, e))


def _colour(name: str, kernel_index: dict[str, int]) -> str:
    if name.startswith("Memcpy HtoD"):
        return COPY_IN
    if name.startswith("Memcpy"):
        return COPY_OUT
    if name.startswith("Memset"):
        return MEMSET
    return KERNEL_COLOURS[kernel_index.setdefault(name, len(kernel_index)) % len(KERNEL_COLOURS)]


def _nice_step(span: float) -> float:
    raw = span / 6
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def svg(trace: dict, title: str, where: str) -> str:
    names, events = trace["names"], trace["events"]
    streams = list(dict.fromkeys(ev[0] for ev in events))  # in order of first use
    end = max(ev[1] + ev[2] for ev in events) or 1.0
    height = TOP + LANE * len(streams) + AXIS + 18
    x = lambda t: LEFT + t / end * (WIDTH - LEFT - RIGHT)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
           f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11" class="course-timeline">',
           f'<title>{escape(title)}</title>',
           f'<text x="{LEFT}" y="16" fill="currentColor" font-size="12">{escape(title)}</text>']
    for i, s in enumerate(streams):
        y = TOP + i * LANE
        out.append(f'<text x="{LEFT - 6}" y="{y + LANE / 2 + 4:.1f}" fill="currentColor" text-anchor="end">stream {s}</text>')
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y + LANE - 1}" y2="{y + LANE - 1}" stroke="currentColor" '
                   f'stroke-opacity="0.15"/>')
    kernel_index: dict[str, int] = {}
    for stream, start, dur, k in events:
        y = TOP + streams.index(stream) * LANE + 3
        w = max(0.8, x(start + dur) - x(start))
        out.append(f'<rect x="{x(start):.2f}" y="{y}" width="{w:.2f}" height="{LANE - 7}" '
                   f'fill="{_colour(names[k], kernel_index)}"><title>{escape(names[k])}: {dur:g} us at {start:g} us'
                   f'</title></rect>')
    axis_y = TOP + LANE * len(streams) + 4
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis_y}" y2="{axis_y}" stroke="currentColor"/>')
    step = _nice_step(end)
    t = 0.0
    while t <= end + 1e-9:
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{axis_y}" y2="{axis_y + 4}" stroke="currentColor"/>')
        out.append(f'<text x="{x(t):.1f}" y="{axis_y + 15}" fill="currentColor" text-anchor="middle">{t:g}</text>')
        t += step
    out.append(f'<text x="{WIDTH - RIGHT}" y="{axis_y + 28}" fill="currentColor" text-anchor="end" font-size="10">'
               f'time (µs) · PyTorch profiler trace recorded on {escape(where)}</text>')
    legend = [("copy in", COPY_IN), ("copy out", COPY_OUT)] + [(n, c) for n, c in (
        (n, KERNEL_COLOURS[i % len(KERNEL_COLOURS)]) for n, i in kernel_index.items())][:6]
    lx = 4.0
    for label, colour in legend:
        if not any(names[k].startswith("Memcpy") for *_, k in events) and label.startswith("copy"):
            continue
        out.append(f'<rect x="{lx:.0f}" y="{axis_y + 20}" width="9" height="9" fill="{colour}"/>')
        out.append(f'<text x="{lx + 12:.0f}" y="{axis_y + 28}" fill="currentColor" font-size="10">{escape(label[:18])}</text>')
        lx += 16 + 6 * min(len(label), 18)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def placeholder(trace: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} 40" width="100%" role="img" '
            f'aria-label="timeline {trace}: not recorded yet" font-family="sans-serif" font-size="12">\n'
            f'<text x="8" y="24" fill="currentColor">[not measured yet: awaiting a GPU run of {PROGRAM} '
            f'(timeline "{trace}")]</text>\n</svg>\n')


TITLES = {"streams": "8 chunks on 4 streams: copy in, compute, copy out",
          "mnist-step": "one MNIST training step (batch 64), kernels in launch order"}


def output_path(trace: str) -> Path:
    """Where the figure of one trace is written."""
    return FIGURES / f"timeline-{trace}.svg"


def outputs() -> list[Path]:
    """Every figure this script owns (tests/test_figures.py accepts these beside those of course/figures/)."""
    return [output_path(trace) for trace in TRACES]


def figures(rec: dict | None = None) -> dict[Path, str]:
    """{figure path: SVG text} as the record says now."""
    found = recorded(rec)
    out = {}
    for trace in TRACES:
        path = output_path(trace)
        if found and trace in found[0] and found[0][trace]["events"]:
            out[path] = svg(found[0][trace], TITLES[trace], found[1])
        else:
            out[path] = placeholder(trace)
    return out


def main() -> int:
    FIGURES.mkdir(parents=True, exist_ok=True)
    for path, text in figures().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
