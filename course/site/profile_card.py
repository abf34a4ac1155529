"""`<!-- course:profile-card LABEL [vs=OTHER] -->`: what Nsight Compute measured on one launch of a kernel
of the chapter's main path, as a compact card, from the record's passing run of
kernels/profiling/profile_cards_ncu.py for its current code (course/profile_cards.py lists the kernels).

The card shows the kernel's time; SM and memory throughput as % of peak (ncu's speed of light, two
bars); achieved against theoretical occupancy and the resource that limits it (the smallest of the
launch's occupancy limits); the three largest warp stall reasons in words; DRAM and L2 bytes; the
arithmetic intensity (FLOPs the instruction and tensor-core counters counted, over DRAM bytes) against
the ridge point of the GPU's datasheet (peak FLOP/s of the class that did most of the FLOPs over the
memory bandwidth, course/headline.py's DATASHEETS); and one generated sentence saying what bounds it.

What bounds a kernel (verdict(); the thresholds live here and nowhere else):

- compute-bound: SM throughput is at least HIGH_PCT of peak and at least the memory throughput;
- memory-bound: memory throughput is at least HIGH_PCT of peak, above SM throughput, and the intensity
  is below the ridge (or no FLOPs were counted);
- bound by on-chip memory: memory throughput is that high, but the DRAM intensity is above the ridge (or
  FLOPs were counted and no DRAM bytes), so L1, shared memory or L2 traffic (which ncu's memory
  throughput includes) sets the time, not DRAM;
- latency-bound: both throughputs are below HIGH_PCT: neither unit is busy enough to be the limit, and
  the warps mostly wait (the top stall reason says on what).

HIGH_PCT is 60%: a unit that busy is the likely limit, while a kernel whose units are both below it
leaves most of the GPU idle, the usual sign of exposed latency (too few warps, or dependent waits).

With vs=OTHER the page shows the two cards side by side and a table of what changed between them.
Where the record has no such run, a card is one short line saying it awaits a GPU run.
"""

from __future__ import annotations

import functools
import html
import math

from course import headline, profile_cards, programs, record
from course.svg import number

PROGRAM = "kernels/profiling/profile_cards_ncu.py"
HIGH_PCT = 60.0  # a throughput at or above this % of peak is what bounds the kernel
TOP_STALLS = 3
# The warp stall reasons (ncu_tools.WARP_STALLS) in words. "selected" is a warp issuing, not a stall.
STALL_WORDS = {
    "long_scoreboard": "waiting for global or local memory (long scoreboard)",
    "short_scoreboard": "waiting for shared memory or a special function (short scoreboard)",
    "barrier": "waiting at a block barrier",
    "membar": "waiting at a memory fence",
    "wait": "fixed-latency dependencies (wait)",
    "sleeping": "asleep (nanosleep or an mbarrier wait)",
    "math_pipe_throttle": "a busy math pipe (math pipe throttle)",
    "dispatch_stall": "the dispatcher (dispatch stall)",
    "mio_throttle": "a full shared-memory queue (MIO throttle)",
    "lg_throttle": "a full global-memory queue (LG throttle)",
    "no_instruction": "instruction fetch (no instruction)",
    "branch_resolving": "branch resolution",
    "misc": "miscellaneous reasons",
    "not_selected": "another warp issuing (not selected)",
}
LIMITS = {"limit_registers": "registers", "limit_shared_mem": "shared memory", "limit_warps": "warps per SM",
          "limit_blocks": "blocks per SM"}
# The FLOP classes the program counts (its flops_* fields) and the datasheet peak each is held to;
# fp16 on the CUDA cores has no datasheet peak in DATASHEETS, so it gets no ridge.
CLASS_PEAK = {"fp32": "fp32", "fp64": "fp64", "16bit": "16-bit", "tf32": "tf32", "fp8": "fp8"}
CLASS_WORDS = {"fp32": "FP32", "fp64": "FP64", "fp16": "FP16 on the CUDA cores", "16bit": "BF16/FP16 tensor",
               "tf32": "TF32 tensor", "fp8": "FP8 tensor"}


@functools.lru_cache(maxsize=1)
def _run_hashes() -> tuple[str, ...]:
    """The content hashes of the program's declared runs (computing them reads every profiled
    program's sources: once a build, not once a card)."""
    return tuple(run.content_hash() for run in programs.program_for(PROGRAM).runs())


def recorded_card(label: str, rec: dict) -> tuple[dict, str, str] | None:
    """(the BENCH row of a card, the run's description, the GPU's name) from a passing run of the
    program for its current code, or None."""
    for h in _run_hashes():
        e = record.entry(rec, h)
        e = e if e and e["outcome"] == "passed" else None
        row = next((b for b in (e or {}).get("benchmarks", []) if b.get("impl") == label), None)
        if row is not None:
            return row, record.describe_entry(rec, e), record.run_info(rec, e).get("gpu") or ""
    return None


def dominant_class(row: dict) -> str | None:
    counted = {k[len("flops_"):]: v for k, v in row.items() if k.startswith("flops_") and v}
    return max(counted, key=counted.get) if counted else None


def roofline(row: dict, gpu: str) -> dict:
    """The kernel's point: intensity (FLOP/byte of DRAM traffic), the class of its FLOPs, and the
    datasheet's ridge for that class (None where a figure is missing)."""
    dram = (row.get("dram_read") or 0) + (row.get("dram_write") or 0)
    flops = row.get("flops") or 0
    cls = dominant_class(row)
    sheet = headline.datasheet_for(gpu)
    peak = sheet["peak"].get(CLASS_PEAK.get(cls or "fp32", "")) if sheet else None
    # No DRAM byte at all: arithmetic that never left the chip (infinite intensity), or nothing to place.
    intensity = flops / dram if dram else (math.inf if flops else None)
    return {"intensity": intensity, "flops": flops, "class": cls,
            "ridge": peak / sheet["bandwidth"] if peak and sheet else None,
            "peak": peak, "source": sheet["source"] if sheet else None}


def top_stalls(row: dict, n: int = TOP_STALLS) -> list[tuple[str, float]]:
    stalls = [(k[len("stall_"):], v) for k, v in row.items()
              if k.startswith("stall_") and k[len("stall_"):] in STALL_WORDS and isinstance(v, (int, float))]
    return sorted(stalls, key=lambda s: -s[1])[:n]


def limiter(row: dict) -> tuple[list[str], float] | None:
    """The resources whose occupancy limit (blocks per SM) is the smallest, and that limit."""
    limits = {words: row[k] for k, words in LIMITS.items() if isinstance(row.get(k), (int, float))}
    if not limits:
        return None
    least = min(limits.values())
    return [w for w, v in limits.items() if v == least], least


def _pct(x: float) -> str:
    return f"{x:.0f}%"


def verdict(row: dict, ridge: float | None, intensity: float | None) -> tuple[str, str]:
    """(kind, sentence): what bounds the kernel, by the rules in the module's docstring."""
    sm, mem = row.get("sm_pct"), row.get("mem_pct")
    if sm is None or mem is None:
        return "unknown", ("Nsight Compute gave no speed-of-light figures for this launch, so nothing here says "
                           "what bounds it.")
    if max(sm, mem) < HIGH_PCT:
        stalls = top_stalls(row, 1)
        why = f"; the largest stall: {STALL_WORDS[stalls[0][0]]}" if stalls else ""
        return "latency", (f"Latency-bound: neither the SMs ({_pct(sm)} of peak) nor memory ({_pct(mem)}) reach "
                           f"{_pct(HIGH_PCT)}, so no unit is busy enough to be the limit{why}.")
    if sm >= mem:
        return "compute", (f"Compute-bound: the SMs run at {_pct(sm)} of their peak, at or above memory's "
                           f"{_pct(mem)}; faster arithmetic, not fewer bytes, would shorten it.")
    if intensity is not None and ridge is not None and intensity >= ridge:
        dram = ("it moved no DRAM bytes" if math.isinf(intensity) else
                f"its {intensity:.3g} FLOP per DRAM byte are above the ridge ({ridge:.3g})")
        return "on-chip", (f"Bound by on-chip memory: memory throughput is {_pct(mem)} of peak while {dram}: "
                           f"L1, shared memory or L2 traffic, not DRAM, sets its time.")
    if intensity and ridge:
        below = f"its {intensity:.3g} FLOP per byte are below the ridge ({ridge:.3g})"
    elif intensity:
        below = f"its {intensity:.3g} FLOP per byte have no datasheet ridge to compare with"
    else:
        below = "it does little or no floating-point arithmetic per byte"
    return "memory", (f"Memory-bound: memory throughput is {_pct(mem)} of peak and {below}: the bytes it "
                      f"moves, not its arithmetic, set its time.")


def _bar(name: str, value: float | None) -> str:
    width = max(0.0, min(100.0, value or 0.0))
    shown = _pct(value) if value is not None else "-"
    return (f'<div class="course-card-bar"><span class="course-card-bar-name">{name}</span>'
            f'<span class="course-card-bar-track"><span class="course-card-bar-fill" style="width: {width:.0f}%">'
            f'</span></span><span class="course-card-bar-value">{shown}</span></div>')


def _bytes(x: float | None) -> str:
    """A byte count in the unit that keeps it readable: 2.73 GB, 68.3 MB, 256 B (never 2.73e+03 MB)."""
    if x is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{number(x / scale)} {unit}"
    return f"{x:.0f} B"


def card_body(card: profile_cards.CardKernel, row: dict, where: str, gpu: str) -> str:
    point = roofline(row, gpu)
    kind, sentence = verdict(row, point["ridge"], point["intensity"])
    occ, theo = row.get("occupancy_pct"), row.get("occupancy_theoretical_pct")
    limit = limiter(row)
    occupancy = f"achieved {_pct(occ) if occ is not None else '-'} of the SM's warps"
    occupancy += f", theoretical {_pct(theo)}" if theo is not None else ""
    if limit and (theo is None or theo < 99.5):  # at full theoretical occupancy no resource limits it
        blocks = f"{limit[1]:.0f} block{'' if round(limit[1]) == 1 else 's'} per SM"
        occupancy += f"; limited by {' and '.join(limit[0])} ({blocks})"
    stalls = "; ".join(f"{STALL_WORDS[s]} {v:.2f}" for s, v in top_stalls(row)) or "-"
    dram = (row.get("dram_read") or 0) + (row.get("dram_write") or 0)
    if point["intensity"] is None or math.isinf(point["intensity"]):
        intensity = "no DRAM traffic counted"
    elif not point["flops"]:
        intensity = "0 FLOP/byte: no floating-point arithmetic counted"
    else:
        intensity = f"{point['intensity']:.3g} FLOP/byte, mostly {CLASS_WORDS.get(point['class'], point['class'])}"
        if point["ridge"]:
            achieved = point["flops"] / (row["time_ms"] * 1e-3)  # FLOP/s over the launch
            side = "above" if point["intensity"] >= point["ridge"] else "below"
            intensity += (f"; {side} the ridge at {point['ridge']:.3g} FLOP/byte ({point['source']}: peak over "
                          f"bandwidth); it reached {100 * achieved / point['peak']:.2g}% of that peak")
    items = [("Occupancy", occupancy), ("Top stalls (warp-cycles per instruction)", stalls),
             ("DRAM", f"{_bytes(row.get('dram_read'))} read + {_bytes(row.get('dram_write'))} written = {_bytes(dram)}; "
                      f"L2 {_bytes(row.get('l2_bytes'))}"),
             ("Roofline", intensity)]
    lines = "".join(f"<li><strong>{html.escape(k)}:</strong> {html.escape(v)}</li>" for k, v in items)
    return (f'<p class="course-card-title"><strong>{html.escape(card.title)}</strong> · '
            f'<code>{html.escape(row.get("kernel") or card.kernel)}</code> · {number(row["time_ms"] * 1e3)} µs</p>'
            f'{_bar("SM throughput", row.get("sm_pct"))}{_bar("Memory throughput", row.get("mem_pct"))}'
            f'<ul>{lines}</ul><p class="course-card-verdict course-card-{kind}">{html.escape(sentence)}</p>'
            f'<p class="course-card-source">One launch profiled by Nsight Compute on {html.escape(where)}: '
            f'<code>{html.escape(card.command)}</code>'
            + (f" (a stand-in launch: {html.escape(card.needs_mode)})" if card.needs_mode else "") + "</p>")


def _card(label: str, rec: dict) -> tuple[str, dict | None]:
    card = profile_cards.BY_LABEL.get(label)
    if card is None:
        raise ValueError(f"course:profile-card names {label!r}, which course/profile_cards.py does not list")
    found = recorded_card(label, rec)
    if found is None:
        return (f'<p class="course-card-missing" data-card="{html.escape(label)}">Profile card '
                f'<strong>{html.escape(card.title)}</strong>: awaits a GPU run of <code>{PROGRAM}</code> for its '
                f'current code.</p>'), None
    row, where, gpu = found
    return (f'<div class="course-card" data-card="{html.escape(label)}">{card_body(card, row, where, gpu)}</div>',
            {**row, "_gpu": gpu})


# What the vs= table compares: (label, how to read it from a row, format)
_COMPARED = [
    ("Time (µs)", lambda r: r["time_ms"] * 1e3, "number"),
    ("SM throughput", lambda r: r.get("sm_pct"), "{:.0f}%"),
    ("Memory throughput", lambda r: r.get("mem_pct"), "{:.0f}%"),
    ("Achieved occupancy", lambda r: r.get("occupancy_pct"), "{:.0f}%"),
    ("Registers per thread", lambda r: r.get("registers"), "{:.0f}"),
    ("DRAM (MB)", lambda r: ((r.get("dram_read") or 0) + (r.get("dram_write") or 0)) / 1e6, "number"),
    ("L2 (MB)", lambda r: r["l2_bytes"] / 1e6 if r.get("l2_bytes") is not None else None, "number"),
    ("FLOP per DRAM byte", lambda r: roofline(r, r["_gpu"])["intensity"], "number"),
]


def changes(a: dict, b: dict) -> list[tuple[str, str, str, str]]:
    """(field, A, B, change) for each compared field both rows have: a ratio for amounts, points for %."""
    out = []
    for name, get, fmt in _COMPARED:
        x, y = get(a), get(b)
        if x is None or y is None:
            continue
        if fmt.endswith("%"):
            change = f"{y - x:+.0f} points"
        else:
            change = f"×{y / x:.3g}" if x and math.isfinite(x) and math.isfinite(y) else "-"
        show = number if fmt == "number" else fmt.format
        out.append((name, show(x), show(y), change))
    sa, sb = top_stalls(a, 1), top_stalls(b, 1)
    if sa and sb:
        out.append(("Top stall", sa[0][0].replace("_", " "), sb[0][0].replace("_", " "),
                    "same" if sa[0][0] == sb[0][0] else "changed"))
    ka = verdict(a, roofline(a, a["_gpu"])["ridge"], roofline(a, a["_gpu"])["intensity"])[0]
    kb = verdict(b, roofline(b, b["_gpu"])["ridge"], roofline(b, b["_gpu"])["intensity"])[0]
    out.append(("Bound by", ka, kb, "same" if ka == kb else "changed"))
    return out


def profile_card(label: str, vs: str | None, rec: dict) -> str:
    """The directive's HTML: one card, or two side by side with what changed between them."""
    first, row_a = _card(label, rec)
    if not vs:  # (a blank line first: the card is a raw HTML block, never part of a paragraph above it)
        return "\n" + first + "\n"
    second, row_b = _card(vs, rec)
    if row_a is None and row_b is None:  # one short line for both, not two
        a, b = profile_cards.BY_LABEL[label].title, profile_cards.BY_LABEL[vs].title
        return (f'\n<p class="course-card-missing" data-card="{html.escape(label)}" data-vs="{html.escape(vs)}">'
                f'Profile cards <strong>{html.escape(a)}</strong> and <strong>{html.escape(b)}</strong>: await a GPU '
                f'run of <code>{PROGRAM}</code> for its current code.</p>\n')
    text = f'\n<div class="course-card-pair">{first}{second}</div>\n'
    if row_a and row_b:
        a, b = profile_cards.BY_LABEL[label].title, profile_cards.BY_LABEL[vs].title
        head = (f"<tr><th>What changed</th><th>{html.escape(a)}</th><th>{html.escape(b)}</th>"
                f"<th>Change</th></tr>")
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in changes(row_a, row_b))
        text += (f'\n<table class="course-card-changes" data-cards="{html.escape(label)} {html.escape(vs)}">'
                 f"{head}{body}</table>\n")
    return text
