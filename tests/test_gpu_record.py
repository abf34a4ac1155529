"""The committed GPU record must vouch for every GPU item's current content."""

import pytest

from course import record
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


def test_every_gpu_item_has_a_passing_record(request):
    if request.config.getoption("--gpu-record"):
        pytest.skip("the record is being refreshed by this run")
    gpu_items = request.config.stash.get(GPU_ITEMS, [])
    if not gpu_items:
        pytest.skip("no GPU items were collected in this session")
    stale = stale_items(gpu_items, record.load())
    assert not stale, (
        f"{len(stale)} GPU item(s) are not vouched for by records/gpu-record.json:\n"
        + "\n".join(f"  {i}: {why}" for i, why in stale)
        + f"\nRefresh on a machine with a GPU: `{record.REFRESH_STALE}`, then commit records/gpu-record.json"
        " (docs/contributing.md)."
    )
