# sgemm_ncu.py: profiles versions 1 to 10 of sgemm.cu with Nsight Compute (ncu) at 4096^3 and prints
# one compact row per version: the evidence for "what limits this step" on the matmul pages.
#
# Taught in docs/fast-matmul-fft/ (every fp32 step page cites a column of this table).
# It builds sgemm.cu into build/matmul/ncu/, runs `sgemm --profile V` under ncu for each version, and
# reads the metrics from ncu's CSV. Metrics this ncu does not know are left out (shown as "-").
# Run: python kernels/matmul/sgemm_ncu.py
#
# course: gpu
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
# ncu_tools builds sgemm.cu with the test harness's own build command (course/programs.py), not the
# pages' `nvcc -arch=native -lcublas` line: the profiled code then has exactly the flags of the
# benchmark whose times the pages show, and cuBLAS is found where the toolkit lacks it.
import ncu_tools  # noqa: E402

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


def main():
    course_tools.parser(
        "profile sgemm.cu's versions at 4096^3 with Nsight Compute; one row of metrics each").parse_args()
    course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    ncu = ncu_tools.require_ncu()
    exe = ncu_tools.ROOT / "build/matmul/ncu/sgemm"
    ncu_tools.build("kernels/matmul/sgemm.cu", exe)
    wanted = ncu_tools.available(ncu, METRICS)
    rows, values = [], 0
    for v, args in PROFILES:
        got = ncu_tools.profile_one(ncu, exe, wanted, "regex:sgemm_",
                                    [*args, "--m", str(SIZE), "--n", str(SIZE), "--k", str(SIZE)], v)
        values += len(got)
        r = ncu_tools.row(got, wanted)
        r["sect_per_req"] = ncu_tools.per_request(r, "ld_sectors", "ld_requests")
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
        cells = ncu_tools.cells(r, cols)
        print(f"{v:<3} " + " ".join(f"{c:>11}" for c in cells))
    print(f"CHECK PASS ncu_metrics n={values} versions={len(rows)}")


if __name__ == "__main__":
    main()
