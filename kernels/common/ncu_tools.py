"""ncu_tools.py: what the course's Nsight Compute (ncu) metric tables share: finding ncu, building the
profiled program, running it under ncu, reading ncu's CSV, and turning metrics into table cells.

Used by the matmul chapter's sgemm_ncu.py and hopper_ncu.py, the attention chapter's
hopper_attention_ncu.py and the memory-model chapter's ladder_ncu.py, which choose what to profile, which
metrics to ask for and how to lay out their rows. (No course path is written out here: the harness
counts the files a Python module names in the hash of every program importing it.)

    require_ncu()                      ncu's path, or WAIVED (exit 2) when Nsight Compute is not installed
    build(source, exe)                 build a course program with the harness's own build command
    available(ncu, metrics)            the metrics this ncu knows for this GPU ({key: metric name})
    first_known(ncu, candidates)       {key: the first of its candidate metric names this ncu knows}
    profile(ncu, exe, metrics, ...)    run exe under ncu with --csv; the finished process
    parse_csv(text)                    {launch id: (kernel name, {metric name: value})}
    row(values, metrics)               {key: value}, time in microseconds and DRAM rate in GB/s
    per_request(r, sectors, requests)  32-byte sectors per memory request, or None
    sm_busy_pct(r)                     how busy the SMs were over the launch, in %, or None
    cells(r, columns)                  each column's formatted value, "-" where ncu gave none
    print_versions(rows, lines, mb_keys)  a table of metrics, one column per profiled version
    stall_lines(stalls)                its lines for the warp stall reasons
    WARP_STALLS                        the warp stall reasons the Hopper tables report
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for course.programs (the harness's build command)

# The warp stall reasons (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio) the Hopper
# kernels' tables report, in the order they print.
WARP_STALLS = ["long_scoreboard", "barrier", "membar", "wait", "sleeping", "math_pipe_throttle", "dispatch_stall",
               "short_scoreboard", "mio_throttle", "lg_throttle", "no_instruction", "branch_resolving", "misc",
               "selected", "not_selected"]


def require_ncu() -> str:
    """The path of ncu; without it, the program is waived (exit 2): the GPU run cannot profile."""
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).exists():
            return cand
    print("WAIVED ncu (Nsight Compute) is not installed")
    raise SystemExit(2)


def build(source: str, exe: Path) -> None:
    """Build ROOT/source into exe. The binary is built by the test harness's own build command
    (course/programs.py), not the pages' `nvcc -arch=native` line, for two reasons: the profiled code
    is then compiled with exactly the flags of the benchmark whose times the pages show (-O3 -lineinfo
    and the rest), and the harness finds libraries such as cuBLAS where the toolkit lacks them (NVIDIA's
    pip wheels), as on the machines that record these runs."""
    from course.programs import parse

    exe.parent.mkdir(parents=True, exist_ok=True)
    cmd = parse(ROOT / source).build_command("native")
    cmd[cmd.index("-o") + 1] = str(exe)
    subprocess.run(cmd, cwd=ROOT, check=True)


def available(ncu: str, metrics: dict[str, str]) -> dict[str, str]:
    """The entries of metrics whose base name this ncu reports for the current GPU (all of them when
    the query gives nothing): a name it does not know would fail the whole run. Launch statistics
    (launch__registers_per_thread, launch__grid_size, ...) describe the launch, not a hardware counter,
    and --query-metrics does not list them: they are always kept."""
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True).stdout
    known = {line.split()[0] for line in out.splitlines() if line and "__" in line.split()[0]}
    return {k: m for k, m in metrics.items() if not known or m.startswith("launch__") or m.split(".")[0] in known}


def first_known(ncu: str, candidates: dict[str, list[str]]) -> dict[str, str]:
    """{key: the first of its metric names this ncu knows} for every key this ncu can measure (a
    metric's name can differ between ncu versions, so a key may list several to try in order)."""
    flat = {f"{k}#{i}": m for k, names in candidates.items() for i, m in enumerate(names)}
    known = available(ncu, flat)
    out = {}
    for k, names in candidates.items():
        for i in range(len(names)):
            if f"{k}#{i}" in known:
                out[k] = names[i]
                break
    return out


# --8<-- [start:profile]
def profile(ncu: str, exe: Path, metrics: dict[str, str], kernels: str, args: list[str],
            launches: int | None = None) -> subprocess.CompletedProcess:
    """Run exe with args under ncu, collecting metrics (values in base units, as CSV) for the kernels
    whose names match the ncu filter `kernels` (e.g. "regex:sgemm_"), at most `launches` of them."""
    cmd = [ncu, "--csv", "--print-units", "base", "--metrics", ",".join(metrics.values()), "-k", kernels]
    if launches is not None:
        cmd += ["-c", str(launches)]
    return subprocess.run(cmd + [str(exe), *args], cwd=ROOT, capture_output=True, text=True)
# --8<-- [end:profile]


def parse_csv(text: str) -> dict[int, tuple[str, dict[str, float]]]:
    """{launch id: (kernel name, {metric: value})} from ncu's --csv output (the program's own lines,
    which do not start with a quote, are skipped; values that are not numbers are left out)."""
    launches = {}
    lines = [l for l in text.splitlines() if l.startswith('"')]
    for rec in csv.DictReader(io.StringIO("\n".join(lines))):
        try:
            value = float(rec["Metric Value"].replace(",", ""))
            key = int(rec["ID"])
        except (KeyError, ValueError):
            continue
        name = rec.get("Kernel Name", "").split("(")[0].strip()
        launches.setdefault(key, (name, {}))[1][rec["Metric Name"]] = value
    return launches


def profile_one(ncu: str, exe: Path, metrics: dict[str, str], kernels: str, args: list[str],
                name: str) -> dict[str, float]:
    """The metrics of one launch (profile with -c 1: the first launch that matches `kernels`). If ncu
    fails or measures nothing, prints why and a failing CHECK line ncu_<name>, and exits 1."""
    run = profile(ncu, exe, metrics, kernels, args, launches=1)
    got = next(iter(parse_csv(run.stdout).values()), ("", {}))[1]
    if run.returncode != 0 or not got:
        print(f"{name}: ncu failed (exit {run.returncode}): {(run.stderr or run.stdout)[-400:]}")
        print(f"CHECK FAIL ncu_{name} n=0")
        raise SystemExit(1)
    return got


def row(values: dict[str, float], metrics: dict[str, str]) -> dict[str, float | None]:
    """{key: value of its metric} for one launch (None where ncu gave none), with the time (key
    time_us, measured in ns) in microseconds and the DRAM rate (key dram_gbps, in bytes/s) in GB/s."""
    r = {k: values.get(m) for k, m in metrics.items()}
    if r.get("time_us") is not None:
        r["time_us"] /= 1e3  # ns -> us
    if r.get("dram_gbps") is not None:
        r["dram_gbps"] /= 1e9  # bytes/s -> GB/s
    return r


def per_request(r: dict, sectors: str, requests: str) -> float | None:
    """Sectors per request: 4 for a warp reading 32 consecutive floats, 32 for a fully scattered one."""
    if r.get(sectors) is not None and r.get(requests):
        return r[sectors] / r[requests]
    return None


def sm_busy_pct(r: dict) -> float | None:
    """The share of the launch the SMs had work (keys sm_active_avg, cycles an SM was active averaged
    over the SMs, and sm_elapsed, the launch's cycles), in %: blocks that could not start together
    show as idle SMs. None where ncu gave either figure none."""
    if r.get("sm_active_avg") is not None and r.get("sm_elapsed"):
        return 100.0 * r["sm_active_avg"] / r["sm_elapsed"]
    return None


def cells(r: dict, columns: list[tuple[str, str, str]]) -> list[str]:
    """For each (key, heading, format) column, the formatted value, or "-" where there is none."""
    return [(f.format(r[k]) if r.get(k) is not None else "-") for k, _, f in columns]



def stall_lines(stalls: list[str]) -> list[tuple[str, str, str]]:
    """print_versions's lines for the stall reasons (keys stall_<reason>, warp-cycles per issued
    instruction)."""
    return [(f"stall {s.replace('_', ' ')}", f"stall_{s}", "{:.2f}") for s in stalls]


def print_versions(rows: list[tuple], lines: list[tuple[str, str, str]], mb_keys: set[str]) -> None:
    """Print one table line per (label, key, format) of lines and one column per (version, ..., r) of
    rows, "-" where ncu gave none; the values of mb_keys (bytes) print in MB."""
    print(f"{'':<26}" + "".join(f"{row[0]:>12}" for row in rows))
    for label, key, fmt in lines:
        cells = []
        for *_, r in rows:
            x = r.get(key)
            cells.append(fmt.format(x / (1e6 if key in mb_keys else 1)) if x is not None else "-")
        print(f"{label:<26}" + "".join(f"{c:>12}" for c in cells))
