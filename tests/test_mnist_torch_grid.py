"""The PyTorch peer's grid (kernels/mnist/mnist_torch.py) on the CPU: the enumeration, its order, the
command line, the budget and the reporting of what did not run, and the one-step check with its
tolerances. The GPU run times the grid; this checks what can go wrong without one."""
import io
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "kernels" / "mnist"))
import mnist_torch as m  # noqa: E402

PROGRAM = str(ROOT / "kernels" / "mnist" / "mnist_torch.py")


def test_grid_is_every_combination_once():
    knobs = {(c.precision, c.channels_last, c.cudnn_benchmark, c.compile, c.mode, c.graph) for c in m.GRID}
    want = {(p, cl, cb, comp, mode, g) for p, cl, cb, (comp, mode), g in
            itertools.product(m.PRECISIONS, (True, False), (True, False), m.COMPILES, (True, False))}
    assert knobs == want and len(m.GRID) == len(want) == 120
    assert len({c.key for c in m.GRID}) == len({c.impl for c in m.GRID}) == 120
    for c in m.GRID:   # the precision ends the name (claims glob on it), every knob is a field too
        assert c.impl.startswith("PyTorch ") and c.impl.endswith(" " + c.precision)
        f = c.fields()
        assert (f["cudnn_benchmark"], f["cuda_graph"], f["compile"]) == (c.cudnn_benchmark, c.graph, c.compile)
        assert ("channels_last" in c.impl) == c.channels_last == (f["memory_format"] == "channels_last")
        assert ("cudnn.benchmark" in c.impl) == c.cudnn_benchmark


def test_order_runs_a_compiled_group_together_and_likely_fastest_first():
    for bench in (True, False):
        phase = [c for c in m.GRID if c.cudnn_benchmark == bench]
        seen, last = set(), None
        for c in phase:
            if c.compile != "none" and c.group != last:
                assert c.group not in seen, f"group {c.group} split in the running order"
                seen.add(c.group)
            last = c.group
        assert phase[0].key == f"bf16-nhwc-{'bench' if bench else 'nobench'}-model-default-graph"
        assert phase[-1].compile == "none" and not phase[-1].graph   # eager without a graph last
    assert all(c.cudnn_benchmark for c in m.GRID[:60])               # cudnn.benchmark on first


def run(*args):
    return subprocess.run([sys.executable, PROGRAM, *args], capture_output=True, text=True, timeout=120)


def test_configs_list_and_globs():
    p = run("--configs", "list")
    assert p.returncode == 0 and len([ln for ln in p.stdout.splitlines() if ln.startswith(("bf16", "tf32", "fp32"))]) == 120
    p = run("--configs", "list", "--cudnn-benchmark", "off")
    assert p.returncode == 0 and "60 configurations" in p.stdout and "-bench-" not in p.stdout


@pytest.mark.parametrize("args, message", [
    (["--bench", "--configs", "nope"], "matches no configuration"),
    (["--bench", "--configs", "bf16-*,bf16-*"], "more than once"),
    (["--bench", "--configs", "bf16-*,"], "an empty name"),
    (["--configs", "bf16-*"], "use it with --bench"),
    (["--budget-s", "10"], "use it with --bench"),
    (["--bench", "--budget-s", "nan"], "--budget-s must be"),
    (["--bench", "--worker", "--batch", "64"], "--worker runs one batch size"),
    (["--bench", "--cudnn-benchmark", "maybe"], "invalid choice"),
    (["--configs", "list", "--bench"], "give it alone"),
])
def test_bad_command_lines_exit_1(args, message):
    p = run(*args)
    assert p.returncode == 1 and message in p.stderr


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (1024, 28, 28), dtype=torch.uint8, generator=g), torch.randint(0, 10, (1024,), generator=g)


@pytest.mark.parametrize("precision", list(m.PRECISIONS))
def test_check_passes_a_right_step_and_fails_a_step_that_updates_nothing(precision, data, capsys):
    images, labels = data
    ref = m.fp32_reference(64, images, labels)
    cfg = m.Config(precision, True, False, "none", "", False)
    with m.settings(m.PRECISIONS[precision], False):
        prep = m.prepare(cfg.group, images, labels, 64)
        assert m.check_one_step(cfg, prep, m.build(cfg, prep, images, 64), ref, 64)[0]
        for group in prep.opt.param_groups:
            group["lr"] = 0.0
        assert not m.check_one_step(cfg, prep, m.build(cfg, prep, images, 64), ref, 64)[0]
    out = capsys.readouterr().out
    assert "CHECK PASS" in out and "CHECK FAIL" in out


def test_budget_prunes_and_reports(monkeypatch, capsys):
    """A spent budget leaves configurations not reached, a group that cannot compile is pruned with its
    error, and the summary names every configuration that did not run."""
    configs = [c for c in m.GRID if c.cudnn_benchmark][:5]   # two compiled groups, then an eager one
    def failing_prepare(*a):
        raise RuntimeError("Inductor says no\nsecond line")
    monkeypatch.setattr(m, "prepare", failing_prepare)
    monkeypatch.setattr(m, "cleanup", lambda: None)
    outcomes = []
    m.run_phase(configs, 64, None, None, None, 10, m.time.perf_counter() + 3600, outcomes.append)
    assert [o["kind"] for o in outcomes] == ["pruned"] * 5
    assert outcomes[0]["why"] == "compile/first step: RuntimeError: Inductor says no"
    outcomes.clear()
    m.run_phase(configs, 64, None, None, None, 10, m.time.perf_counter() - 1, outcomes.append)
    assert [o["kind"] for o in outcomes] == ["not reached"] * 5
    outcomes.clear()
    m.run_phase(configs, 64, None, None, None, 10, m.time.perf_counter() + 5, outcomes.append)  # < compile reserve
    assert [o["kind"] for o in outcomes[:2]] == ["not reached"] * 2 and "compile needs" in outcomes[0]["why"]
    timed = {"kind": "timed", "key": configs[0].key, "step_ms": 0.5, "epoch_ms": 400.0, "check": "ok",
             "compile_s": 3.0, "capture_s": 0.1, "n_params": 421738, "notes": {}}
    m.report(64, 60000, [timed] + outcomes[1:] + [{"kind": "pruned", "key": configs[4].key, "why": "capture: boom"}],
             {c.key: c for c in m.GRID}, 12.0, 70)
    out = capsys.readouterr().out
    rows = [json.loads(ln[6:]) for ln in out.splitlines() if ln.startswith("BENCH ")]
    assert {r["case"] for r in rows} == {"step, batch 64", "epoch, batch 64"} and all(r["peer"] for r in rows)
    assert rows[0]["config"] == configs[0].key and rows[0]["step_ms"] == 0.5 and rows[1]["epoch_s"] == 0.4
    assert f"PRUNED {configs[4].key}: capture: boom" in out
    assert "NOT REACHED " + configs[1].key in out


def test_worker_lines_come_back_and_silence_is_not_reached(monkeypatch, capsys):
    configs = [c for c in m.GRID if not c.cudnn_benchmark][:3]
    lines = ["torch x on y\n", "CHECK PASS batch64_x n=5\n",
             "GRID " + json.dumps({"kind": "pruned", "key": configs[0].key, "why": "capture: no"}) + "\n"]

    class FakePopen:
        def __init__(self, cmd, **kw):
            assert "--worker" in cmd and cmd[cmd.index("--cudnn-benchmark") + 1] == "off"
            self.stdout = io.StringIO("".join(lines))
        def wait(self):
            return 1
    monkeypatch.setattr(m.subprocess, "Popen", FakePopen)
    outcomes = m.run_worker(configs, 64, 10, 30.0, False, Path("data"), [0])
    assert [o["kind"] for o in outcomes] == ["pruned", "not reached", "not reached"]
    assert "exited with code 1" in outcomes[1]["why"]
    out = capsys.readouterr().out
    assert "CHECK PASS batch64_x n=5" in out and f"PRUNED {configs[0].key}: capture: no" in out


def test_a_repeat_process_times_the_rows_an_earlier_one_timed():
    """COURSE_RETIME (course/bench.py) names the rows the first timing process reached; a repeat times
    those configurations, in the grid's order, and no others."""
    reached = [m.GRID[7], m.GRID[0], m.GRID[90]]
    got = m.retime_selection(m.GRID, json.dumps([c.impl for c in reached] + ["a row of another program"]))
    assert got == tuple(c for c in m.GRID if c in reached)
    assert m.retime_selection(m.GRID, None) == m.GRID and m.retime_selection(m.GRID, "") == m.GRID


def test_the_second_half_of_the_grid_gets_half_the_budget_whatever_the_first_used():
    """The cudnn.benchmark-off half runs in a second process. Given only what the first left, a first
    process that overran its half (one cold compile) left it nothing, and the half that held the fastest
    configuration in another sitting went untimed."""
    assert m.second_share(start=100.0, budget_s=50.0, now=110.0) == 40.0   # the first finished early
    assert m.second_share(start=100.0, budget_s=50.0, now=125.0) == 25.0   # on time
    assert m.second_share(start=100.0, budget_s=50.0, now=160.0) == 25.0   # overran: still half
