# profile_cards_ncu.py: the counters behind the profile cards. For each kernel that course/profile_cards.py
# lists (one group of them, or the labels given to --only), it runs the kernel's program once under Nsight
# Compute (ncu) and keeps one launch: `--kernel-name FILTER --launch-skip N --launch-count 1`, with
# `--clock-control none` (the GPU's own clocks, as the benchmarks run). It prints one BENCH row per kernel
# (impl: the card's label), which the pages' profile cards render (course/site/profile_card.py): speed of
# light (SM and memory throughput as % of peak), achieved and theoretical occupancy and the launch's
# occupancy limits, the warp stall reasons, DRAM and L2 bytes, and the FLOPs counted by the instruction
# and tensor-core counters (the roofline point comes from these, not from a formula).
#
# Taught in docs/contributing.md ("Profile cards"). Each program is built by the harness's own build
# (course/programs.py), into its usual place: a GPU run that already built it reuses the binary.
# Metrics this ncu does not know are left out (the card shows "-"). Its runs are checked runs, one per
# group, not a `course: bench` run: a bench run is repeated in two or three processes to agree on a median
# time (course/bench.py), which would double the ncu time for counters that need no median; the record
# keeps a checked run's BENCH rows as well, and a profiler's run has its GPU to itself (its name ends in
# _ncu.py: course/pytest_plugin.py).
# Run: python kernels/profiling/profile_cards_ncu.py --group memory
#      python kernels/profiling/profile_cards_ncu.py --only vector-add-v3,transpose-naive
#      python kernels/profiling/profile_cards_ncu.py --list        (the ncu commands, without running them)
#
# course: gpu
# course: depends course/profile_cards.py
# course: run --group memory
# course: run --group matmul
# course: run --group attention
# course: run --group serving
# course: run --group mnist
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # course.profile_cards (the list) and course.programs (the harness's build)
sys.path.insert(0, str(ROOT / "kernels" / "common"))
import course_tools  # noqa: E402
import ncu_tools  # noqa: E402
from course import profile_cards, programs  # noqa: E402

# The issue's limit on the cards' ncu time in a whole re-verification (every group together); one run
# fails past it, and tests/test_profile_cards.py holds the recorded runs' sum to it.
BUDGET_S = 300
STALLS = ncu_tools.WARP_STALLS
# --8<-- [start:metrics]
# Each quantity: the ncu metric names to try, the first this ncu knows is used (ncu_tools.first_known);
# a quantity none of whose names it knows is left out, never guessed.
METRICS = {
    "time_ns": ["gpu__time_duration.sum"],
    # Speed of light: the busiest SM pipeline, and the busiest memory unit (L1, L2 or DRAM), % of peak
    "sm_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "mem_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_read": ["dram__bytes_read.sum"],
    "dram_write": ["dram__bytes_write.sum"],
    "l2_bytes": ["lts__t_bytes.sum"],
    # Occupancy: achieved and theoretical, and the blocks per SM each resource would allow
    "occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "occupancy_theoretical_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "limit_registers": ["launch__occupancy_limit_registers"],
    "limit_shared_mem": ["launch__occupancy_limit_shared_mem"],
    "limit_warps": ["launch__occupancy_limit_warps"],
    "limit_blocks": ["launch__occupancy_limit_blocks"],
    "registers": ["launch__registers_per_thread"],
    **{f"stall_{r}": [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"] for r in STALLS},
    # FLOPs on the CUDA cores: thread instructions executed with their predicate on (an FMA is two FLOPs)
    **{f"op_{op}": [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"]
       for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")},
    # FLOPs on the tensor cores: math operations of the tensor path by input type (a multiply-add is
    # two); the FP8 name is a candidate no course run has recorded yet
    "tensor_bf16": ["sm__ops_path_tensor_src_bf16_dst_fp32.sum"],
    "tensor_fp16_fp32": ["sm__ops_path_tensor_src_fp16_dst_fp32.sum"],
    "tensor_fp16_fp16": ["sm__ops_path_tensor_src_fp16_dst_fp16.sum"],
    "tensor_tf32": ["sm__ops_path_tensor_src_tf32_dst_fp32.sum"],
    "tensor_fp8": ["sm__ops_path_tensor_src_fp8.sum", "sm__ops_path_tensor_src_fp8_dst_fp32.sum"],
}
# --8<-- [end:metrics]
# FLOPs per class of arithmetic, as (key, weight) of the counters above; the card compares a kernel with
# the datasheet peak of the class that did most of its FLOPs (course/site/profile_card.py).
FLOP_CLASSES = {
    "fp32": [("op_fadd", 1), ("op_fmul", 1), ("op_ffma", 2)],
    "fp64": [("op_dadd", 1), ("op_dmul", 1), ("op_dfma", 2)],
    "fp16": [("op_hadd", 1), ("op_hmul", 1), ("op_hfma", 2)],  # per thread instruction, as for fp32
    "16-bit": [("tensor_bf16", 1), ("tensor_fp16_fp32", 1), ("tensor_fp16_fp16", 1)],
    "tf32": [("tensor_tf32", 1)],
    "fp8": [("tensor_fp8", 1)],
}


def flops_by_class(r: dict) -> dict[str, float]:
    """{class: FLOPs} for each class some of whose counters ncu gave."""
    out = {}
    for cls, parts in FLOP_CLASSES.items():
        got = [(r[k], w) for k, w in parts if r.get(k) is not None]
        if got:
            out[cls] = sum(v * w for v, w in got)
    return out


def ncu_command(ncu: str, metrics: dict[str, str], card: profile_cards.CardKernel, exe: Path, tmp: str) -> list[str]:
    args = [a.replace(profile_cards.TMP, tmp) for a in card.args]
    return [ncu, "--csv", "--print-units", "base", "--clock-control", "none", "--metrics", ",".join(metrics.values()),
            "--kernel-name", card.kernel, "--launch-skip", str(card.launch_skip), "--launch-count", "1",
            str(exe), *args]


def profile(ncu: str, metrics: dict[str, str], card: profile_cards.CardKernel, exe: Path) -> tuple[dict, str]:
    """(the row of one card's launch, or {} where ncu measured nothing; what went wrong, or "")."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        run = subprocess.run(ncu_command(ncu, metrics, card, exe, tmp), cwd=ROOT, capture_output=True, text=True,
                             timeout=240)
        seconds = time.monotonic() - started
    launches = ncu_tools.parse_csv(run.stdout)
    name, got = next(iter(launches.values()), ("", {}))
    # The profiled program checks its own results in its checked modes: a failing check fails the card.
    failed = [l for l in run.stdout.splitlines() if l.startswith("CHECK FAIL")]
    passed = sum(l.startswith("CHECK PASS") for l in run.stdout.splitlines())
    problem = ""
    if run.returncode != 0 or failed:
        problem = f"exit {run.returncode}, {len(failed)} failed program checks: {(run.stderr or run.stdout)[-300:]}"
    elif not got or got.get(metrics["time_ns"]) is None:
        problem = f"ncu profiled no launch of {card.kernel} (skip {card.launch_skip})"
    if problem:
        return {}, problem
    r = {k: got.get(m) for k, m in metrics.items()}
    return {**r, "kernel": name, "ncu_s": round(seconds, 2), "program_checks": passed}, ""


def print_bench_row(card: profile_cards.CardKernel, r: dict) -> None:
    classes = flops_by_class(r)
    dram = (r.get("dram_read") or 0) + (r.get("dram_write") or 0)
    keep = ["sm_pct", "mem_pct", "dram_read", "dram_write", "l2_bytes", "occupancy_pct", "occupancy_theoretical_pct",
            "limit_registers", "limit_shared_mem", "limit_warps", "limit_blocks", "registers",
            *[f"stall_{s}" for s in STALLS]]
    fields = {k: round(r[k], 4) for k in keep if r.get(k) is not None}
    fields.update({f"flops_{c.replace('-', '')}": v for c, v in classes.items()})
    course_tools.bench("profile card", card.label, r["time_ns"] / 1e6, dram, sum(classes.values()),
                       kernel=r["kernel"], ncu_s=r["ncu_s"], program_checks=r["program_checks"], **fields)


def chosen_cards(group: str | None, only: str | None) -> list[profile_cards.CardKernel]:
    if only:
        labels = [s for s in only.split(",") if s]
        unknown = [s for s in labels if s not in profile_cards.BY_LABEL]
        if unknown:
            raise SystemExit(f"error: --only names no listed card: {', '.join(unknown)} "
                             f"(listed: {', '.join(profile_cards.BY_LABEL)})")
        return [profile_cards.BY_LABEL[s] for s in labels]
    return profile_cards.in_group(group) if group else list(profile_cards.CARDS)


def main():
    p = course_tools.parser("profile the kernels of the course's profile cards with Nsight Compute; one row each")
    p.add_argument("--group", choices=profile_cards.GROUPS, help="one group of the list (default: every card)")
    p.add_argument("--only", metavar="LABEL[,LABEL...]", help="these cards only")
    p.add_argument("--list", action="store_true", help="print each card's ncu command and stop")
    args = p.parse_args()
    cards = chosen_cards(args.group, args.only)
    if args.list:
        for card in cards:
            exe = programs.parse(ROOT / card.program).executable
            print(f"{card.label}: " + " ".join(ncu_command("ncu", {"...": "METRICS"}, card, exe, "TMP")))
        return
    course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    ncu = ncu_tools.require_ncu()
    wanted = ncu_tools.first_known(ncu, METRICS)
    rows, problems, total_s = [], {}, 0.0
    for card in cards:
        prog = programs.parse(ROOT / card.program)
        built = programs.build(prog)
        if built.returncode != 0:
            problems[card.label] = f"build failed: {built.stderr[-300:]}"
            continue
        r, problem = profile(ncu, wanted, card, prog.executable)
        if problem:
            problems[card.label] = problem
            continue
        total_s += r["ncu_s"]
        rows.append((card, r))

    print(f"ncu, one launch per card, --clock-control none "
          f"({len(wanted)} of {len(METRICS)} metrics known to this ncu)")
    print(f"{'card':<26}{'time us':>10}{'SM %':>7}{'mem %':>7}{'occup %':>9}{'DRAM MB':>9}{'GFLOP':>9}{'ncu s':>7}")
    for card, r in rows:
        flops = sum(flops_by_class(r).values())
        dram = ((r.get("dram_read") or 0) + (r.get("dram_write") or 0)) / 1e6
        cells = [ncu_tools.cells(r, [(k, "", f)])[0] for k, f in (("sm_pct", "{:.0f}"), ("mem_pct", "{:.0f}"),
                                                                 ("occupancy_pct", "{:.0f}"))]
        print(f"{card.label:<26}{r['time_ns'] / 1e3:>10.1f}{cells[0]:>7}{cells[1]:>7}{cells[2]:>9}{dram:>9.1f}"
              f"{flops / 1e9:>9.2f}{r['ncu_s']:>7.1f}")
    for label, problem in problems.items():
        print(f"{label}: {problem}")
    for card, r in rows:
        print_bench_row(card, r)
    name = args.group or "chosen"
    ok = course_tools.check_true(f"profile_cards_{name}_every_card", not problems, len(rows),
                                 f"failed={','.join(problems)}" if problems else "")
    ok = course_tools.check_true(f"profile_cards_{name}_ncu_within_{BUDGET_S}s", total_s <= BUDGET_S, len(rows),
                                 f"ncu_s={total_s:.0f}") and ok
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
