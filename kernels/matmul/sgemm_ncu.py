# sgemm_ncu.py: profiles versions 1 to 10 of sgemm.cu with Nsight Compute (ncu) at 4096^3 and prints
# one compact row per version: the evidence for "what limits this step" on the matmul pages.
#
# Taught in docs/fast-matmul-fft/ (every fp32 step page cites a column of this table).
# It builds sgemm.cu into build/matmul/ncu/, runs `sgemm --profile V` under ncu for each version, and
# reads the metrics from ncu's CSV. Metrics this ncu does not know are left out (shown as "-").
# Run: python kernels/matmul/sgemm_ncu.py
#
# course: gpu
import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "kernels" / "common"))
import course_tools  # noqa: E402
# The binary is built by the test harness's own build command (course/programs.py), not the pages'
# `nvcc -arch=native -lcublas` line, for two reasons: the profiled code is then compiled with exactly the
# flags of the benchmark whose times the pages show (-O3 -lineinfo and the rest), and the harness finds
# cuBLAS where the toolkit lacks it (NVIDIA's pip wheels), as on the machines that record these runs.
from course.programs import parse  # noqa: E402

SIZE = 4096
# What each row launches. v9 and v10 are autotuned; profiling them through the autotuner would catch a
# trial launch, so their rows launch one candidate directly (--cand): v9's pick at 4096^3 in the
# course's recorded run (the AUTOTUNE lines of sgemm.cu --bench), and v10's kernel on the same tile.
PROFILES = [(f"v{v}", ["--profile", str(v)]) for v in range(1, 9)] + [
    ("v9", ["--profile", "9", "--cand", "6"]),    # 128x256x8, warps 64x64
    ("v10", ["--profile", "10", "--cand", "0"]),  # the same tile with the fragments prefetched
]
# --8<-- [start:metrics]
METRICS = {
    "time_us": "gpu__time_duration.sum",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "mem_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "smem_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "fma_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "stall_mio": "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "stall_lg": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "stall_short": "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "stall_barrier": "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
}
# --8<-- [end:metrics]


def find_ncu():
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).exists():
            return cand
    return None


def known_metrics(ncu):
    """Base names this ncu reports for the current GPU, to drop names it does not know."""
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line and "__" in line.split()[0]}


def main():
    course_tools.parser("profile sgemm.cu's versions at 4096^3 with Nsight Compute; one row of metrics each").parse_args()
    course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    ncu = find_ncu()
    if ncu is None:
        print("WAIVED ncu (Nsight Compute) is not installed")
        raise SystemExit(2)
    prog = parse(ROOT / "kernels/matmul/sgemm.cu")
    exe = ROOT / "build/matmul/ncu/sgemm"
    exe.parent.mkdir(parents=True, exist_ok=True)
    cmd = prog.build_command("native")
    cmd[cmd.index("-o") + 1] = str(exe)
    subprocess.run(cmd, cwd=ROOT, check=True)
    known = known_metrics(ncu)
    wanted = {k: m for k, m in METRICS.items() if not known or m.split(".")[0] in known}
    rows, values = [], 0
    for v, args in PROFILES:
        run = subprocess.run(
            [ncu, "--csv", "--print-units", "base", "--metrics", ",".join(wanted.values()),
             "-k", "regex:sgemm_", "-c", "1", str(exe), *args,
             "--m", str(SIZE), "--n", str(SIZE), "--k", str(SIZE)],
            cwd=ROOT, capture_output=True, text=True)
        got = {}
        lines = [l for l in run.stdout.splitlines() if l.startswith('"')]
        for rec in csv.DictReader(io.StringIO("\n".join(lines))):
            try:
                got[rec["Metric Name"]] = float(rec["Metric Value"].replace(",", ""))
            except (KeyError, ValueError):
                pass
        if run.returncode != 0 or not got:
            print(f"{v}: ncu failed (exit {run.returncode}): {(run.stderr or run.stdout)[-400:]}")
            print(f"CHECK FAIL ncu_{v} n=0")
            raise SystemExit(1)
        values += len(got)
        r = {k: got.get(m) for k, m in wanted.items()}
        if r.get("ld_sectors") is not None and r.get("ld_requests"):
            r["sect_per_req"] = r["ld_sectors"] / r["ld_requests"]
        if r.get("time_us") is not None:
            r["time_us"] /= 1e3  # ns -> us
        rows.append((v, r))
    cols = [("time_us", "time us", "{:.0f}"), ("sm_pct", "SM %", "{:.0f}"), ("mem_pct", "mem %", "{:.0f}"),
            ("dram_pct", "DRAM %", "{:.0f}"), ("sect_per_req", "sect/req", "{:.1f}"),
            ("smem_conflicts", "smem confl", "{:.2g}"), ("fma_pct", "FMA pipe %", "{:.0f}"),
            ("occupancy_pct", "occup %", "{:.0f}"), ("registers", "regs", "{:.0f}"),
            ("stall_lg", "stall L/G", "{:.1f}"), ("stall_mio", "stall MIO", "{:.1f}"),
            ("stall_short", "stall short", "{:.1f}"), ("stall_barrier", "stall bar", "{:.1f}")]
    print(f"ncu metrics, sgemm.cu at {SIZE}^3, one launch per version (stalls: cycles per issued instruction)")
    print("ver " + " ".join(f"{h:>11}" for _, h, _ in cols))
    for v, r in rows:
        cells = [(f.format(r[k]) if r.get(k) is not None else "-") for k, _, f in cols]
        print(f"{v:<3} " + " ".join(f"{c:>11}" for c in cells))
    print(f"CHECK PASS ncu_metrics n={values} versions={len(rows)}")


if __name__ == "__main__":
    main()
