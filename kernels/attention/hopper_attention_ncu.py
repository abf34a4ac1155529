# hopper_attention_ncu.py: the Hopper attention kernels as Nsight Compute (ncu) measures one launch of each
# on the chapter's benchmark case (b4 h16 s4096 d128, non-causal): duration, the tensor pipe's utilisation,
# achieved occupancy, how busy the SMs were over the launch, DRAM bytes and throughput, and the warps' main
# stall reasons.
#   --part forward   (default) what separates flash_hopper.cu's v4 ping-pong (one block per 128-row query
#                    tile) from v5 (persistent: one block per SM walking the tiles, O stored by TMA), in its
#                    first tile order (every head at once) and its L2-aware one (head after head)
#   --part backward  flash_hopper_bwd.cu's main kernel in versions 3 (dQ by atomics), 4 (bulk reductions,
#                    early dV, heads in groups) and 4 ordered (deterministic dQ)
#
# Taught in docs/attention/hopper-kernel.md and docs/attention/hopper-backward.md, which show its recorded
# output and read its BENCH rows (one per version, case "ncu b4 h16 s4096 d128 non-causal", + " backward"
# for the backward; time_ms is ncu's duration, bytes its DRAM bytes, and the fields are the metrics below,
# stalls in warp-cycles per issued instruction).
# It builds the program with the harness's build command and runs it with `--profile V` under ncu.
# Metrics this ncu does not know are left out (shown as "-").
# Run: python kernels/attention/hopper_attention_ncu.py [--part backward]
#
# course: gpu
# course: run
# course: bench --bench
# course: bench --bench --part backward
# course: measured bytes *_pct *_mb stall_*
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
import ncu_tools  # noqa: E402

CASE = "b4 h16 s4096 d128 non-causal"  # the programs' --profile shape: the benchmark's non-causal case
FLOPS = 4.0 * 4 * 16 * 4096 * 4096 * 128  # Q K^T and P V: 2 x 2 x batch x heads x seq^2 x dim
# Per part: the program, the BENCH rows' case and arithmetic (the backward's five products: 2.5 times the
# forward's), and its versions as (name, --profile argument, the kernel ncu profiles, the BENCH row's impl).
PARTS = {
    "forward": ("kernels/attention/flash_hopper.cu", CASE, FLOPS,
                [("v4", "pingpong", "regex:flash_fwd_hopper", "flash v4 ping-pong"),
                 ("v5-interl", "interleaved", "regex:flash_fwd_persistent", "flash v5 heads interleaved"),
                 ("v5", "persistent", "regex:flash_fwd_persistent", "flash v5 persistent")]),
    "backward": ("kernels/attention/flash_hopper_bwd.cu", CASE + " backward", 2.5 * FLOPS,
                 [("v3", "v3", "regex:flash_bwd_hopper", "flash bwd v3"),
                  ("v4", "v4", "regex:flash_bwd_hopper", "flash bwd v4"),
                  ("v4-ordered", "ordered", "regex:flash_bwd_hopper", "flash bwd v4 ordered")]),
}
STALLS = ncu_tools.WARP_STALLS
TOP_STALLS = 4  # the reasons printed per version, largest first
# The printed table's lines, (label, key, format), and the keys it prints in MB (bytes / 1e6).
TABLE = [("time us", "time_us", "{:.0f}"), ("tensor pipe %", "tensor_pct", "{:.1f}"),
         ("achieved occupancy %", "occupancy_pct", "{:.1f}"), ("SMs busy %", "sm_busy_pct", "{:.1f}"),
         ("DRAM read MB", "dram_read", "{:.0f}"), ("DRAM write MB", "dram_write", "{:.0f}"),
         ("DRAM throughput %", "dram_pct", "{:.1f}"), ("grid (blocks)", "grid", "{:.0f}"),
         ("registers", "registers", "{:.0f}")] + ncu_tools.stall_lines(STALLS)
MB_KEYS = {"dram_read", "dram_write"}
# --8<-- [start:metrics]
# Each quantity: the ncu metric names to try, the first this ncu knows is used (the tensor pipe's name
# differs between ncu versions; Hopper's wgmma runs on the "gmma" pipe).
METRICS = {
    "time_us": ["gpu__time_duration.sum"],
    "tensor_pct": ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                   "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],  # achieved occupancy
    "sm_active_avg": ["sm__cycles_active.avg"],  # cycles an SM had work, averaged over the SMs
    "sm_elapsed": ["sm__cycles_elapsed.max"],      # cycles of the launch
    "dram_read": ["dram__bytes_read.sum"],
    "dram_write": ["dram__bytes_write.sum"],
    "dram_pct": ["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "grid": ["launch__grid_size"],
    "registers": ["launch__registers_per_thread"],
    **{f"stall_{r}": [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"] for r in STALLS},
}
# --8<-- [end:metrics]


def main():
    p = course_tools.parser("profile the Hopper attention kernels with Nsight Compute: flash_hopper.cu's v4 "
                            "ping-pong and v5 (both tile orders), or flash_hopper_bwd.cu's versions")
    p.add_argument("--part", choices=sorted(PARTS), default="forward", help="which kernels (default forward)")
    # The same profile; the harness records a --bench run's rows for the page's claims (course/bench.py).
    p.add_argument("--bench", action="store_true", help="the recorded run whose rows the page's claims read")
    args = p.parse_args()
    source, case, flops, versions = PARTS[args.part]
    course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    ncu = ncu_tools.require_ncu()
    exe = ncu_tools.ROOT / "build/attention/ncu" / Path(source).stem
    ncu_tools.build(source, exe)
    wanted = ncu_tools.first_known(ncu, METRICS)
    rows, values = [], 0
    for v, which, kernel, impl in versions:
        got = ncu_tools.profile_one(ncu, exe, wanted, kernel, ["--profile", which], v)
        values += len(got)
        r = ncu_tools.row(got, wanted)
        r["sm_busy_pct"] = ncu_tools.sm_busy_pct(r)
        rows.append((v, impl, r))

    print(f"ncu metrics, {Path(source).name} on {case}, one launch per version "
          "(stalls: warp-cycles per issued instruction)")
    ncu_tools.print_versions(rows, TABLE, MB_KEYS)
    for v, _, r in rows:  # the stall reasons that cost each version the most issue slots
        top = sorted(((r[f"stall_{s}"], s) for s in STALLS if s not in ("selected", "not_selected")
                      and r.get(f"stall_{s}") is not None), reverse=True)[:TOP_STALLS]
        print(f"{v} top stalls: " + ", ".join(f"{s.replace('_', ' ')} {x:.2f}" for x, s in top))
    for v, impl, r in rows:  # one BENCH row per version: the page's sentences read these fields by name
        fields = {k: round(r[k], 4) for k in ["tensor_pct", "occupancy_pct", "sm_busy_pct", "dram_pct", "registers",
                                              "grid", *[f"stall_{s}" for s in STALLS]] if r.get(k) is not None}
        for k in ("dram_read", "dram_write"):  # in MB, as the table prints them
            if r.get(k) is not None:
                fields[f"{k}_mb"] = round(r[k] / 1e6, 1)
        dram = (r.get("dram_read") or 0) + (r.get("dram_write") or 0)
        course_tools.bench(f"ncu {case}", impl, (r.get("time_us") or 0) / 1e3, dram, flops, **fields)
    print(f"CHECK PASS ncu_metrics n={values} versions={len(rows)}")


if __name__ == "__main__":
    main()
