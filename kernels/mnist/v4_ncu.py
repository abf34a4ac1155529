# v4_ncu.py: where version 4's training step spends its time. Profiles a few steps of mnist_train.cu's
# version 4 at batch 1024 with Nsight Compute (ncu) and prints, for every kernel of the step, its
# duration, the DRAM traffic and FLOPs ncu counted, and the share of the GPU's peak it reached (DRAM
# throughput, tensor pipe, FMA pipe, SM throughput), its registers and achieved occupancy.
#
# Taught in docs/mnist/results.md ("Where the step's time goes"), which shows its recorded rows.
# It builds mnist_train.cu into build/mnist/ncu/ with the harness's build command (the flags of the
# benchmark), and runs its short training mode, `--loss-curve DIR --version 4 --batch 1024` (50 steps
# launched kernel by kernel, the kernels the step's CUDA graph replays), under ncu twice: first timing
# a window of launches to find the step (the sequence of kernel names that repeats), then collecting
# every metric over --steps whole steps. Metrics this ncu does not know are left out (shown as "-").
# Run: python kernels/mnist/v4_ncu.py [--steps 3]
#
# course: gpu
# course: run --steps 1
# course: bench --steps 3
# course: measured bytes *_pct
import csv
import io
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "kernels" / "common"))
import course_tools  # noqa: E402
from course.programs import parse  # noqa: E402

BATCH = 1024
SKIP = 100     # launches left unprofiled first: the weight upload and the first steps
WINDOW = 200   # launches timed to find the step's period (a v4 step is a few dozen kernels)

# --8<-- [start:metrics]
# Each quantity: the ncu metric names to try, first known first (the tensor pipe's name differs
# between ncu versions and architectures; `ncu --query-metrics` says which this one knows).
METRICS = {
    "time_ns": ["gpu__time_duration.sum"],
    "dram_pct": ["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_read": ["dram__bytes_read.sum"],
    "dram_write": ["dram__bytes_write.sum"],
    "sm_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "tensor_pct": ["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                   "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "fma_pct": ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "tensor_ops": ["sm__ops_path_tensor_src_bf16_dst_fp32.sum"],  # bf16 in, fp32 out: version 4's products
    "ffma": ["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"],
    "fadd": ["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"],
    "fmul": ["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"],
    "registers": ["launch__registers_per_thread"],
    "occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
}
# Kernels are grouped by what their names start with (after the namespace), so that renamed or new
# kernels still land in a group; a kernel no prefix matches is shown as "other", never dropped.
GROUPS = [
    ("tensor-core products", ("gemm_bf16", "conv_forward", "conv_backward", "linear_")),
    ("conv1 on CUDA cores", ("conv3x3",)),
    ("batch norm, ReLU, pool", ("bn_",)),
    ("fc2 and the loss", ("fc2_", "softmax")),
    ("SGD and the bf16 copy", ("sgd", "to_bf16", "next_learning_rate")),
    ("sums of the blocks' parts", ("sum_parts",)),
    ("gather, zeroing", ("gather", "zero_")),
]
# --8<-- [end:metrics]


def find_ncu():
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).exists():
            return cand
    return None


def known_metrics(ncu):
    """Base names this ncu reports for the current GPU, to drop names it does not know."""
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip() and "__" in line.split()[0]}


def short_name(demangled: str) -> str:
    """'void tc::gemm_bf16<(int)1, true>(const float *, int)' -> 'tc::gemm_bf16<1, true>': the return type,
    the parameter list and the casts ncu prints in template arguments are left out."""
    name = re.sub(r"^void\s+", "", demangled.strip())
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the parameter list is the first '(' outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            cut = i
            break
    return re.sub(r"\((?:int|unsigned int|bool|long)\)", "", name[:cut]).strip()


def group_of(name: str) -> str:
    base = re.sub(r"<.*$", "", name).split("::")[-1]
    return next((g for g, prefixes in GROUPS if base.startswith(prefixes)), "other")


def find_period(names: list[str]) -> int:
    """The smallest p such that the launches repeat with period p over the whole window, with at
    least two whole periods in it: the number of kernels in one training step."""
    for p in range(1, len(names) // 2 + 1):
        if all(names[i] == names[i + p] for i in range(len(names) - p)):
            return p
    return 0


def parse_ncu_csv(text: str) -> list[dict]:
    """ncu --csv prints one row per launch and metric; returns one dict per launch, in launch order:
    its name, grid and block, and each metric's value as a float (values ncu cannot give are left out)."""
    lines = [l for l in text.splitlines() if l.startswith('"')]  # drop the ==PROF== lines
    launches: dict[str, dict] = {}
    for rec in csv.DictReader(io.StringIO("\n".join(lines))):
        launch = launches.setdefault(rec["ID"], {"name": short_name(rec["Kernel Name"]),
                                                 "grid": rec.get("Grid Size", ""), "block": rec.get("Block Size", ""),
                                                 "metrics": {}})
        try:
            launch["metrics"][rec["Metric Name"]] = float(rec["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            pass
    return [launches[k] for k in sorted(launches, key=int)]


def run_ncu(ncu, exe, metrics, skip, count, data_dir):
    cmd = [ncu, "--csv", "--print-units", "base", "--metrics", ",".join(metrics),
           "--launch-skip", str(skip), "--launch-count", str(count),
           str(exe), "--loss-curve", data_dir, "--version", "4", "--batch", str(BATCH)]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    launches = parse_ncu_csv(run.stdout)
    if run.returncode != 0 or not launches:
        print(f"ncu failed (exit {run.returncode}): {(run.stderr or run.stdout)[-600:]}")
        print("CHECK FAIL ncu_v4_step n=0")
        raise SystemExit(1)
    return launches


def main():
    p = course_tools.parser("profile version 4's training step (batch 1024) kernel by kernel with Nsight Compute")
    p.add_argument("--steps", type=int, default=3, choices=range(1, 11), metavar="1..10",
                   help="whole steps to profile; each kernel's figures are the median over them")
    args = p.parse_args()
    torch = course_tools.require_cuda("torch")  # a GPU must be visible before nvcc and ncu are run
    if torch.cuda.get_device_capability() < (8, 0):
        print("WAIVED version 4 needs compute capability 8.0 (bf16 tensor cores)")
        raise SystemExit(2)
    ncu = find_ncu()
    if ncu is None:
        print("WAIVED ncu (Nsight Compute) is not installed")
        raise SystemExit(2)
    prog = parse(ROOT / "kernels/mnist/mnist_train.cu")
    exe = ROOT / "build/mnist/ncu/mnist_train"
    exe.parent.mkdir(parents=True, exist_ok=True)
    cmd = prog.build_command("native")
    cmd[cmd.index("-o") + 1] = str(exe)
    subprocess.run(cmd, cwd=ROOT, check=True)
    known = known_metrics(ncu)
    chosen = {}
    for key, names in METRICS.items():
        # launch__ attributes are not in --query-metrics' list, but every ncu reports them
        name = next((m for m in names if not known or m.startswith("launch__") or m.split(".")[0] in known), None)
        if name:
            chosen[key] = name

    with tempfile.TemporaryDirectory() as curves:
        # 1. Which kernels make a step: time a window of launches and find the period of their names.
        window = run_ncu(ncu, exe, [METRICS["time_ns"][0]], SKIP, WINDOW, curves)
        names = [l["name"] for l in window]
        period = find_period(names)
        if period == 0:
            print("the profiled launches do not repeat; kernels in the window:", ", ".join(names))
            print("CHECK FAIL ncu_v4_step_period n=0")
            raise SystemExit(1)
        # 2. Every metric over whole steps, from the step's first kernel on (the batch's gather; else the
        #    one after SGD), so that the rows come in the step's order.
        base = [re.sub(r"<.*$", "", n).split("::")[-1] for n in names[:period]]
        start = next((i for i, b in enumerate(base) if b.startswith("gather")),
                     next((i + 1 for i in reversed(range(period)) if base[i].startswith("sgd")), 0)) % period
        launches = run_ncu(ncu, exe, list(chosen.values()), SKIP + start, period * args.steps, curves)
    got = [l["name"] for l in launches]
    if got != [names[(start + i) % period] for i in range(period * args.steps)]:
        print("the second ncu run launched other kernels than the first:", ", ".join(got))
        print("CHECK FAIL ncu_v4_step_repeats n=0")
        raise SystemExit(1)

    rows, seen = [], {}
    for slot in range(period):
        runs = [launches[slot + s * period] for s in range(args.steps)]
        med = {k: statistics.median(r["metrics"][m] for r in runs) for k, m in chosen.items()
               if all(m in r["metrics"] for r in runs)}
        name = runs[0]["name"]
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name} (call {seen[name]})"
        flops = None
        if any(k in med for k in ("ffma", "fadd", "fmul", "tensor_ops")):
            flops = 2 * med.get("ffma", 0) + med.get("fadd", 0) + med.get("fmul", 0) + med.get("tensor_ops", 0)
        dram = med["dram_read"] + med["dram_write"] if "dram_read" in med and "dram_write" in med else None
        rows.append({"slot": slot, "label": label, "group": group_of(name), "grid": runs[0]["grid"],
                     "block": runs[0]["block"], "flops": flops, "dram_bytes": dram, **med})

    # Every kernel of the step profiled in every step, with a duration: what the table below needs.
    missing = [r["label"] for r in rows if not r.get("time_ns")]
    if not course_tools.check_true("ncu_v4_step", not missing, len(rows) * args.steps,
                                   f"kernels_per_step={period} steps={args.steps} metrics={len(chosen)}"
                                   + (f" no_duration={','.join(missing)}" if missing else "")):
        raise SystemExit(1)

    # --8<-- [start:table]
    fmt = lambda v, f: f.format(v) if v is not None else "-"  # noqa: E731
    total_ns = sum(r.get("time_ns", 0) for r in rows)
    print(f"ncu: version 4's training step at batch {BATCH}, {period} kernels per step, medians over {args.steps} "
          f"step(s); {ncu} with its default replay (caches flushed, clocks locked to base) for each kernel")
    print(f"{'#':>2} {'kernel':<44} {'group':<24} {'us':>8} {'share':>6} {'DRAM MB':>8} {'GFLOP':>7} "
          f"{'DRAM%':>6} {'tensor%':>7} {'FMA%':>5} {'SM%':>5} {'regs':>5} {'occup%':>6}")
    for r in rows:
        t = r.get("time_ns")
        print(
            f"{r['slot']:>2} {r['label'][:44]:<44} {r['group']:<24} {fmt(t and t / 1e3, '{:.1f}'):>8} "
            f"{fmt(t and 100 * t / total_ns, '{:.1f}%'):>6} "
            f"{fmt(r['dram_bytes'] and r['dram_bytes'] / 1e6, '{:.1f}'):>8} "
            f"{fmt(r['flops'] and r['flops'] / 1e9, '{:.2f}'):>7} {fmt(r.get('dram_pct'), '{:.0f}'):>6} "
            f"{fmt(r.get('tensor_pct'), '{:.1f}'):>7} {fmt(r.get('fma_pct'), '{:.0f}'):>5} "
            f"{fmt(r.get('sm_pct'), '{:.0f}'):>5} {fmt(r.get('registers'), '{:.0f}'):>5} "
            f"{fmt(r.get('occupancy_pct'), '{:.0f}'):>6}")
    print("by group:")
    for g in dict.fromkeys(r["group"] for r in rows):
        t = sum(r.get("time_ns", 0) for r in rows if r["group"] == g)
        print(f"   {g:<24} {t / 1e3:8.1f} us  {100 * t / total_ns:5.1f}% of the step's kernel time")
    print(f"   {'whole step':<24} {total_ns / 1e3:8.1f} us  (sum of its kernels' durations)")
    # --8<-- [end:table]
    case = f"v4 step profile, batch {BATCH}"
    for r in rows:
        extra = {k: round(r[k], 3) for k in ("dram_pct", "tensor_pct", "fma_pct", "sm_pct", "registers",
                                             "occupancy_pct") if r.get(k) is not None}
        course_tools.bench(case, f"{r['slot']:02d} {r['label']}", r["time_ns"] / 1e6, r["dram_bytes"] or 0,
                           flops=r["flops"] or 0, group=r["group"], grid=r["grid"], block=r["block"], **extra)
    course_tools.bench(case, "whole step (sum of its kernels)", total_ns / 1e6,
                       sum(r["dram_bytes"] or 0 for r in rows), flops=sum(r["flops"] or 0 for r in rows))


if __name__ == "__main__":
    main()
