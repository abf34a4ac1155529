"""A sitting's span comes from the commands course/gpu_run.py notes in the record, and the site says
how long a re-verification took from them: whole only when every command re-ran every item and the
last left nothing the machine could run."""

from course import record
from course.site import sittings

START = 1_764_662_000.0  # 2025-12-02 07:53:20 UTC


def _record(tmp_path, commands, sitting="2025-12-02T07:53:20Z", outcomes=("passed", "passed", "failed")):
    path = tmp_path / "gpu-record.json"
    rec = record.load(path)
    rec["runs"] = {"r1": {"sitting": sitting, "started": "2025-12-02T07:53:30+00:00", "gpu": "NVIDIA H200"}}
    rec["items"] = {f"h{i}": {"id": f"item{i}", "outcome": o, "run": "r1"} for i, o in enumerate(outcomes)}
    record.save(rec, path)
    for c in commands:
        record.note_command(path, sitting, c)
    return path


def _command(started, ended, stale_only=False, since="", incomplete=0, more_gpus=0):
    return {"started": started, "ended": ended, "gpus": 1, "gpu": "NVIDIA H200", "per_gpu": 8, "phase": "all",
            "stale_only": stale_only, "since": since, "units": 10, "incomplete_units": incomplete,
            "units_needing_more_gpus": more_gpus}


def test_a_sitting_of_two_commands_spans_first_start_to_last_end(tmp_path):
    path = _record(tmp_path, [_command(START, START + 500, incomplete=3),
                              _command(START + 600, START + 1400, stale_only=True, since="2025-12-02T07:53:20+00:00",
                                       more_gpus=2)])
    s = record.sitting_summary(record.load(path), "2025-12-02T07:53:20Z")
    assert (s["commands"], s["wall_s"], s["passed"], s["not_passed"]) == (2, 1400, 2, 1)
    assert s["whole"] and s["needing_more_gpus"] == 2
    text = sittings.sitting_time(record.load(path))
    assert text.startswith("The last whole re-verification: sitting 2025-12-02T07:53:20Z on 1 x NVIDIA H200 GPU: "
                           "23 min 20 s from its first command's start")
    assert "2 commands" in text and "2 items passed, 1 failed or were flagged" in text and "2 units need more GPUs" in text


def test_a_skipped_item_is_counted_apart_from_a_failure(tmp_path):
    """A multi-GPU item waived on a one-GPU machine is recorded as skipped: not a failure of the sitting."""
    path = _record(tmp_path, [_command(START, START + 500)], outcomes=("passed", "skipped", "skipped"))
    s = record.sitting_summary(record.load(path), "2025-12-02T07:53:20Z")
    assert (s["passed"], s["skipped"], s["not_passed"]) == (1, 2, 2)
    text = sittings.sitting_time(record.load(path))
    assert "1 item passed, 2 skipped (the machine lacked" in text and "failed" not in text


def test_a_stale_only_command_or_one_that_left_work_is_not_a_whole_re_verification(tmp_path):
    stale = _record(tmp_path, [_command(START, START + 300, stale_only=True)])
    assert not record.sitting_summary(record.load(stale), "2025-12-02T07:53:20Z")["whole"]
    assert sittings.sitting_time(record.load(stale)).startswith("No sitting in the GPU record has re-verified")
    (tmp_path / "left").mkdir()
    left = _record(tmp_path / "left", [_command(START, START + 540, incomplete=4)])
    assert not record.sitting_summary(record.load(left), "2025-12-02T07:53:20Z")["whole"]


def test_noting_survives_merging_and_is_not_repeated(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = _record(tmp_path / "a", [_command(START, START + 100)])
    b = _record(tmp_path / "b", [_command(START, START + 100), _command(START + 200, START + 250, stale_only=True)])
    record.merge(a, [b])
    commands = record.load(a)["sittings"]["2025-12-02T07:53:20Z"]["commands"]
    assert [c["started"] for c in commands] == [START, START + 200]


def test_without_noted_commands_the_page_says_the_time_is_not_known(tmp_path):
    assert sittings.sitting_time(record.load(tmp_path / "none.json")).startswith("No sitting in the GPU record has "
                                                                                 "noted")
