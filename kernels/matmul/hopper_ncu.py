# hopper_ncu.py: what separates gemm_hopper.cu's v3 (persistent, one block per SM) from v4 (clusters of two
# with TMA multicast of B) at 4096^3, as Nsight Compute (ncu) measures one launch of each: duration, the
# warps' main stall reasons, L2 and DRAM bytes, the tensor pipe's utilisation, how busy the SMs were over
# the launch (a cluster that could not start with the others shows as idle SMs), and the cluster figures
# ncu's launch and occupancy sections report.
#
# Taught in docs/fast-matmul-fft/hopper-gemm-clusters.md, which shows its recorded output and reads its BENCH
# rows (one per version, case "ncu 4096x4096x4096"; time_ms is ncu's duration, bytes its DRAM bytes, and
# the fields are the metrics below, stalls in warp-cycles per issued instruction).
# It builds gemm_hopper.cu with the harness's build command and runs `gemm_hopper --profile V` under ncu.
# Metrics this ncu does not know are left out (shown as "-").
# Run: python kernels/matmul/hopper_ncu.py
#
# course: gpu
# course: bench --bench
# course: measured bytes l2_bytes *_pct stall_*
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
import ncu_tools  # noqa: E402

SIZE = 4096
VERSIONS = [("v3", "hopper v3 persistent"), ("v4", "hopper v4 cluster multicast")]
STALLS = ncu_tools.WARP_STALLS
# The printed table's lines, (label, key, format), and the keys it prints in MB (bytes / 1e6).
TABLE = [("time us", "time_us", "{:.0f}"), ("DRAM read MB", "dram_read", "{:.0f}"),
         ("DRAM write MB", "dram_write", "{:.0f}"), ("L2 MB", "l2_bytes", "{:.0f}"),
         ("L2 hit %", "l2_hit_pct", "{:.1f}"), ("tensor pipe %", "tensor_pct", "{:.1f}"),
         ("SMs busy %", "sm_busy_pct", "{:.1f}"), ("grid (blocks)", "grid", "{:.0f}"),
         ("registers", "registers", "{:.0f}")] + ncu_tools.stall_lines(STALLS)
MB_KEYS = {"dram_read", "dram_write", "l2_bytes"}
# --8<-- [start:metrics]
# Each quantity: the ncu metric names to try, the first this ncu knows is used (the tensor pipe's name
# differs between ncu versions; Hopper's wgmma runs on the "gmma" pipe).
METRICS = {
    "time_us": ["gpu__time_duration.sum"],
    "dram_read": ["dram__bytes_read.sum"],
    "dram_write": ["dram__bytes_write.sum"],
    "l2_bytes": ["lts__t_bytes.sum"],
    "l2_hit_pct": ["lts__t_sector_hit_rate.pct"],
    "tensor_pct": ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                   "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "sm_active_avg": ["sm__cycles_active.avg"],  # cycles an SM had work, averaged over the SMs
    "sm_elapsed": ["sm__cycles_elapsed.max"],      # cycles of the launch
    "grid": ["launch__grid_size"],
    "registers": ["launch__registers_per_thread"],
    **{f"stall_{r}": [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"] for r in STALLS},
}
# --8<-- [end:metrics]


def cluster_figures(ncu, exe, args):
    """The launch and occupancy sections' metrics whose names mention clusters ({name: value}); none
    when this ncu cannot print them."""
    cmd = [ncu, "--csv", "--print-units", "base", "--print-metric-name", "name", "--section", "LaunchStats",
           "--section", "Occupancy", "-k", "regex:gemm_ws", "-c", "1", str(exe), *args]
    run = subprocess.run(cmd, cwd=ncu_tools.ROOT, capture_output=True, text=True)
    got = next(iter(ncu_tools.parse_csv(run.stdout).values()), ("", {}))[1]
    return {m: v for m, v in sorted(got.items()) if "cluster" in m.lower()}


def main():
    p = course_tools.parser("profile gemm_hopper.cu's v3 and v4 at 4096^3 with Nsight Compute")
    # The same profile; the harness records a --bench run's rows for the page's claims (course/bench.py).
    p.add_argument("--bench", action="store_true", help="the recorded run whose rows the page's claims read")
    p.parse_args()
    course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    ncu = ncu_tools.require_ncu()
    exe = ncu_tools.ROOT / "build/matmul/ncu/gemm_hopper"
    ncu_tools.build("kernels/matmul/gemm_hopper.cu", exe)
    wanted = ncu_tools.first_known(ncu, METRICS)
    size_args = ["--m", str(SIZE), "--n", str(SIZE), "--k", str(SIZE)]
    rows, values = [], 0
    for v, impl in VERSIONS:
        args = ["--profile", v[1:], *size_args]
        got = ncu_tools.profile_one(ncu, exe, wanted, "regex:gemm_ws", args, v)
        values += len(got)
        r = ncu_tools.row(got, wanted)
        r["sm_busy_pct"] = ncu_tools.sm_busy_pct(r)
        r["clusters"] = cluster_figures(ncu, exe, args)
        rows.append((v, impl, r))

    print(f"ncu metrics, gemm_hopper.cu at {SIZE}^3, one launch per version "
          "(stalls: warp-cycles per issued instruction)")
    ncu_tools.print_versions(rows, TABLE, MB_KEYS)
    for v, _, r in rows:
        for name, value in r["clusters"].items():
            print(f"{v} {name} = {value:g}")
    for v, impl, r in rows:  # one BENCH row per version: the page's sentences read these fields by name
        fields = {k: round(r[k], 4) for k in ["l2_bytes", "l2_hit_pct", "tensor_pct", "sm_busy_pct", "registers",
                                              "grid", *[f"stall_{s}" for s in STALLS]] if r.get(k) is not None}
        dram = (r.get("dram_read") or 0) + (r.get("dram_write") or 0)
        course_tools.bench(f"ncu {SIZE}x{SIZE}x{SIZE}", impl, (r.get("time_us") or 0) / 1e3, dram,
                           2.0 * SIZE ** 3, **fields)
    print(f"CHECK PASS ncu_metrics n={values} versions={len(rows)}")


if __name__ == "__main__":
    main()
