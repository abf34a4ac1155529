"""Refactoring the harness must not change any GPU item's content hash.

A content hash keys an item's entry in records/gpu-record.json (course/record.py). It covers the
item's files and a few harness facts (the compiler flags, judge()'s source, the benchmark protocol),
so a harness change that moves one of those by a byte silently invalidates the whole record.

tests/data/content-hashes.json is a snapshot of every item's hash together with the files the hash
covered and a digest of what each computes (its tokens: course/normalise.py). An item whose files still
compute the same must still have the same hash; an item whose files changed (a kernel or page was
edited since the snapshot) is left out, as its hash is meant to change. Two views are snapshotted:

- "direct": every program's runs and sanitizer runs, and every page's GPU items, computed in-process;
- "collected": the GPU items pytest collects (`--gpu-list`), hashed by the plugin (course/pytest_plugin.py),
  which is what the GPU run records.

After a deliberate change to what a hash covers (which re-stales the record), rewrite the snapshot:
`python tests/test_content_hashes.py --write`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course import normalise, programs, record  # noqa: E402

SNAPSHOT = ROOT / "tests" / "data" / "content-hashes.json"
DOCS = ROOT / "docs"


def _digest(path: Path) -> str | None:
    """What the file computes (course/normalise.py): an edit to its comments keeps the item compared."""
    return hashlib.sha256(normalise.computed_bytes(path)).hexdigest()[:16] if path.is_file() else None


def _files(paths) -> dict[str, str | None]:
    out = {}
    for p in paths:
        p = Path(p)
        out[p.resolve().relative_to(ROOT).as_posix()] = _digest(p)
    return out


def direct_items() -> dict[str, dict]:
    """{id: {"hash", "files"}} for every program's runs and sanitizer runs, and every page's GPU items."""
    items: dict[str, dict] = {}
    for prog in programs.all_programs():
        files = _files(prog.sources())
        for run in [*prog.runs(), *prog.sanitizer_runs()]:
            items[run.id] = {"hash": run.content_hash(), "files": files}
    for page in sorted(p for p in DOCS.rglob("*.md") if "vendor" not in p.parts):
        text = page.read_text()
        used = [page, *record.files_used_by(text)]
        for p in record.embedded_files(text):
            prog = programs.program_for(p)
            used += prog.sources() if prog else []
        files = _files(used)
        for item in record.page_gpu_items(page):
            items[f"page {page.relative_to(ROOT).as_posix()}: {item.id}"] = {"hash": item.hash, "files": files}
    return items


def collected_items() -> dict[str, dict]:
    """{id: {"hash", "files"}} of the GPU items pytest collects, hashed by the course's plugin."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "gpu-items.json"
        proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                               "--gpu-list", str(listing)], cwd=ROOT, capture_output=True, text=True)
        if not listing.exists():
            raise AssertionError(f"pytest --co --gpu-list wrote nothing:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        listed = json.loads(listing.read_text())
    items = {}
    for it in listed:
        source = ROOT / it["source"]
        if it["program"]:
            used = programs.program_for(it["program"]).sources()
        elif it.get("reads") is not None:  # a test marked gpu: the file and what the plugin says it reads
            used = [source, *(ROOT / rel for rel in it["reads"])]
        else:  # a page's block: the page and the course files its text names
            used = [source, *record.files_used_by(source.read_text())]
        items[it["id"]] = {"hash": it["hash"], "files": _files(used)}
    return items


def changed_hashes(snapshot: dict[str, dict], now: dict[str, dict], digests: dict[str, str | None]) -> tuple[list[str], int]:
    """(problems, how many items were compared). An item is compared when every file its snapshot
    lists still has the snapshot's bytes (digests: path -> digest at the snapshot); then its hash must
    be the snapshot's, and the files the harness says it covers must be the snapshot's."""
    problems, compared = [], 0
    for item_id, old in sorted(snapshot.items()):
        if any(_digest(ROOT / rel) != digests[rel] for rel in old["files"]):
            continue  # its content changed since the snapshot: its hash is meant to change
        compared += 1
        new = now.get(item_id)
        if new is None:
            problems.append(f"{item_id}: no longer produced, though its files are unchanged")
        elif new["hash"] != old["hash"]:
            problems.append(f"{item_id}: hash {old['hash']} -> {new['hash']}, though its files are unchanged")
        elif set(new["files"]) != set(old["files"]):
            problems.append(f"{item_id}: covers other files now: {sorted(set(new['files']) ^ set(old['files']))}")
    return problems, compared


def _check(view: str, now: dict[str, dict]) -> None:
    data = json.loads(SNAPSHOT.read_text())
    snapshot = data[view]
    problems, compared = changed_hashes(snapshot, now, data["digests"])
    assert not problems, (f"{len(problems)} {view} GPU item(s) changed content hash (the committed GPU record "
                          f"would no longer vouch for them):\n  " + "\n  ".join(problems))
    # Most of the course is untouched between two snapshots: a comparison of almost nothing is a mistake.
    assert compared >= len(snapshot) // 2, f"only {compared} of {len(snapshot)} {view} items were compared"


def test_direct_hashes_unchanged():
    _check("direct", direct_items())


def test_collected_hashes_unchanged():
    _check("collected", collected_items())


def test_a_changed_hash_is_reported():
    digests = {"kernels/common/course.cuh": _digest(ROOT / "kernels/common/course.cuh"), "kernels/gone.cu": "0"}
    files = ["kernels/common/course.cuh"]
    snapshot = {"x[run]": {"hash": "aaaa", "files": files}, "gone[run]": {"hash": "bbbb", "files": files},
                "edited[run]": {"hash": "cccc", "files": [*files, "kernels/gone.cu"]}}
    now = {"x[run]": {"hash": "abab", "files": files}}
    problems, compared = changed_hashes(snapshot, now, digests)
    assert compared == 2
    assert [p.split(":")[0] for p in problems] == ["gone[run]", "x[run]"]


if __name__ == "__main__":  # python tests/test_content_hashes.py --write
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_content_hashes.py --write")
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    data = {"about": "Content hashes of every GPU item and the files each covered: tests/test_content_hashes.py.",
            "direct": direct_items(), "collected": collected_items(), "digests": {}}
    for view in ("direct", "collected"):
        for item in data[view].values():
            data["digests"].update(item["files"])
            item["files"] = sorted(item["files"])
    # One line per item, so that a diff of the snapshot reads item by item.
    parts = [f' "about": {json.dumps(data["about"])}', ' "digests": ' + json.dumps(data["digests"], indent=1, sort_keys=True)]
    for view in ("collected", "direct"):
        lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(data[view].items())]
        parts.append(f' "{view}": {{\n' + ",\n".join(lines) + "\n }")
    SNAPSHOT.write_text("{\n" + ",\n".join(parts) + "\n}\n")
    print(f"{SNAPSHOT.relative_to(ROOT)}: {len(data['direct'])} direct, {len(data['collected'])} collected items")
