# ladder_ncu.py: profiles every version of one memory-model ladder (transpose, reduction or softmax)
# with Nsight Compute (ncu) at the size its benchmark uses, and prints one compact row of metrics per
# version: the evidence for "what changed at this step" on the chapter's pages.
#
# Taught in docs/memory-model/transpose.md, reduction.md and softmax.md (each renders its ladder's
# recorded output). It builds the ladder's program (kernels/memory-model/transpose.cu,
# kernels/memory-model/reduction.cu, kernels/memory-model/softmax.cu) with the harness's own build
# command into build/memory-model/ncu/, runs its checked mode at the benchmark size under ncu, and
# keeps the first launch of each version's kernel. Metrics this ncu does not know are shown as "-".
# Run: python kernels/memory-model/ladder_ncu.py --ladder transpose
#
# course: gpu
# course: run --ladder transpose
# course: run --ladder reduction
# course: run --ladder softmax
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernels" / "common"))
import course_tools  # noqa: E402
import ncu_tools  # noqa: E402

# What each ladder runs (its checked mode at the benchmark's size: each version launches once or
# twice, never inside a timing loop) and which kernel is which version. The reduction's second-pass
# kernel (reduce_partials) and CUB are left out: the rows are about each version's main kernel.
LADDERS = {
    "transpose": ("kernels/memory-model/transpose.cu", ["--rows", "8192", "--cols", "8192"], [
        ("1 naive", "transpose_naive"), ("2 tiled", "transpose_tiled"), ("3 padded", "transpose_padded"),
        ("4 swizzled", "transpose_swizzled"), ("5 float4", "transpose_padded_vec4"),
        ("6 4 float4/thread", "transpose_padded_vec4_x4"), ("7 64x64 tile", "transpose_tile64_vec4")]),
    "reduction": ("kernels/memory-model/reduction.cu", ["--n", str(1 << 28)], [
        ("1 atomic", "reduce_atomic"), ("2 shared tree", "reduce_shared"), ("3 warp shuffles", "reduce_warp"),
        ("4 float4", "reduce_vec4"), ("5 float4 x4", "reduce_vec4_x4"), ("6 chunks x4", "reduce_chunks_x4"),
        ("6b chunks x8", "reduce_chunks_x8"), ("7 fused", "reduce_chunks_x4_fused")]),
    "softmax": ("kernels/memory-model/softmax.cu", ["--rows", "8192", "--cols", "8192"], [
        ("1 naive", "softmax_naive"), ("2 online", "softmax_online"), ("3 warp/row", "softmax_warp"),
        ("4 block/row", "softmax_block"), ("5 registers", "softmax_block_regs_256x32"),
        ("5b float4 256", "softmax_block_regs_v4_256x8"), ("5c float4 512", "softmax_block_regs_v4_512x4")]),
}
# --8<-- [start:metrics]
STALLS = ["long_scoreboard", "lg_throttle", "mio_throttle", "short_scoreboard", "barrier", "membar", "wait",
          "math_pipe_throttle", "not_selected", "drain", "no_instruction", "tex_throttle"]
METRICS = {
    "time_us": "gpu__time_duration.sum",
    "dram_gbps": "dram__bytes.sum.per_second",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "st_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "smem_ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    **{f"stall_{s}": f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS},
}
# --8<-- [end:metrics]


def row_of(metrics, wanted):
    r = ncu_tools.row(metrics, wanted)
    for kind in ("ld", "st"):
        r[f"{kind}_sect_per_req"] = ncu_tools.per_request(r, f"{kind}_sectors", f"{kind}_requests")
    stalls = sorted(((r[f"stall_{s}"], s) for s in STALLS if r.get(f"stall_{s}") is not None), reverse=True)
    r["top_stalls"] = ", ".join(f"{s} {v:.1f}" for v, s in stalls[:2]) if stalls else "-"
    return r


COLUMNS = [("time_us", "time us", "{:.0f}"), ("dram_gbps", "DRAM GB/s", "{:.0f}"), ("dram_pct", "DRAM %", "{:.0f}"),
           ("ld_sect_per_req", "ld sect/req", "{:.1f}"), ("st_sect_per_req", "st sect/req", "{:.1f}"),
           ("smem_ld_conflicts", "smem ld confl", "{:.3g}"), ("smem_st_conflicts", "smem st confl", "{:.3g}"),
           ("occupancy_pct", "occup %", "{:.0f}"), ("registers", "regs", "{:.0f}")]


def main():
    p = course_tools.parser("profile one memory-model ladder with Nsight Compute; one row of metrics per version")
    p.add_argument("--ladder", choices=sorted(LADDERS), help="which ladder to profile (required)")
    args = p.parse_args()
    if args.ladder is None:
        p.error("--ladder is required")
    course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    ncu = ncu_tools.require_ncu()
    source, run_args, versions = LADDERS[args.ladder]
    exe = ROOT / "build/memory-model/ncu" / Path(source).stem
    ncu_tools.build(source, exe)
    wanted = ncu_tools.available(ncu, METRICS)
    names = [k for _, k in versions]
    run = ncu_tools.profile(ncu, exe, wanted, "regex:^(" + "|".join(names) + ")$", run_args)
    if run.returncode != 0:
        print(f"ncu failed (exit {run.returncode}): {(run.stderr or run.stdout)[-600:]}")
        print(f"CHECK FAIL ncu_{args.ladder} n=0")
        raise SystemExit(1)
    first = {}  # kernel name -> metrics of its first profiled launch
    for _, (name, metrics) in sorted(ncu_tools.parse_csv(run.stdout).items()):
        first.setdefault(name, metrics)
    # The profiled program checks its own results: its CHECK lines pass through, so a wrong kernel
    # fails this run too.
    checks = [l for l in run.stdout.splitlines() if l.startswith("CHECK ")]
    print(f"ncu metrics, {Path(source).name} {' '.join(run_args)}, first launch of each version's kernel")
    print("(sect/req: 32-byte sectors per global load or store request; stalls: cycles per issued instruction)")
    print(f"{'version':<18} " + " ".join(f"{h:>13}" for _, h, _ in COLUMNS) + "  top stalls")
    missing = []
    for label, kernel in versions:
        if kernel not in first:
            missing.append(kernel)
            continue
        r = row_of(first[kernel], wanted)
        cells = ncu_tools.cells(r, COLUMNS)
        print(f"{label:<18} " + " ".join(f"{c:>13}" for c in cells) + f"  {r['top_stalls']}")
    for line in checks:
        print(line.replace("CHECK PASS ", "program check passed: ").replace("CHECK FAIL ", "program check FAILED: "))
    ok_program = course_tools.check_true(f"{args.ladder}_program_checks", bool(checks) and
                                         not any(l.startswith("CHECK FAIL") for l in checks), len(checks))
    ok_rows = course_tools.check_true(f"ncu_{args.ladder}_every_version", not missing, len(versions) - len(missing),
                                      f"missing={','.join(missing)}" if missing else "")
    raise SystemExit(0 if ok_program and ok_rows else 1)


if __name__ == "__main__":
    main()
