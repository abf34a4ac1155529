"""Benchmark rows that hold up (course/bench.py): two timing processes, a third where they disagree or
break an invariant, unstable rows marked, broken invariants failing the run."""

import pytest

from course import bench, programs


def rows(**times):
    return [{"case": case.replace("_", " "), "impl": "flash", "time_ms": t, "bytes": 1, "flops": 1}
            for case, t in times.items()]


def test_two_agreeing_medians_make_a_stable_row():
    merged = bench.merge_rows([rows(a=1.00), rows(a=1.03)])
    assert merged[0]["medians"] == [1.00, 1.03] and "unstable" not in merged[0]
    assert merged[0]["time_ms"] == 1.015


def test_a_row_with_measured_fields_comes_whole_from_one_process():
    # As tensor_parallel.py once recorded its fused row: the time merged from three processes but the
    # hidden share copied from the first, whose time was not the merged one.
    def tp(t, hidden):
        return [{"case": "mlp", "impl": "fused", "time_ms": t, "comm_ms": 0.73, "hidden_pct": hidden}]
    outputs = [tp(1.806, 63.6), tp(1.778, 67.0), tp(1.734, 78.3)]
    row = bench.merge_rows(outputs, measured=("comm_ms", "hidden_pct"))[0]
    assert (row["time_ms"], row["hidden_pct"]) == (1.778, 67.0) and row["medians"] == [1.806, 1.778, 1.734]
    two = bench.merge_rows(outputs[:2], measured=("comm_ms", "hidden_pct"))[0]
    assert (two["time_ms"], two["hidden_pct"]) == (1.778, 67.0)  # the lower of two: a time some process measured
    assert bench.undeclared_differences(outputs, measured=("hidden_pct",)) == []
    # Undeclared, a field that differs between processes is a problem that fails the run.
    problem = bench.undeclared_differences(outputs)
    assert len(problem) == 1 and "'hidden_pct'" in problem[0] and "course: measured hidden_pct" in problem[0]
    # A declared glob covers a profiler's many counters.
    ncu = [[{"case": "ncu", "impl": "v5", "time_ms": t, "bytes": b, "stall_wait": w, "grid": 132}]
           for t, b, w in ((0.93, 100, 1.5), (0.92, 104, 1.7))]
    assert bench.undeclared_differences(ncu, measured=("bytes", "stall_*")) == []
    assert [p.split("'")[1] for p in bench.undeclared_differences(ncu, measured=("bytes",))] == ["stall_wait"]
    assert bench.merge_rows(ncu, measured=("bytes", "stall_*"))[0]["stall_wait"] == 1.7  # from the faster process
    # Fields that every process prints alike (sizes, byte counts) need no declaration.
    assert bench.undeclared_differences([rows(a=1.0), rows(a=1.02)]) == []


def test_measured_fields_are_declared_in_the_program(tmp_path):
    src = tmp_path / "p.py"
    src.write_text("# course: gpu\n# course: bench --bench\n# course: measured busbw_gbps algbw_gbps\n")
    assert programs.parse(src).measured == ["busbw_gbps", "algbw_gbps"]
    src.write_text("# course: gpu\n# course: measured stall_* *_pct\n")
    assert programs.parse(src).measured == ["stall_*", "*_pct"]
    for bad in ("time_ms", "time_*"):  # a name, or a glob, that would take the time out of the merge
        src.write_text(f"# course: gpu\n# course: measured {bad}\n")
        with pytest.raises(ValueError, match="course: measured"):
            programs.parse(src)


def test_disagreeing_or_single_medians_are_unstable():
    assert "unstable" in bench.merge_rows([rows(a=1.0), rows(a=1.2)])[0]
    assert "one process" in bench.merge_rows([rows(a=1.0), []])[0]["unstable"]
    # a third process that agrees with one of the two settles it
    assert "unstable" not in bench.merge_rows([rows(a=1.0), rows(a=1.2), rows(a=1.01)])[0]


def test_the_flash_attention_2_row_breaks_the_causal_invariant():
    # PyTorch's flash backend as once recorded: causal (half the work) at 98% of non-causal's time
    inv = [("faster", "causal", "non-causal", "*", 0.8)]
    recorded = rows(b4_h16_s4096_d128_causal=1.4975, b4_h16_s4096_d128_non_causal=1.528)
    recorded[1]["case"] = "b4 h16 s4096 d128 non-causal"
    assert "faster causal non-causal" in bench.broken_invariants(inv, recorded)[0]
    recorded[0]["time_ms"] = 0.894  # as two independent H100 runs measured it
    assert bench.broken_invariants(inv, recorded) == []


def test_an_invariant_that_matches_nothing_is_a_problem():
    assert "matched no pair" in bench.broken_invariants([("faster", "causal", "non-causal", "*")], rows(a=1.0))[0]
    assert "matched no pair" in bench.broken_invariants([("grows", "seq", "*")], rows(a=1.0))[0]


def test_grows_allows_noise_but_not_a_faster_larger_size():
    inv = [("grows", "seq", "*")]
    r = [{"case": f"s{s} d128", "impl": "x", "time_ms": t, "seq": s} for s, t in ((1024, 1.0), (2048, 0.97), (4096, 3.0))]
    assert bench.broken_invariants(inv, r) == []
    r[2]["time_ms"] = 0.5
    assert "grows seq" in bench.broken_invariants(inv, r)[0]


class FakeProgram:
    invariants = [("faster", "causal", "non-causal", "*", 1.0)]
    measured: list[str] = []


class FakeRun:
    program = FakeProgram()


def _outcome(causal, non_causal):
    out = (f'CHECK PASS x n=1\nBENCH {{"case": "s causal", "impl": "flash", "time_ms": {causal}}}\n'
           f'BENCH {{"case": "s non-causal", "impl": "flash", "time_ms": {non_causal}}}\n')
    return programs.judge(0, out, "")


def test_measure_runs_a_third_process_and_fails_a_run_that_still_breaks_an_invariant():
    calls = []

    def execute(run, timing_process=1, retime=None):
        calls.append(run)
        return _outcome(1.50, 1.53) if len(calls) != 2 else _outcome(1.60, 1.53)

    got = bench.measure(FakeRun(), execute)
    assert len(calls) == 3
    assert got.benchmarks[0]["medians"] == [1.50, 1.60, 1.50]
    assert len(got.process_s) == 3 and all(s >= 0 for s in got.process_s)  # each process's seconds, recorded
    assert got.passed  # the median of the three, 1.50 ms, keeps causal under non-causal


def test_measure_fails_when_the_invariant_stays_broken():
    got = bench.measure(FakeRun(), lambda run, timing_process=1, retime=None: _outcome(1.60, 1.53))
    assert not got.passed and any("invariant" in p for p in got.problems)


def test_repeats_are_asked_for_the_rows_the_first_process_timed():
    """A program that searches within a time budget reaches different rows in each process; the repeat
    is told which rows the first one timed (COURSE_RETIME), and a third process which rows are unstable."""
    asked = []
    reached = [["a", "b"], ["b"], ["a"]]  # the second process, left to itself, would not reach "a"

    def execute(run, timing_process=1, retime=None):
        asked.append(retime)
        names = reached[timing_process - 1]
        out = "CHECK PASS x n=1\n" + "".join(f'BENCH {{"case": "s", "impl": "{n}", "time_ms": 1.0}}\n' for n in names)
        return programs.judge(0, out, "")

    got = bench.measure(type("Run", (), {"program": type("P", (), {"invariants": [], "measured": []})()})(), execute)
    assert asked == [None, ["a", "b"], ["a"]]
    assert {r["impl"]: len(r["medians"]) for r in got.benchmarks} == {"a": 2, "b": 2}
    assert not any(r.get("unstable") for r in got.benchmarks)


def test_declarations_parse(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("// course: gpu\n// course: gpus 2\n// course: invariant faster causal non-causal PyTorch*\n"
                   "// course: invariant faster causal non-causal max-ratio=0.8\n"
                   "// course: invariant grows seq\nint main() {}\n")
    prog = programs.parse(src)
    assert prog.min_gpus == 2
    assert prog.invariants == [("faster", "causal", "non-causal", "PyTorch*", 1.0),
                               ("faster", "causal", "non-causal", "*", 0.8), ("grows", "seq", "*")]
    src.write_text("// course: invariant faster causal\n")
    import pytest
    with pytest.raises(ValueError, match="invariant"):
        programs.parse(src)


def test_a_sanitizer_reason_goes_on_under_its_directive(tmp_path):
    """A long why continues on comment lines indented by two or more spaces (kernels keep to 118 columns);
    the next directive or a plain comment ends it."""
    src = tmp_path / "k.cu"
    src.write_text("// course: gpu\n// course: sanitizer-expect memcheck the first part\n//         and the second\n"
                   "// course: sanitizer-skip all one line\n// a comment, not part of it\nint main() {}\n")
    prog = programs.parse(src)
    assert prog.sanitizer_expect == {"memcheck": "the first part and the second"}
    assert set(prog.sanitizer_skip.values()) == {"one line"}
