"""The GPU run's shards (course.pytest_plugin.shard_items): every GPU item lands in exactly one
shard, benchmarks only in the alone part, and a page's code blocks all in the same shard (a later
block runs what an earlier one built)."""

from course import pytest_plugin


class FakeItem:
    def __init__(self, nodeid: str, bench: bool = False):
        self.nodeid, self.bench = nodeid, bench
        self.stash = {pytest_plugin.ITEM_HASH: nodeid}

    def get_closest_marker(self, name):
        return object() if (name == "bench" and self.bench) else None


ITEMS = [FakeItem(f"docs/ch/page{p}.md::line {10 * b}") for p in range(5) for b in range(1, 4)] + [
    FakeItem(f"tests/test_programs.py::test_runs_and_checks[kernels/x/p{i}.cu[run]]") for i in range(9)] + [
    FakeItem("tests/test_programs.py::test_runs_and_checks[kernels/x/p0.cu[bench: --bench]]", bench=True)]
RECORD = {"items": {str(i): {"id": it.nodeid, "duration_s": 1.0 + i % 7} for i, it in enumerate(ITEMS)}}


def test_every_item_in_exactly_one_part():
    shards = [pytest_plugin.shard_items(ITEMS, f"{k}/4", RECORD) for k in range(1, 5)]
    alone = pytest_plugin.shard_items(ITEMS, "alone", RECORD)
    seen = [i.nodeid for part in [*shards, alone] for i in part]
    assert sorted(seen) == sorted(i.nodeid for i in ITEMS)
    assert [i.nodeid for i in alone] == [ITEMS[-1].nodeid]
    assert all(shards), "every shard gets work"


def test_a_pages_blocks_share_a_shard():
    for k in range(1, 5):
        pages = {i.nodeid.split("::")[0] for i in pytest_plugin.shard_items(ITEMS, f"{k}/4", RECORD)
                 if ".md::" in i.nodeid}
        for other in range(1, 5):
            if other != k:
                theirs = {i.nodeid.split("::")[0] for i in pytest_plugin.shard_items(ITEMS, f"{other}/4", RECORD)}
                assert not pages & theirs, f"pages split between shards {k} and {other}: {pages & theirs}"
