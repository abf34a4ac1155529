"""The record cannot go stale silently: any change to what an item runs changes its hash."""

import json
import shutil

import pytest

from course import items, programs, record
from test_gpu_record import stale_items


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A copy of kernels/ in a temporary root, so tests can edit files freely."""
    shutil.copytree(programs.KERNELS, tmp_path / "kernels")
    for mod in (programs, record, items):
        monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(programs, "KERNELS", tmp_path / "kernels")
    monkeypatch.setattr(programs, "BUILD", tmp_path / "build")
    return tmp_path


def _gpu_program(root):
    prog = programs.parse(root / "kernels" / "setup" / "hello_gpu.cu")
    return prog, prog.runs()[0]


def test_one_character_in_a_program_changes_its_hash(sandbox):
    prog, run = _gpu_program(sandbox)
    before = run.content_hash()
    text = prog.path.read_text()
    assert "main(" in text
    prog.path.write_text(text.replace("main(", "main (", 1))  # layout: the same program
    assert programs.parse(prog.path).runs()[0].content_hash() == before
    assert "? 0 :" in text
    prog.path.write_text(text.replace("? 0 :", "? 1 :", 1))  # one character of what it does
    assert programs.parse(prog.path).runs()[0].content_hash() != before


def test_a_change_in_an_included_header_changes_the_hash(sandbox):
    prog, run = _gpu_program(sandbox)
    before = run.content_hash()
    common = sandbox / "kernels" / "common"
    headers = [s for s in prog.sources() if s.parent == common]
    assert headers, f"{prog.rel} includes no kernels/common header: pick a program that does"
    header = headers[0]
    header.write_text(header.read_text() + "\n// edited\n")
    assert run.content_hash() == before  # a comment computes nothing
    header.write_text(header.read_text() + "\nconstexpr int kEdited = 1;\n")
    assert run.content_hash() != before


def test_a_module_imported_from_another_chapter_folder_is_part_of_the_program(sandbox):
    """decode_attention_sdpa.py puts kernels/attention on sys.path and imports sdpa_torch from there:
    an edit to sdpa_torch.py must re-stale its rows."""
    prog = programs.parse(sandbox / "kernels" / "serving" / "decode_attention_sdpa.py")
    imported = sandbox / "kernels" / "attention" / "sdpa_torch.py"
    assert imported in prog.sources()
    before = prog.runs()[0].content_hash()
    imported.write_text(imported.read_text() + "\nEDITED = 1\n")
    assert programs.parse(prog.path).runs()[0].content_hash() != before


def test_a_block_hash_covers_its_text_and_the_programs_it_builds(sandbox):
    prog, _ = _gpu_program(sandbox)
    code = f"nvcc -o build/x {prog.rel}\n./build/x\n"
    before = record.block_hash("bash", code, ["pytest.mark.gpu"])
    assert record.block_hash("bash", code + "\n\n", ["pytest.mark.gpu"]) == before  # blank lines
    assert record.block_hash("bash", code + " x", ["pytest.mark.gpu"]) != before
    prog.path.write_text(prog.path.read_text() + "\nconstexpr int kEdited = 1;\n")
    assert record.block_hash("bash", code, ["pytest.mark.gpu"]) != before


def test_stale_items_names_new_failed_and_flagged_items():
    rec = {"schema": 1, "runs": {}, "items": {
        "aaa": {"id": "ok", "outcome": "passed", "run": "r"},
        "bbb": {"id": "bad", "outcome": "failed", "run": "r"},
        "ccc": {"id": "quiet", "outcome": "flagged", "problems": ["printed nothing"], "run": "r"},
    }}
    items = [("ok", "aaa", "s"), ("bad", "bbb", "s"), ("quiet", "ccc", "s"), ("new", "ddd", "s")]
    stale = dict(stale_items(items, rec))
    assert set(stale) == {"bad", "quiet", "new"}
    assert "printed nothing" in stale["quiet"]


def test_judge_rejects_claims_without_checks():
    assert programs.judge(0, "all good!\n", "").problems
    assert programs.judge(0, "CHECK PASS x n=0\n", "").problems
    assert programs.judge(0, "CHECK PASS x n=3\nCHECK FAIL y n=3 first_bad=0\n", "").problems
    assert programs.judge(0, 'CHECK PASS x n=3\nBENCH {"case": "c", "impl": "i", "time_ms": 0}\n', "").problems
    assert not programs.judge(0, "CHECK PASS x n=3 max_abs_err=0\n", "").problems
    assert programs.judge(2, "WAIVED needs sm_90\n", "").waived


def _rec(**outcomes):
    return {"schema": 1, "runs": {}, "items": {h: {"id": h.upper(), "outcome": o, "run": "r"} for h, o in outcomes.items()}}


def test_only_unrun_or_skipped_items_may_await_a_gpu_run():
    rec = _rec(ok="passed", bad="failed", quiet="flagged", two_gpus="skipped")
    assert record.may_await(rec, "never_run") and record.may_await(rec, "two_gpus")
    assert not any(record.may_await(rec, h) for h in ("ok", "bad", "quiet"))


def test_a_declaration_lapses_when_the_item_runs_or_changes():
    rec = _rec(ran="passed", broke="failed")
    awaiting = {h: {"id": f"page.md::{h}", "reason": "r", "since": "d"} for h in ("ran", "broke", "edited", "waiting")}
    awaiting["elsewhere"] = {"id": "other.md::line 3", "reason": "r", "since": "d"}
    items = [("page.md::ran", "ran", "s"), ("page.md::broke", "broke", "s"), ("page.md::line 9", "edited2", "s"),
             ("page.md::waiting", "waiting", "s")]
    obsolete = dict(record.obsolete_awaiting(awaiting, items, rec))
    # other.md was not collected in this session: nothing is known about its items, so it stays.
    assert set(obsolete) == {"page.md::ran", "page.md::broke", "page.md::edited"}


def test_a_declaration_covers_only_the_content_it_was_made_for():
    from test_gpu_record import unvouched_items

    rec = _rec(bad="failed")
    awaiting = {h: {"id": i, "reason": "r", "since": "d"} for i, h in (("a", "h1"), ("c", "bad"))}
    assert [i for i, _ in unvouched_items([("a", "h1", "s"), ("b", "h2", "s"), ("c", "bad", "s")], rec, awaiting)] == ["b", "c"]
    assert [i for i, _ in unvouched_items([("a", "h1-edited", "s")], rec, awaiting)] == ["a"]


def test_a_check_name_with_spaces_is_a_problem_not_a_silent_miss():
    """'CHECK FAIL v1 b2 causal n=3' does not match the one-word pattern: were it ignored, a failing
    check would go unseen; the judge calls it malformed instead."""
    out = programs.verdict(0, "CHECK PASS fine n=4\nCHECK FAIL v1 b2 causal n=3 max_abs_err=1\n", "")
    assert not out.passed and "malformed CHECK line" in "; ".join(out.problems)
    assert programs.verdict(0, "CHECK PASS v1_b2_causal n=3 max_abs_err=0\n", "").passed


def test_prune_keeps_every_current_items_entries_and_drops_the_rest(tmp_path):
    from course import record
    path = tmp_path / "record.json"
    runs = {"r1": {"started": "2026-11-27"}, "r2": {"started": "2026-11-28"}, "r3": {"started": "2026-11-26"}}
    record.save({"schema": 1, "runs": runs, "items": {
        "h-now": {"id": "docs/a.md::line 12", "outcome": "passed", "run": "r2"},    # current content, current id
        "h-moved": {"id": "docs/a.md::line 40", "outcome": "passed", "run": "r1"},  # block moved to line 44
        "h-old": {"id": "kernels/p.cu[bench]", "outcome": "passed", "run": "r1"},   # earlier content of a run
        "h-gone": {"id": "docs/b.md::line 7", "outcome": "passed", "run": "r3"},    # nothing current
    }}, path)
    listing = [{"id": "docs/a.md::line 12", "hash": "h-now"}, {"id": "docs/a.md::line 44", "hash": "h-moved"},
               {"id": "kernels/p.cu[bench]", "hash": "h-new"}]
    assert record.prune(path, listing) == ["docs/b.md::line 7"]
    kept = record.load(path)
    assert sorted(kept["items"]) == ["h-moved", "h-now", "h-old"] and sorted(kept["runs"]) == ["r1", "r2"]


def test_rekey_moves_the_entries_of_current_content_and_keeps_the_rest(tmp_path):
    target, awaiting = tmp_path / "record.json", tmp_path / "awaiting.json"
    target.write_text(json.dumps({"schema": 1, "runs": {"r": {"started": "t"}}, "items": {
        "old-a": {"id": "a", "outcome": "passed", "run": "r"},
        "earlier-a": {"id": "a", "outcome": "passed", "run": "r"},
        "old-b": {"id": "b", "outcome": "failed", "run": "r"}}}))
    record.save_awaiting({"old-c": {"id": "c", "reason": "no GPU"}}, awaiting)
    old = [{"id": "a", "hash": "old-a"}, {"id": "b", "hash": "old-b"}, {"id": "c", "hash": "old-c"}]
    new = [{"id": "a", "hash": "new-a"}, {"id": "b", "hash": "new-b"}, {"id": "c", "hash": "new-c"}]
    assert record.rekey(target, old, new, awaiting) == 2
    items = record.load(target)["items"]
    assert sorted(items) == ["earlier-a", "new-a", "new-b"]
    assert items["new-b"]["outcome"] == "failed"  # a verdict moves as it is, whatever it was
    assert list(record.load_awaiting(awaiting)) == ["new-c"]
