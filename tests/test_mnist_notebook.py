"""The training notebook (docs/mnist/training.ipynb) shows the GPU record's numbers.

The site renders the notebook with its saved outputs (mkdocs-jupyter, execute: false), so nothing
re-runs it when the record changes. These tests compare its saved outputs with what
kernels/mnist/training_log.py reads from records/gpu-record.json now: after a GPU run that changes the
recorded training, they fail until the notebook is executed again
(`jupyter nbconvert --to notebook --execute --inplace docs/mnist/training.ipynb`, from docs/mnist/).
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "mnist" / "training.ipynb"
sys.path.insert(0, str(ROOT / "kernels" / "mnist"))
import training_log  # noqa: E402


def _cells():
    return json.loads(NOTEBOOK.read_text())["cells"]


def _text_outputs(cell) -> str:
    return "".join("".join(o["text"]) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_notebook_prints_the_records_curves():
    rec = json.loads((ROOT / "records" / "gpu-record.json").read_text())
    runs = training_log.recorded_runs(rec)
    assert runs and all(r.curves for r in runs), "the GPU record holds no complete training run to show"
    want = training_log.summary(runs) + "\n"
    printed = [c for c in _cells() if c["cell_type"] == "code" and "training_log.summary" in "".join(c["source"])]
    assert len(printed) == 1, "the notebook should print training_log.summary() in one cell"
    got = _text_outputs(printed[0])
    assert got == want, ("the notebook's saved output differs from the GPU record; execute it again "
                         f"(see this file's docstring).\n--- notebook\n{got}\n--- record\n{want}")


def test_every_plot_was_drawn_from_the_recorded_runs():
    plots = [c for c in _cells() if c["cell_type"] == "code" and "plt.subplots" in "".join(c["source"])]
    assert plots, "the notebook draws no plot"
    for c in plots:
        source = "".join(c["source"])
        assert "for run in runs" in source, f"a plot does not draw the recorded runs:\n{source}"
        assert any("image/png" in o.get("data", {}) for o in c.get("outputs", [])), f"a plot cell has no saved image:\n{source}"
    # Every cell ran once, in order, in the same execution (no stale output from an earlier version).
    counts = [c.get("execution_count") for c in _cells() if c["cell_type"] == "code"]
    assert counts == list(range(1, len(counts) + 1)), f"execution counts {counts}: execute the whole notebook again"


# tests/data/mnist_bench_cut_then_whole.txt: lines copied unchanged from the recorded output of mnist_cnn.cu --bench, the program that mnist_bench.cu replaced (records/gpu-record.json,
# H100 run of 2026-11-24; the program mnist_bench.cu's --bench --batch 64 run took the accuracy runs over from): the end of the FP32 accuracy run, whose first three epoch lines are left
# out here as the record's 8000-character tail could cut them, then the whole TF32 run.
CUT_THEN_WHOLE = (ROOT / "tests/data/mnist_bench_cut_then_whole.txt").read_text()


def test_parser_drops_a_run_cut_at_its_start_and_names_runs_by_their_bench_row():
    curves = training_log.parse_training_output(CUT_THEN_WHOLE, "kernels/mnist/mnist_bench.cu")
    assert [c.label for c in curves] == ["CUDA TF32 + graph"]
    c = curves[0]
    assert c.accuracy == [98.64, 98.84, 98.97, 99.03, 99.03, 99.10, 99.18, 98.93]
    assert c.loss[0] == pytest.approx(0.0920) and c.loss[-1] == pytest.approx(0.0152)
    assert c.detail["epochs"] == "8" and c.detail["batch"] == "64"


# The epoch line as mnist_host.cuh prints it now: the mean loss of the last 50 steps (as mnist_torch.py
# prints it), then the last step's loss, which the parser leaves out.
MEAN_THEN_LAST = """\
epoch 1: loss 0.1234  test accuracy 98.64%  (0.243 s)  last step's loss 0.0920
epoch 2: loss 0.0567  test accuracy 99.01%  (0.240 s)  last step's loss 0.0762
CHECK PASS tc_test_accuracy_reaches_99 n=10000 reached_at_epoch=2 best=99.01% last=99.01% epochs=2 batch=64 lr=0.05
BENCH {"case": "train 2 epochs, batch 64", "impl": "CUDA v4", "time_ms": 1.0, "kind": "train 2 epochs"}
"""


def test_parser_reads_the_epoch_mean_not_the_last_step():
    curves = training_log.parse_training_output(MEAN_THEN_LAST, "kernels/mnist/mnist_bench.cu")
    assert [c.label for c in curves] == ["CUDA v4"]
    assert curves[0].loss == [pytest.approx(0.1234), pytest.approx(0.0567)]
    torch_run = "epoch 1: loss 0.2000  test accuracy 98.00%\nepoch 2: loss 0.1000  test accuracy 99.10%\n" \
        "CHECK PASS reference_test_accuracy_reaches_99 n=10000 reached_at_epoch=2 best=99.10% last=99.10% epochs=2\n"
    (torch_curve,) = training_log.parse_training_output(torch_run, "kernels/mnist/mnist_torch.py")
    assert curves[0].loss_is == torch_curve.loss_is  # the two programs' losses are the same quantity
