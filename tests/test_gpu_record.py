"""The committed GPU record must vouch for every GPU item's current content."""

import pytest

from course import programs, record
from course.pytest_plugin import GPU_ITEMS


def stale_items(gpu_items, rec):
    """(id, reason) for every GPU item without a passing entry for its current hash."""
    stale = []
    for nodeid, h, _source in gpu_items:
        e = record.entry(rec, h)
        if e is None:
            stale.append((nodeid, "no record for its current content (new, or changed since the last GPU run)"))
        elif e["outcome"] != "passed":
            stale.append((nodeid, f"last GPU run: {e['outcome']} {'; '.join(e.get('problems', []))}".strip()))
    return stale


def unvouched_items(gpu_items, rec, awaiting):
    """stale_items, less the items declared as awaiting a GPU run for their current content (the test
    below reports those as skipped). A failed or flagged run is never excused (record.may_await)."""
    declared = {nodeid for nodeid, h, _ in gpu_items if h in awaiting and record.may_await(rec, h)}
    return [(i, why) for i, why in stale_items(gpu_items, rec) if i not in declared]


def _gpu_items(request):
    if request.config.getoption("--gpu-record"):
        pytest.skip("the record is being refreshed by this run")
    gpu_items = request.config.stash.get(GPU_ITEMS, [])
    if not gpu_items:
        pytest.skip("no GPU items were collected in this session")
    return gpu_items


def test_every_gpu_item_has_a_passing_record(request):
    gpu_items = _gpu_items(request)
    stale = unvouched_items(gpu_items, record.load(), record.load_awaiting())
    assert not stale, (
        f"{len(stale)} GPU item(s) are not vouched for by records/gpu-record.json:\n"
        + "\n".join(f"  {i}: {why}" for i, why in stale)
        + f"\nRefresh on a machine with a GPU: `{record.REFRESH_STALE}`, then commit records/gpu-record.json"
        " (docs/contributing.md)."
    )


def test_items_declared_as_awaiting_a_gpu_run(request):
    """Items in records/awaiting-gpu.json pass CI as skipped, visibly, with their reasons."""
    gpu_items = _gpu_items(request)
    awaiting, rec = record.load_awaiting(), record.load()
    obsolete = record.obsolete_awaiting(awaiting, gpu_items, rec)
    assert not obsolete, (
        f"{len(obsolete)} declaration(s) in records/awaiting-gpu.json no longer apply:\n"
        + "\n".join(f"  {i}: {why}" for i, why in obsolete)
        + f"\nDrop them with `{record.AWAIT_COMMAND}` (it keeps only items still without a passing record)."
    )
    current = {h for _, h, _ in gpu_items}
    waiting = {h: e for h, e in awaiting.items() if h in current}
    if waiting:
        reasons = sorted({e["reason"] for e in waiting.values()})
        pytest.skip(f"{len(waiting)} GPU item(s) await a GPU run (records/awaiting-gpu.json): " + " | ".join(reasons))


def test_no_recorded_output_has_a_malformed_check_line():
    """programs.verdict() rejects a CHECK line it cannot parse, a rule that is not part of the record's
    content hash (programs.verdict says why): the recorded verdicts stand only if no recorded run
    printed such a line."""
    bad = [(e["id"], line) for e in record.load()["items"].values()
           for line in programs.malformed_check_lines(e.get("stdout", ""))]
    assert not bad, "\n".join(f"{i}: {line}" for i, line in bad)
