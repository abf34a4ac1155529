# training_log.py: the training curves that the course's GPU record holds: the test accuracy and the
# loss after each epoch of the recorded 8-epoch training runs (the accuracy runs of mnist_bench.cu's
# batch-64 benchmark, and mnist_torch.py's reference run), parsed from their recorded output.
#
# Taught in docs/mnist/results.md; docs/mnist/training.ipynb imports it to draw its curves, and
# tests/test_mnist_notebook.py checks the notebook's saved outputs against it. It is a CPU program: it
# reads records/gpu-record.json and checks that each run's epoch lines agree with the run's own CHECK
# and BENCH lines (number of epochs, best and last accuracy).
# Run: python kernels/mnist/training_log.py [--record records/gpu-record.json]
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "kernels" / "common"))
import course_tools  # noqa: E402
from course import programs, record  # noqa: E402

# The recorded runs that train for 8 epochs with the reference's hyper-parameters: (program, arguments).
TRAINING_RUNS = [
    ("kernels/mnist/mnist_bench.cu", ("--bench", "--batch", "64")),
    ("kernels/mnist/mnist_torch.py", ("--train", "--epochs", "8")),
]

# --8<-- [start:parse]
# What the two programs print per epoch and at the end of a training run:
#   epoch 3: loss 0.0208  test accuracy 98.98%  (0.242 s)  last step's loss 0.0050   (mnist_bench.cu)
#   epoch 3: loss 0.0208  test accuracy 99.12%                                         (mnist_torch.py)
# Both print as "loss" the mean loss of the epoch's last 50 steps; the CUDA program adds the last step's.
#   CHECK PASS fused_test_accuracy_reaches_99 n=10000 reached_at_epoch=4 best=99.22% last=99.02% epochs=8 ...
#   BENCH {"case": "train 8 epochs, batch 64", "impl": "CUDA fused + graph", ...}   (mnist_bench.cu only)
EPOCH = re.compile(r"^epoch (?P<epoch>\d+): loss (?P<loss>[-+.\deE]+|nan|inf)\s+test accuracy (?P<acc>[.\d]+)%")
RUN_END = re.compile(r"^CHECK (?P<status>PASS|FAIL) (?P<name>\w+)_test_accuracy_reaches_99 n=\d+ (?P<detail>.*)$")
BENCH_IMPL = re.compile(r'^BENCH .*"kind": "train \d+ epochs".*$')
LOSS_IS = "mean loss of the epoch's last 50 steps"


@dataclass
class Curve:
    label: str           # the BENCH row's impl, or the program's reference run
    loss_is: str         # what the loss column is (the same for both programs)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    detail: dict = field(default_factory=dict)  # the CHECK line's key=value fields


def parse_training_output(stdout: str, program: str) -> list[Curve]:
    """The complete training runs in one recorded output, in the order they ran. A run counts only when
    its epoch lines start at epoch 1 and follow each other (the record keeps the end of an output, so a
    run cut at the start is dropped rather than shown short)."""
    import json

    curves, epochs = [], []
    pending = None  # a CUDA run's curve waits for its BENCH line, which names the implementation
    for line in stdout.splitlines():
        m = EPOCH.match(line)
        if m:
            epochs.append((int(m["epoch"]), float(m["loss"]), float(m["acc"])))
            continue
        m = RUN_END.match(line)
        if m:
            detail = dict(kv.split("=", 1) for kv in m["detail"].split() if "=" in kv)
            complete = [e for e, _, _ in epochs] == list(range(1, len(epochs) + 1)) and epochs
            torch = program.endswith(".py")
            curve = Curve(label="PyTorch reference" if torch else m["name"], loss_is=LOSS_IS,
                          loss=[l for _, l, _ in epochs], accuracy=[a for _, _, a in epochs], detail=detail)
            pending = curve if complete and not torch else None
            if complete and torch:
                curves.append(curve)
            epochs = []
            continue
        if pending is not None and BENCH_IMPL.match(line):
            pending.label = json.loads(line[len("BENCH "):])["impl"]
            curves.append(pending)
            pending = None
    return curves
# --8<-- [end:parse]


@dataclass
class RecordedRun:
    program: str
    args: tuple
    entry: dict          # the record's entry
    current: bool        # recorded for the program's current code (its content hash), or an earlier one
    where: str           # GPU, versions, date
    curves: list[Curve]


def recorded_runs(rec: dict) -> list[RecordedRun]:
    """Each training run of TRAINING_RUNS that the record holds (passing), with its curves: the entry for
    the program's current code, else the entry recorded under the same run id for earlier code."""
    found = []
    for rel, args in TRAINING_RUNS:
        prog = programs.parse(ROOT / rel)
        run = next(r for r in prog.runs() if r.args == args)
        item_id = f"tests/test_programs.py::test_runs_and_checks[{run.id}]"
        e = record.entry(rec, run.content_hash())
        current = bool(e) and e["outcome"] == "passed"
        if not current:
            e = next((x for x in rec["items"].values() if x["id"] == item_id and x["outcome"] == "passed"), None)
        if e is None:
            continue
        where = record.describe_run(record.run_info(rec, e))
        found.append(RecordedRun(rel, args, e, current, where, parse_training_output(e.get("stdout", ""), rel)))
    return found


def summary(runs: list[RecordedRun]) -> str:
    """The text the notebook prints under its first cell: every number its plots draw."""
    lines = []
    for r in runs:
        state = "" if r.current else " (recorded for an earlier version of the program)"
        lines.append(f"{r.program} {' '.join(r.args)}: {r.where}{state}")
        for c in r.curves:
            lines.append(f"  {c.label}: batch {c.detail.get('batch', '?')}, lr {c.detail.get('lr', '?')}, "
                         f"{len(c.accuracy)} epochs")
            lines.append(f"    test accuracy (%) by epoch: {', '.join(f'{a:.2f}' for a in c.accuracy)}")
            lines.append(f"    {c.loss_is}: {', '.join(f'{l:.4f}' for l in c.loss)}")
    return "\n".join(lines)


def main():
    p = course_tools.parser("print the training curves held in the GPU record and check them against "
                            "the runs' own CHECK and BENCH lines")
    p.add_argument("--record", default=str(record.RECORD_PATH), help="the GPU record (JSON)")
    args = p.parse_args()
    import json

    try:
        rec = json.loads(Path(args.record).read_text())
    except (OSError, ValueError) as e:
        print(f"error: cannot read the GPU record {args.record}: {e}", file=sys.stderr)
        raise SystemExit(1)
    runs = recorded_runs(rec)
    print(summary(runs))
    ok = True
    awaiting = record.load_awaiting()
    for rel, run_args in TRAINING_RUNS:
        if not any(r.program == rel and r.args == run_args for r in runs):
            # A run openly declared as awaiting a GPU run (records/awaiting-gpu.json) is said, not failed;
            # any other missing run fails.
            run = next(x for x in programs.program_for(rel).runs() if x.args == run_args)
            declared = run.content_hash() in awaiting
            print(f"{rel} {' '.join(run_args)}: " + ("awaiting a GPU run: " + awaiting[run.content_hash()]["reason"]
                                                    if declared else "no passing run in the record"))
            ok &= course_tools.check_true(f"recorded_or_awaiting_{Path(rel).stem}", declared, 1,
                                          "declared awaiting" if declared else "no passing run in the record")
    for r in runs:
        if not r.curves:
            ok &= course_tools.check_true(f"curves_in_{Path(r.program).stem}", False, 0, "no complete training run")
        for c in r.curves:
            # The curve is what the program itself judged: the same number of epochs, best and last.
            name = re.sub(r"\W+", "_", c.label).strip("_")
            agree = (str(len(c.accuracy)) == c.detail.get("epochs")
                     and f"{max(c.accuracy):.2f}%" == c.detail.get("best")
                     and f"{c.accuracy[-1]:.2f}%" == c.detail.get("last"))
            ok &= course_tools.check_true(f"curve_{name}_matches_its_check", agree, len(c.accuracy))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
