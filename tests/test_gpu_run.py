"""The GPU run's schedule (course/gpu_run.py): every GPU item in exactly one unit, a page's blocks
together, compared benchmarks together (and only those with compatible arguments), the deal
deterministic and within the time left, and a unit complete only when its benchmarks share a sitting."""

from pathlib import Path

from course import gpu_run


def item(nodeid, program=None, args=(), bench=False, alone=False, gpus=1, h=None):
    return {"id": nodeid, "hash": h or nodeid, "program": program, "args": list(args), "bench": bench,
            "alone": alone or bench, "gpus": gpus, "source": program or nodeid.split("::")[0]}


def bench(program, *args):
    return item(f"tests/test_programs.py::test_runs_and_checks[{program}[bench: {' '.join(args)}]]",
                program, args, bench=True)


ITEMS = [
    item("docs/ch/a.md::line 10"), item("docs/ch/a.md::line 20"), item("docs/ch/b.md::line 5"),
    item("tests/test_programs.py::test_runs_and_checks[kernels/x/p.cu[run]]", "kernels/x/p.cu"),
    bench("kernels/x/p.cu", "--bench"), bench("kernels/x/q.py", "--bench"), bench("kernels/x/lonely.cu", "--bench"),
    bench("kernels/m/cnn.cu", "--bench", "--batch", "64"), bench("kernels/m/cnn.cu", "--bench", "--batch", "256"),
    bench("kernels/m/torch.py", "--bench", "--batch", "64", "--budget-s", "80"),
    bench("kernels/m/torch.py", "--bench", "--batch", "256", "--budget-s", "80"),
]
LINKS = [{"kernels/x/p.cu", "kernels/x/q.py"}, {"kernels/m/cnn.cu", "kernels/m/torch.py"}]
EMPTY = {"schema": 1, "runs": {}, "items": {}}


def unit_of(units, nodeid):
    return next(u for u in units if any(i["id"] == nodeid for i in u.items))


def test_every_item_in_exactly_one_unit():
    units = gpu_run.make_units(ITEMS, LINKS, EMPTY)
    seen = [i["id"] for u in units for i in u.items]
    assert sorted(seen) == sorted(i["id"] for i in ITEMS)


def test_a_pages_blocks_and_compared_benchmarks_share_a_unit():
    units = gpu_run.make_units(ITEMS, LINKS, EMPTY)
    assert unit_of(units, "docs/ch/a.md::line 10") is unit_of(units, "docs/ch/a.md::line 20")
    assert unit_of(units, "docs/ch/a.md::line 10") is not unit_of(units, "docs/ch/b.md::line 5")
    assert unit_of(units, ITEMS[4]["id"]) is unit_of(units, ITEMS[5]["id"])       # p against q
    assert unit_of(units, ITEMS[6]["id"]) is not unit_of(units, ITEMS[4]["id"])   # lonely on its own
    # batch 64 of both programs together, apart from batch 256
    assert unit_of(units, ITEMS[7]["id"]) is unit_of(units, ITEMS[9]["id"])
    assert unit_of(units, ITEMS[8]["id"]) is unit_of(units, ITEMS[10]["id"])
    assert unit_of(units, ITEMS[7]["id"]) is not unit_of(units, ITEMS[8]["id"])


def test_a_run_compatible_with_two_batches_does_not_bridge_them():
    """A run without --batch (time to 99%) is compatible with batch 64 and with batch 256: it joins one
    unit, and the two batch sizes stay apart (one unit of every batch would not fit a command)."""
    seeds = bench("kernels/m/torch.py", "--time-to-99", "--seeds", "5")
    units = gpu_run.make_units([*ITEMS, seeds], LINKS, EMPTY)
    assert unit_of(units, ITEMS[7]["id"]) is not unit_of(units, ITEMS[8]["id"])
    assert unit_of(units, seeds["id"]) in (unit_of(units, ITEMS[7]["id"]), unit_of(units, ITEMS[8]["id"]))


def test_compatible_arguments():
    assert gpu_run.compatible(["--bench", "--batch", "64"], ["--bench", "--batch", "64", "--budget-s", "80"])
    assert not gpu_run.compatible(["--bench", "--batch", "64"], ["--bench", "--batch", "256"])
    assert gpu_run.compatible(["--bench"], ["--bench", "--batch", "256"])


def test_deal_is_balanced_deterministic_and_respects_the_time_left():
    units = [gpu_run.Unit(key=f"u{i}", cost=c) for i, c in enumerate([50, 40, 30, 30, 20, 10, 500])]
    dealt, left = gpu_run.deal(units, 2, capacity=100)
    assert [u.key for u in left] == ["u6"]                     # 500 s fits no GPU's time left
    assert all(sum(u.cost for u in d) <= 100 for d in dealt)
    assert sorted(u.key for d in dealt for u in d) == [f"u{i}" for i in range(6)]
    assert gpu_run.deal(units, 2, capacity=100)[0] == dealt


def test_a_unit_is_complete_only_when_its_benchmarks_share_a_sitting_and_gpu():
    a, b = bench("kernels/x/p.cu", "--bench"), bench("kernels/x/q.py", "--bench")
    unit = gpu_run.Unit(key="u", items=[a, b])
    runs = {"r1": {"sitting": "s1", "gpu_uuid": "GPU-0"}, "r2": {"sitting": "s1", "gpu_uuid": "GPU-1"}}
    rec = {"schema": 1, "runs": runs, "items": {a["hash"]: {"id": a["id"], "outcome": "passed", "run": "r1"},
                                                  b["hash"]: {"id": b["id"], "outcome": "passed", "run": "r1"}}}
    assert gpu_run.is_complete(unit, rec)
    rec["items"][b["hash"]]["run"] = "r2"   # same sitting, another GPU
    assert not gpu_run.is_complete(unit, rec)
    rec["items"][b["hash"]]["run"] = "r1"
    rec["items"][b["hash"]]["outcome"] = "failed"
    assert not gpu_run.is_complete(unit, rec)


def test_pages_comparisons_are_read_from_results_plots_and_claims(tmp_path):
    page = tmp_path / "p.md"
    page.write_text('<!-- course:results kernels/a/x.cu kernels/a/y.py cases="*causal" -->\n'
                    'v2 at <!-- claim: kernels/a/x.cu case="c" impl="v2" show=pct vs="t*" vs_program="kernels/b/z.py" -->\n'
                    '<!-- course:plot kernels/a/x.cu x=size y=gbps -->\n')
    assert gpu_run.compared_programs([page]) == [{"kernels/a/x.cu", "kernels/a/y.py"}, {"kernels/a/x.cu", "kernels/b/z.py"}]


def test_the_courses_own_pages_link_the_attention_programs():
    links = gpu_run.compared_programs()
    assert any({"kernels/attention/flash_fwd.cu", "kernels/attention/sdpa_torch.py"} <= group for group in links)


def test_each_gpus_processes_get_their_own_share_of_the_cpu_cores(monkeypatch):
    monkeypatch.setattr(gpu_run.os, "sched_getaffinity", lambda pid: set(range(64)))
    shares = [gpu_run.cpu_share(str(k), 4) for k in range(4)]
    assert all(len(s) == 16 for s in shares) and set().union(*shares) == set(range(64))
    assert gpu_run.cpu_share(None, 4) is None and gpu_run.cpu_share("0", 1) is None


def test_lanes_let_other_gpus_start_their_benchmarks_while_one_runs_a_long_shared_item():
    def unit(key, cost, alone=False):
        return gpu_run.Unit(key=key, items=[{"id": key, "alone": alone, "gpus": 1}], cost=cost)
    shared = [unit("racecheck", 250), *(unit(f"check{i}", 20) for i in range(12))]
    alone = [unit("attention bench", 450, True), unit("mnist 64", 280, True), unit("mnist 256", 200, True),
             unit("mnist 1024", 210, True), unit("small", 40, True)]
    lanes, left = gpu_run.plan_lanes(shared, alone, gpus=4, per_gpu=4, capacity=515)
    assert left == []
    by_gpu = {a.gpu: ([u.key for s in sh for u in s.units], [u.key for u in a.units]) for sh, a in lanes}
    racecheck_gpu = next(g for g, (sh, _) in by_gpu.items() if "racecheck" in sh)
    assert "attention bench" not in by_gpu[racecheck_gpu][1]  # it goes to a GPU that is free sooner
    assert sorted(k for _, (_, a) in by_gpu.items() for k in a) == sorted(u.key for u in alone)
    # A unit that fits no lane within the capacity is left for the next command.
    _, left = gpu_run.plan_lanes(shared, [unit("huge", 600, True)], gpus=4, per_gpu=4, capacity=515)
    assert [u.key for u in left] == ["huge"]


def test_a_cut_off_unit_resumes_on_its_gpu_in_the_same_sitting():
    a, b, c = bench("kernels/x/p.cu", "--bench"), bench("kernels/x/q.py", "--bench"), bench("kernels/x/r.cu", "--bench")
    unit = gpu_run.Unit(key="u", items=[a, b, c])
    runs = {"r1": {"sitting": "s1", "gpu_uuid": "GPU-aaa", "started": "2026-11-27T08:25"},
            "r2": {"sitting": "s1", "gpu_uuid": "GPU-bbb", "started": "2026-11-27T08:25"}}
    rec = {"schema": 1, "runs": runs, "items": {it["hash"]: {"id": it["id"], "outcome": "passed", "run": "r1"}
                                                 for it in (a, b)}}
    machine = {"GPU-zzz": 0, "GPU-aaa": 2}
    gpu, rest = gpu_run.resumable(unit, rec, "s1", machine)
    assert gpu == 2 and [it["id"] for it in rest.items] == [c["id"]] and rest.key == "u"
    assert gpu_run.resumable(unit, rec, "s2", machine) is None            # another sitting: run it whole
    assert gpu_run.resumable(unit, rec, "s1", {"GPU-zzz": 0}) is None     # another machine: run it whole
    rec["items"][b["hash"]]["run"] = "r2"                                 # already split over two GPUs
    assert gpu_run.resumable(unit, rec, "s1", {"GPU-aaa": 0, "GPU-bbb": 1}) is None
    # A benchmark whose entry comes from an earlier sitting (its content did not change) runs again here.
    runs["r0"] = {"sitting": "s0", "gpu_uuid": "GPU-aaa", "started": "2026-11-26T08:25"}
    rec["items"][b["hash"]]["run"] = "r0"
    gpu, rest = gpu_run.resumable(unit, rec, "s1", machine)
    assert gpu == 2 and [it["id"] for it in rest.items] == [b["id"], c["id"]]
    rec["items"][b["hash"]]["run"] = "r1"
    rec["items"][c["hash"]] = {"id": c["id"], "outcome": "passed", "run": "r1"}
    assert gpu_run.resumable(unit, rec, "s1", machine) is None            # complete: nothing to resume
    # A resumed unit is dealt to its GPU, even where another lane is emptier.
    other = gpu_run.Unit(key="big", cost=400)
    dealt, left = gpu_run.deal([other, rest], 4, capacity=500, pinned={"u": 2})
    assert left == [] and rest in dealt[2]


def test_the_wall_time_estimate_follows_the_schedule_and_counts_commands():
    def unit(key, cost, alone=False, gpus=1):
        return gpu_run.Unit(key=key, items=[{"id": key, "alone": alone, "gpus": gpus}], cost=cost)
    shared = [unit("racecheck", 250), *(unit(f"check{i}", 20) for i in range(12))]
    alone = [unit("attention bench", 450, True), unit("mnist 64", 280, True), unit("small", 40, True)]
    # Per-GPU lanes: the racecheck's GPU runs only the small bench after it; the attention bench starts
    # on a GPU whose shared work is short, so the longest lane is that bench after its GPU's checks.
    wall = gpu_run.estimated_wall_s(shared, alone, gpus=4, per_gpu=4)
    assert 450 <= wall <= 450 + 20 * 3
    # With a multi-GPU benchmark the phases run in turn: shared, the multi-GPU bench, then per-GPU benches.
    phased = gpu_run.estimated_wall_s(shared, alone + [unit("allreduce bench", 100, True, gpus=4)], gpus=4, per_gpu=4)
    assert phased == 250 + 100 + 450
    assert gpu_run.commands_needed(0, 545) == 0
    assert gpu_run.commands_needed(515, 545) == 1 and gpu_run.commands_needed(516, 545) == 2
    assert gpu_run.commands_needed(1673, 545) == 4


def test_a_record_left_in_the_out_folder_takes_the_newer_entries_of_the_courses(tmp_path):
    from course import record
    runs = {"old": {"started": "2026-11-27T08:00"}, "new": {"started": "2026-11-28T08:00"}}
    def rec(entries):
        return {"schema": 1, "runs": runs, "items": {h: {"id": i, "outcome": "passed", "run": r}
                                                     for h, i, r in entries}}
    course_record, out_record = tmp_path / "course.json", tmp_path / "out" / "gpu-record.json"
    # The course's record gained a newer entry for a (merged from another command); the out folder's
    # record has a newer entry for b, from this command's own sitting.
    record.save(rec([("a2", "a", "new"), ("b1", "b", "old")]), course_record)
    out_record.parent.mkdir()
    record.save(rec([("a1", "a", "old"), ("b2", "b", "new"), ("c1", "c", "old")]), out_record)
    gpu_run.prepare_out_record(out_record, course_record)
    assert sorted(record.load(out_record)["items"]) == ["a2", "b2", "c1"]
    # Without a record in the out folder, the run starts from a copy of the course's.
    fresh = tmp_path / "fresh.json"
    gpu_run.prepare_out_record(fresh, course_record)
    assert sorted(record.load(fresh)["items"]) == ["a2", "b1"]


def test_a_command_notes_its_start_and_end_in_the_record(tmp_path, monkeypatch):
    """Without a GPU: the machine is faked as one H200 whose items are all complete already, so the run
    has nothing to run; what it must still do is note the command in its record."""
    import json
    import subprocess

    from course import record

    real_run = subprocess.run

    def fake_run(cmd, *args, **kwargs):
        if "--gpu-list" in cmd:  # the collection: no GPU item left to run
            Path(cmd[cmd.index("--gpu-list") + 1]).write_text(json.dumps([]))
            return subprocess.CompletedProcess(cmd, 0, "", "")
        if "build-all" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "built nothing", "")
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(gpu_run, "gpu_count", lambda: 1)
    monkeypatch.setattr(gpu_run, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(gpu_run.subprocess, "run", fake_run)
    monkeypatch.setattr(gpu_run, "prepare_out_record", lambda out: None)
    monkeypatch.setenv("COURSE_SITTING", "2026-12-02T10:00:00Z")
    assert gpu_run.main(["--out", str(tmp_path), "--limit-s", "60"]) == 0
    s = record.sitting_summary(record.load(tmp_path / "gpu-record.json"), "2026-12-02T10:00:00Z")
    assert s["commands"] == 1 and s["whole"] and s["gpus"] == ["1 x NVIDIA H200"] and 0 <= s["wall_s"] < 60


def test_a_page_block_that_repeats_a_run_is_verified_by_that_run():
    run = item("tests/test_programs.py::test_runs_and_checks[kernels/x/p.py[run]]", "kernels/x/p.py", h="k1")
    block = item("docs/ch/a.md::line 10", h="k1")
    other = item("docs/ch/a.md::line 20", h="k2")
    kept, dropped = gpu_run.distinct_items([block, other, run])
    assert kept == [other, run] and dropped == ["docs/ch/a.md::line 10"]


def test_the_courses_blocks_that_repeat_a_run_take_its_key():
    from course import items as course_items
    from course import programs

    prog = programs.program_for("kernels/matmul/sgemm_ncu.py")
    run = next(r for r in prog.runs() if not r.args)
    gpu = ["pytest.mark.gpu"]
    assert course_items.block_hash("bash", "python kernels/matmul/sgemm_ncu.py\n", gpu) == run.content_hash()
    # Anything more or else is its own item: other arguments, a second command, a pipe, no GPU mark.
    for code, marks in (("python kernels/matmul/sgemm_ncu.py --x\n", gpu),
                        ("python kernels/matmul/sgemm_ncu.py\nnvidia-smi\n", gpu),
                        ("python kernels/matmul/sgemm_ncu.py | tee log\n", gpu),
                        ("python kernels/matmul/sgemm_ncu.py\n", [])):
        assert course_items.block_hash("bash", code, marks) != run.content_hash()


def _slots_that_ignore_the_limit(tmp_path, monkeypatch, n=6):
    """Slots whose processes sleep a minute and, on SIGINT, take 3 s to exit (3), as pytest does while a
    sanitizer run in hand winds down."""
    import subprocess
    import sys

    from course import record

    sleeper = ("import signal, sys, time; signal.signal(signal.SIGINT, lambda *a: (time.sleep(3), sys.exit(3))); "
               "time.sleep(60)")
    real_popen = subprocess.Popen
    monkeypatch.setattr(gpu_run, "_copy_tree", lambda dest: dest.mkdir(parents=True, exist_ok=True))
    monkeypatch.setattr(gpu_run.subprocess, "Popen",
                        lambda cmd, **kw: real_popen([sys.executable, "-c", sleeper], stdout=kw["stdout"],
                                                     stderr=kw["stderr"]))
    record_path = tmp_path / "gpu-record.json"
    record.save(dict(EMPTY), record_path)
    slots = [gpu_run.Slot(f"shared-{k}", "0", [gpu_run.Unit(key=f"u{k}", items=[item(f"docs/a.md::line {k}")])])
             for k in range(n)]
    return slots, record_path


def test_at_the_limit_every_process_is_interrupted_at_once(tmp_path, monkeypatch):
    """Eight slow processes once took 8 x 30 s to stop, one after another, and a wrapper's timeout killed
    the command before it noted itself: all are signalled together and share one grace period."""
    import time

    slots, record_path = _slots_that_ignore_the_limit(tmp_path, monkeypatch)
    began = time.time()
    ok = gpu_run.run_slots(slots, time.time() + 1.0, record_path, tmp_path / "work", lambda text: None, [])
    assert not ok and time.time() - began < 12  # one after another: 6 x 3 s


def test_sigterm_stops_the_slots_as_the_limit_does(tmp_path, monkeypatch):
    import threading
    import time

    slots, record_path = _slots_that_ignore_the_limit(tmp_path, monkeypatch, n=2)
    monkeypatch.setattr(gpu_run, "STOP", threading.Event())
    threading.Timer(1.0, gpu_run.STOP.set).start()
    began = time.time()
    ok = gpu_run.run_slots(slots, time.time() + 600, record_path, tmp_path / "work", lambda text: None, [])
    assert not ok and time.time() - began < 20
