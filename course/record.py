"""The GPU verification record: which GPU examples passed, on what, and what they measured.

CI has no GPU. It trusts a GPU item only if records/gpu-record.json holds a passing entry for the
item's current content hash (course/items.py): a hash of exactly what the item runs. Change one
character of it and the hash changes, so the old entry no longer applies.

Entries are keyed by content hash; each names the run (GPU, driver and library versions, date) it
came from. The pytest plugin writes entries during a GPU run (course/pytest_plugin.py).

This module is the record's store (load, save, merge, the awaiting list) and the one way to query it:
every consumer (claims, the site's badges, results, plots and sanitizer summaries, the kernel index,
the GPU run's schedule) asks through entry_for / passing_entry / passing_bench_rows / run_info /
describe_entry, so "what the record says about this run's current code" is decided here only.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from . import programs
# Page items and their hashes moved to course/items.py; these names stay importable from here.
from .items import (GpuItem, block_hash, embedded_files, files_used_by, is_embed_only,  # noqa: F401
                    is_gpu_mark, page_blocks, page_gpu_items)

ROOT = programs.ROOT
# COURSE_GPU_RECORD points a GPU run at another file (gpu-run.sh writes straight into its output
# folder, so that a run stopped by a time limit still returns what it verified).
RECORD_PATH = Path(os.environ.get("COURSE_GPU_RECORD", ROOT / "records" / "gpu-record.json"))
SCHEMA = 1
REFRESH_STALE = "python -m pytest --gpu-record --gpu-stale-only"
REFRESH_ALL = "python -m pytest --gpu-record"
# GPU items knowingly left without a GPU run (no GPU could be had, or one needs two GPUs), each pinned
# to its content hash and with the reason. CI lets exactly these through and reports them as skipped;
# their pages say "Not verified on a GPU yet". An edit changes the hash, so it is never covered.
AWAITING_PATH = ROOT / "records" / "awaiting-gpu.json"
AWAIT_COMMAND = 'python -m pytest --co -q --gpu-await "why no GPU run covers them"'


# ----------------------------------------------------------------------------- the record file


def load(path: Path = RECORD_PATH) -> dict:
    if not path.exists():
        return {"schema": SCHEMA, "runs": {}, "items": {}}
    data = json.loads(path.read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: unknown record schema {data.get('schema')!r}")
    return data


def save(record: dict, path: Path = RECORD_PATH) -> None:
    # Drop runs no entry refers to any more, so the file only says what is still true.
    used = {e["run"] for e in record["items"].values()}
    record["runs"] = {k: v for k, v in record["runs"].items() if k in used}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def entry(record: dict, item_hash: str) -> dict | None:
    return record["items"].get(item_hash)


def is_verified(record: dict, item_hash: str) -> bool:
    e = entry(record, item_hash)
    return bool(e) and e["outcome"] == "passed"


def load_awaiting(path: Path | None = None) -> dict:
    """{content hash: {"id", "reason", "since"}} of the items declared as awaiting a GPU run."""
    path = path or AWAITING_PATH
    return json.loads(path.read_text())["items"] if path.exists() else {}


def save_awaiting(items: dict, path: Path | None = None) -> None:
    path = path or AWAITING_PATH
    if not items:
        path.unlink(missing_ok=True)
        return
    doc = {"about": "GPU items with no GPU run yet; see docs/contributing.md. "
                    "CI passes them as skipped; their pages say they are not verified.",
           "items": items}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def may_await(record: dict, item_hash: str) -> bool:
    """Only an item never run in its current form, or skipped (say, it needs two GPUs and the run had
    one), may be declared as awaiting a GPU run. A failed or flagged run is never excused."""
    e = entry(record, item_hash)
    return e is None or e["outcome"] == "skipped"


def obsolete_awaiting(awaiting: dict, gpu_items, rec: dict) -> list[tuple[str, str]]:
    """(id, why) of declarations that no longer apply: the item has a GPU run since, or its content
    changed. An entry from a file not collected in this session is left alone."""
    current = {h for _, h, _ in gpu_items}
    collected = {collection_unit(nodeid) for nodeid, _, _ in gpu_items}
    out = []
    for h, e in awaiting.items():
        if not may_await(rec, h):
            out.append((e["id"], f"a GPU run recorded it since ({entry(rec, h)['outcome']})"))
        elif h not in current and collection_unit(e["id"]) in collected:
            out.append((e["id"], "its content changed (or it is gone) since it was declared"))
    return out


def collection_unit(nodeid: str) -> str:
    """The file an item is collected from (a page, or tests/test_programs.py for program runs): if
    that file was collected, every item of it was, so a declaration it lacks is out of date."""
    return nodeid.split("::", 1)[0]

# ----------------------------------------------------------------------------- queries


class NotRecorded(Exception):
    """A run of a program has no passing entry for its current code. `awaiting` is the reason given
    when the run is declared as awaiting a GPU run (records/awaiting-gpu.json), else None."""

    def __init__(self, run: programs.Run, awaiting: str | None = None, cases: list[str] | None = None):
        super().__init__(f"the GPU record has no passing run of {run.id} for its current code")
        self.run, self.awaiting = run, awaiting
        self.cases = cases  # patterns of the cases the run will print, when its declaration names them


def entry_for(run, record: dict) -> dict | None:
    """The entry of a Run or SanitizerRun for its current content, whatever its outcome."""
    return entry(record, run.content_hash())


def passing_entry(run, record: dict) -> dict | None:
    """The entry of a run for its current content if that run passed, else None."""
    e = entry_for(run, record)
    return e if e and e["outcome"] == "passed" else None


def earlier_rows(run: programs.Run, record: dict) -> list[dict] | None:
    """The BENCH rows of the latest passing entry of this run's id for any earlier content (what cases
    and rows the run produces), or None when it never passed."""
    found = [e for e in record["items"].values()
             if (e["id"] == run.id or e["id"].endswith(f"[{run.id}]")) and e["outcome"] == "passed"]
    if not found:
        return None
    return max(found, key=lambda e: run_info(record, e).get("started", ""))["benchmarks"]


def passing_bench_rows(program: programs.Program, record: dict, awaiting: dict | None = None,
                       skipped: list[NotRecorded] | None = None) -> tuple[list[dict], list[str]]:
    """The BENCH rows of a program's passing `course: bench` runs for its current code, each annotated
    with where it was measured (`_where`, `_where_text`: no comparison may join rows of two sittings or
    GPUs), and the runs' descriptions. Raises NotRecorded for the first bench run with no passing
    entry (with the reason when `awaiting` declares it as awaiting a GPU run). Given a `skipped` list,
    a run declared as awaiting is appended to it instead and its rows are left out: one awaiting run
    (MNIST's time-to-99) then does not hide the recorded rows of the program's other runs."""
    rows, runs = [], []
    for run in [r for r in program.runs() if r.bench]:
        e = passing_entry(run, record)
        if e is None:
            h = run.content_hash()
            declared = (awaiting or {}).get(h, {})
            missing = NotRecorded(run, declared.get("reason"), declared.get("cases"))
            if skipped is not None and missing.awaiting is not None:
                skipped.append(missing)
                continue
            raise missing
        info = run_info(record, e)
        rows += [{**b, "_where": where(info), "_where_text": describe_where(info)} for b in e["benchmarks"]]
        runs.append(describe_run(info))
    return rows, list(dict.fromkeys(runs))


def describe_entry(record: dict, e: dict) -> str:
    """describe_run of the run an entry came from."""
    return describe_run(run_info(record, e))


def measured_where(record: dict, e: dict) -> tuple:
    """where() of the run an entry came from."""
    return where(run_info(record, e))


def run_info(record: dict, e: dict) -> dict:
    return record["runs"].get(e["run"], {})


def describe_run(run: dict) -> str:
    """'NVIDIA H100 80GB HBM3 · CUDA 13.0 · driver 580.x · PyTorch 2.11.0 · 2026-11-21'."""
    parts = [run.get("gpu") or "unknown GPU", f"CUDA {run.get('cuda_runtime', '?')}"]
    if run.get("driver"):
        parts.append(f"driver {run['driver']}")
    for key, label in (("torch", "PyTorch"), ("cupy", "CuPy"), ("triton", "Triton")):
        if run.get(key):
            parts.append(f"{label} {run[key]}")
    parts.append(run.get("date", "?"))
    return " · ".join(parts)


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # not installed, or broken: the record simply omits it
        return None
    return getattr(mod, "__version__", None)


def visible_gpu() -> dict:
    """The GPU this process computes on: the first one CUDA_VISIBLE_DEVICES leaves visible (the GPU run
    pins each of its processes to one GPU), by index, UUID, name and driver; {} without nvidia-smi."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    gpus = [dict(zip(("index", "uuid", "name", "driver"), (s.strip() for s in line.split(",", 3)))) for line in out]
    gpus = [g for g in gpus if len(g) == 4]
    if not gpus:
        return {}
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    chosen = gpus[0]
    if visible:
        chosen = next((g for g in gpus if visible[0] in (g["index"], g["uuid"])), chosen)
    return {**chosen, "count": len(visible) if visible else len(gpus)}


def environment(command: str) -> dict:
    """The facts a run is recorded with: the GPU (which one of the machine's, and how many the process
    saw), the driver, CUDA and library versions, the date, and the sitting: one GPU run of the course
    (.ci/gpu-run.sh), which may span several processes and GPUs (COURSE_SITTING names it)."""
    gpu = visible_gpu()
    nvcc = None
    try:
        m = re.search(r"release ([\d.]+), V([\d.]+)", subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout)
        nvcc = m.group(2) if m else None
    except OSError:
        pass
    now = _dt.datetime.now(_dt.timezone.utc)
    started = now.isoformat(timespec="seconds")
    return {
        "gpu": gpu.get("name"),
        "gpu_index": gpu.get("index"),
        "gpu_uuid": gpu.get("uuid"),
        "gpus_visible": gpu.get("count"),
        "driver": gpu.get("driver"),
        "cuda_runtime": ".".join(nvcc.split(".")[:2]) if nvcc else None,
        "nvcc": nvcc,
        "torch": _version("torch"),
        "cupy": _version("cupy"),
        "triton": _version("triton"),
        "date": now.date().isoformat(),
        "started": started,
        "sitting": os.environ.get("COURSE_SITTING") or started,
        "command": command,
    }


def run_id(env: dict) -> str:
    """Unique per process: processes of one sitting start in the same second on several GPUs."""
    return f"{env['started']} {env['gpu']} gpu{env.get('gpu_index')} pid{os.getpid()}"


def where(run: dict) -> tuple:
    """What two rows must share to be compared: one sitting, one physical GPU. Runs recorded before
    sittings existed count as their own sitting each."""
    return (run.get("sitting") or run.get("started"), run.get("gpu_uuid") or run.get("gpu"))


def describe_where(run: dict) -> str:
    return f"sitting {run.get('sitting') or run.get('started')}, GPU {run.get('gpu_index', '?')} ({run.get('gpu_uuid') or run.get('gpu')})"


def merge(target: Path, sources: list[Path]) -> int:
    """Merge the entries of several record files (the shards of one GPU run) into target: for each
    item id the entry of the latest run wins, as when one session records item after item."""
    out = load(target)
    latest: dict[str, tuple[str, str, dict, dict]] = {}
    for path in [target, *sources]:
        rec = load(path)
        _merge_sittings(out, rec)
        for h, e in rec["items"].items():
            started = rec["runs"].get(e["run"], {}).get("started", "")
            if e["id"] not in latest or started >= latest[e["id"]][0]:
                latest[e["id"]] = (started, h, e, rec["runs"].get(e["run"], {}))
    out["items"] = {h: e for _, h, e, _ in latest.values()}
    for _, _, e, run in latest.values():
        out["runs"][e["run"]] = run
    save(out, target)
    return len(latest)


def _merge_sittings(into: dict, other: dict) -> None:
    """Every command `other` noted for a sitting, in `into` too (once), in the order they started."""
    for sitting, noted in other.get("sittings", {}).items():
        commands = into.setdefault("sittings", {}).setdefault(sitting, {"commands": []})["commands"]
        commands += [c for c in noted["commands"] if c not in commands]
        commands.sort(key=lambda c: c["started"])


def note_command(path: Path, sitting: str, command: dict) -> None:
    """Record one GPU-run command of a sitting (course/gpu_run.py: when it started and ended, how it was
    asked, what it left incomplete), so that the time a re-verification takes comes from the record."""
    rec = load(path)
    _merge_sittings(rec, {"sittings": {sitting: {"commands": [command]}}})
    save(rec, path)


def sitting_summary(rec: dict, sitting: str) -> dict | None:
    """A sitting's span and outcome from its noted commands and the entries its runs left in the record:
    None when no command of it was noted. `whole`: its first command ran every item, not only the stale
    ones (not --stale-only, or --stale-only --since the sitting's start), and its last command left no
    unit incomplete that the machine could run (units needing more GPUs than it has are counted apart)."""
    commands = rec.get("sittings", {}).get(sitting, {}).get("commands", [])
    if not commands:
        return None
    runs = {r for r, info in rec["runs"].items() if info.get("sitting") == sitting}
    entries = [e for e in rec["items"].values() if e["run"] in runs]
    return {
        "sitting": sitting,
        "commands": len(commands),
        "started": commands[0]["started"],
        "ended": max(c["ended"] for c in commands),
        "wall_s": max(c["ended"] for c in commands) - commands[0]["started"],
        "gpus": sorted({f"{c['gpus']} x {c['gpu']}" for c in commands}),
        "passed": sum(e["outcome"] == "passed" for e in entries),
        "not_passed": sum(e["outcome"] != "passed" for e in entries),
        # waived: the machine lacked what the item needs (a second GPU, say), not a failure
        "skipped": sum(e["outcome"] == "skipped" for e in entries),
        "needing_more_gpus": commands[-1].get("units_needing_more_gpus", 0),
        "whole": all(_reruns_all(c, sitting) for c in commands) and commands[-1]["incomplete_units"] == 0,
    }


def _reruns_all(command: dict, sitting: str) -> bool:
    """Whether a command re-ran every item not yet run in its sitting (ISO times: compare to the second)."""
    return not command["stale_only"] or (command.get("since") or "")[:19] >= sitting[:19]


def latest_sittings(rec: dict) -> tuple[dict | None, dict | None]:
    """(the latest noted sitting, the latest whole one) as sitting_summary gives them."""
    summaries = [s for s in (sitting_summary(rec, k) for k in rec.get("sittings", {})) if s]
    summaries.sort(key=lambda s: s["started"])
    whole = [s for s in summaries if s["whole"]]
    return (summaries[-1] if summaries else None), (whole[-1] if whole else None)


def prune(target: Path, listing: list[dict]) -> list[str]:
    """Drop the entries that belong to no current GPU item (`listing`: pytest --co --gpu-list), by
    neither content hash nor id: a page block whose text changed and moved, a renamed run, a removed
    program. Kept are an item's entry for its current content, whatever id it was recorded under (a
    block that only moved keeps its hash), and the entry under its current id for earlier content
    (earlier_rows reads it). Runs that no kept entry names go too. Returns the dropped ids. Of the rest
    of the harness only gpu_run.estimate read such entries, for the duration of a new item of the same
    shape; it falls back on a default."""
    rec = load(target)
    hashes, ids = {item["hash"] for item in listing}, {item["id"] for item in listing}
    keep = {h: e for h, e in rec["items"].items() if h in hashes or e["id"] in ids}
    dropped = sorted(e["id"] for h, e in rec["items"].items() if h not in keep)
    rec["items"] = keep
    named = {e["run"] for e in keep.values()}
    rec["runs"] = {r: info for r, info in rec["runs"].items() if r in named}
    save(rec, target)
    return dropped


def rekey(target: Path, old_listing: list[dict], new_listing: list[dict], awaiting_path: Path | None = None) -> int:
    """After a change to how keys are computed (not to what any item runs): move each entry of an
    item's current content from its old key to its new one. The listings are `pytest --co
    --gpu-list` of the same tree under the old and the new harness; an item's id joins them. Entries
    of earlier content keep their keys (earlier_rows reads them by id); declarations of items awaiting
    a GPU run move too. Returns how many entries moved."""
    new_by_id = {item["id"]: item["hash"] for item in new_listing}
    moves = {item["hash"]: new_by_id[item["id"]] for item in old_listing if item["id"] in new_by_id}
    rec = load(target)
    moved = sum(h in moves for h in rec["items"])
    rec["items"] = {moves.get(h, h): e for h, e in rec["items"].items()}
    save(rec, target)
    awaiting = load_awaiting(awaiting_path)
    if awaiting:
        save_awaiting({moves.get(h, h): e for h, e in awaiting.items()}, awaiting_path)
    return moved


def prune_command(target: Path, listing_path: Path) -> int:
    """python -m course.record prune TARGET LISTING: prune(), refusing a listing that names no item."""
    listing = json.loads(listing_path.read_text())
    if not listing:
        sys.exit(f"error: {listing_path} lists no GPU items; refusing to empty the record")
    gone = prune(target, listing)
    print(f"dropped {len(gone)} entries of ids that are no longer GPU items from {target}")
    return 0


def rekey_command(target: Path, old_path: Path, new_path: Path) -> int:
    """python -m course.record rekey TARGET OLD NEW: rekey(), refusing a listing that names no item."""
    old, new = (json.loads(p.read_text()) for p in (old_path, new_path))
    if not old or not new:
        sys.exit("error: a listing names no GPU items; refusing to re-key against it")
    print(f"{rekey(target, old, new)} entries of {target} re-keyed")
    return 0


def main(argv: list[str]) -> int:
    """python -m course.record merge TARGET SOURCE... | prune TARGET LISTING | rekey TARGET OLD NEW"""
    usage = ("usage: python -m course.record merge TARGET.json SOURCE.json [SOURCE.json ...]\n"
             "       python -m course.record prune TARGET.json LISTING.json   (LISTING: pytest --co --gpu-list)\n"
             "       python -m course.record rekey TARGET.json OLD-LISTING.json NEW-LISTING.json")
    if len(argv) >= 3 and argv[0] == "merge":
        print(f"{merge(Path(argv[1]), [Path(a) for a in argv[2:]])} items in {argv[1]}")
        return 0
    if len(argv) == 3 and argv[0] == "prune":
        return prune_command(Path(argv[1]), Path(argv[2]))
    if len(argv) == 4 and argv[0] == "rekey":
        return rekey_command(Path(argv[1]), Path(argv[2]), Path(argv[3]))
    sys.exit(usage)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
