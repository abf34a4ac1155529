"""pytest plugin: the `gpu` marker, the GPU record, and stricter page-block runs.

- Items marked `gpu` (tests, program runs, and page blocks preceded by <!--pytest.mark.gpu-->) are
  skipped with the reason "no CUDA GPU" where none is present, and run for real where one is.
- Every GPU item gets a content hash (course/items.py, course/programs.py). `--gpu-record` writes
  each GPU item's outcome, duration, checks and benchmarks into records/gpu-record.json together
  with the GPU and versions (course/record.py); `--gpu-stale-only` runs only the GPU items whose current hash has no passing entry.
- pytest-codeblocks runs the page blocks; this plugin replaces its runner with one that runs from
  the repository root, shows the block's output when it fails, and applies the CHECK-line rules of
  course/verdicts.py to blocks that run course programs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import programs, record, toolchain, verdicts
from .items import block_hash, files_used_by, is_embed_only
from .normalise import computed_content, python_tokens

GPU_ITEMS = pytest.StashKey[list]()   # config: [(nodeid, hash, source)] of every GPU item collected
ITEM_HASH = pytest.StashKey[str]()     # item: its content hash
ITEM_OUTCOME = pytest.StashKey[dict]() # item: output facts for the record (checks, benchmarks)
RESULTS = pytest.StashKey[dict]()      # config: hash -> entry, written at the end of a --gpu-record run

_HAS_GPU: bool | None = None
BLOCK_TIMEOUT_S = 300  # a page block that runs longer than this fails
STDOUT_KEPT = 8000  # characters of a GPU item's output kept in the record


def has_gpu() -> bool:
    global _HAS_GPU
    if _HAS_GPU is None:
        _HAS_GPU = toolchain.has_gpu()
    return _HAS_GPU


def pytest_addoption(parser):
    group = parser.getgroup("course")
    group.addoption("--gpu-record", action="store_true",
                    help="write every GPU item's result into records/gpu-record.json (needs a GPU)")
    group.addoption("--gpu-stale-only", action="store_true",
                    help="run only the GPU items with no passing record for their current content")
    group.addoption("--gpu-ids", metavar="FILE", default=None,
                    help="run only the GPU items whose node ids FILE lists, one per line (the GPU run's "
                         "scheduler, course/gpu_run.py, deals items to GPUs this way)")
    group.addoption("--gpu-list", metavar="FILE", default=None,
                    help="write every collected GPU item (id, content hash, program, whether it needs the GPU "
                         "alone, how many GPUs) to FILE as JSON (use with --co)")
    group.addoption("--gpu-await", metavar="REASON", default=None,
                    help="declare every GPU item with no passing record as awaiting a GPU run, with this "
                         "reason, in records/awaiting-gpu.json (use with --co; drops declarations that no "
                         "longer apply). Pages then say those items are not verified.")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped with the reason 'no CUDA GPU' where none is present")
    config.addinivalue_line("markers", "bench: a benchmark run whose figures go to the GPU record")
    if config.getoption("--gpu-record") and not has_gpu():
        raise pytest.UsageError("--gpu-record needs a CUDA GPU, and none was found (nvidia-smi -L)")
    config.stash[RESULTS] = {}
    _install_block_runner()


# ----------------------------------------------------------------------------- hashing items


def _item_hash(item) -> str:
    block = getattr(item, "obj", None)
    if block is not None and hasattr(block, "syntax") and hasattr(block, "code"):
        return block_hash(block.syntax, block.code, block.marks)
    callspec = getattr(item, "callspec", None)
    if callspec is not None and isinstance(callspec.params.get("run"), (programs.Run, programs.SanitizerRun)):
        return callspec.params["run"].content_hash()
    # Any other test marked gpu: its module's source, its id, and what the item reads (item_hash_inputs).
    source = inspect.getsource(item.module)
    h = hashlib.sha256(python_tokens(source).encode())
    h.update(item.nodeid.encode())
    for name, content in item_hash_inputs(item):
        h.update(name.encode() + b"\0" + computed_content(name, content) + b"\0")
    return h.hexdigest()[:16]


def item_hash_inputs(item) -> list[tuple[str, bytes]]:
    """What a test marked gpu (not a page block or a program run) reads, as (name, content): what its
    module's `gpu_item_hash_inputs(item)` returns where it defines one (tests/test_exercises.py: one
    exercise's files), else the course files the module's source names (spell paths out in full,
    "kernels/ch/file.cu", so that they count)."""
    own = getattr(item.module, "gpu_item_hash_inputs", None)
    if own is not None:
        return own(item)
    named = files_used_by(inspect.getsource(item.module))
    return [(str(p.relative_to(programs.ROOT)), p.read_bytes()) for p in named]


def _item_source(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and isinstance(callspec.params.get("run"), (programs.Run, programs.SanitizerRun)):
        return callspec.params["run"].program.rel
    return item.nodeid.split("::")[0]


def _is_embed_only(item) -> bool:
    block = getattr(item, "obj", None)
    code = getattr(block, "code", None)
    return isinstance(code, str) and is_embed_only(code)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    embeds = [i for i in items if _is_embed_only(i)]
    if embeds:
        config.hook.pytest_deselected(items=embeds)
        items[:] = [i for i in items if i not in embeds]
    gpu_items = []
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        h = _item_hash(item)
        item.stash[ITEM_HASH] = h
        gpu_items.append((item.nodeid, h, _item_source(item)))
    config.stash[GPU_ITEMS] = gpu_items
    if config.getoption("--gpu-await") is not None:
        _declare_awaiting(config, gpu_items, config.getoption("--gpu-await").strip())

    if config.getoption("--gpu-stale-only"):
        rec = record.load()
        keep = [i for i in items if ITEM_HASH in i.stash and not record.is_verified(rec, i.stash[ITEM_HASH])]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

    if config.getoption("--gpu-ids"):
        wanted = set(Path(config.getoption("--gpu-ids")).read_text().splitlines())
        keep = [i for i in items if i.nodeid in wanted]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

    if not has_gpu():
        skip = pytest.mark.skip(reason="no CUDA GPU")
        for item in items:
            if item.get_closest_marker("gpu") is not None:
                item.add_marker(skip)


def pytest_collection_finish(session):
    # After every plugin's selection (-k, -m): the items this session would run.
    if session.config.getoption("--gpu-list"):
        _list_gpu_items(session.config.getoption("--gpu-list"), session.items)


def _list_gpu_items(path: str, items) -> None:
    out = []
    for item in items:
        if ITEM_HASH not in item.stash:
            continue
        callspec = getattr(item, "callspec", None)
        run = callspec.params.get("run") if callspec is not None else None
        prog = run.program if isinstance(run, (programs.Run, programs.SanitizerRun)) else None
        args = list((run.run if isinstance(run, programs.SanitizerRun) else run).args) if prog else []
        out.append({"id": item.nodeid, "hash": item.stash[ITEM_HASH], "source": _item_source(item),
                    "program": prog.rel if prog else None, "args": args,
                    "bench": isinstance(run, programs.Run) and run.bench,
                    "alone": needs_gpu_alone(item), "gpus": prog.min_gpus if prog else 1,
                    "reads": _item_reads(item)})
    Path(path).write_text(json.dumps(out, indent=1) + "\n")


def _item_reads(item) -> list[str] | None:
    """The course files the hash of a test marked gpu covers (tests/test_content_hashes.py compares
    them); None for page blocks and program runs, whose files their source and program tell."""
    if getattr(item, "callspec", None) is not None and "run" in item.callspec.params:
        return None
    if getattr(getattr(item, "obj", None), "syntax", None) is not None:
        return None
    module = getattr(item, "module", None)
    if module is None:
        return None
    return [name for name, _ in item_hash_inputs(item) if (programs.ROOT / name).is_file()]


def needs_gpu_alone(item) -> bool:
    """Benchmarks and profiler runs: their figures are only true with nothing else on the GPU."""
    if item.get_closest_marker("bench") is not None:
        return True
    block = getattr(item, "obj", None)
    text = getattr(block, "code", None) or item.nodeid
    return bool(re.search(r"\bncu\b|_ncu\.py|--bench\b|--tune\b", text))


def _declare_awaiting(config, gpu_items, reason: str) -> None:
    if not reason:
        raise pytest.UsageError("--gpu-await needs a reason: why can no GPU run cover these items now?")
    rec, old = record.load(), record.load_awaiting()
    today = time.strftime("%Y-%m-%d", time.gmtime())
    new = {h: old.get(h) or {"id": nodeid, "reason": reason, "since": today}
           for nodeid, h, _ in gpu_items if record.may_await(rec, h)}
    # Keep declarations from files not collected this time (a partial run says nothing about them).
    collected = {record.collection_unit(nodeid) for nodeid, _, _ in gpu_items}
    new.update({h: e for h, e in old.items()
                if record.collection_unit(e["id"]) not in collected and record.may_await(rec, h)})
    record.save_awaiting(new)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr:
        tr.write_line(f"{record.AWAITING_PATH.relative_to(programs.ROOT)}: {len(new)} GPU item(s) declared as "
                      f"awaiting a GPU run ({len(set(new) - set(old))} new, {len(set(old) - set(new))} dropped)")


# ----------------------------------------------------------------------------- recording


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if ITEM_HASH not in item.stash or not item.config.getoption("--gpu-record"):
        return
    if report.when == "setup" and report.skipped:
        status = "skipped"
    elif report.when == "call":
        status = "passed" if report.passed else ("skipped" if report.skipped else "failed")
    else:
        if report.failed:  # an error in setup or teardown fails the item too
            status = "failed"
        else:
            return
    facts = item.stash.get(ITEM_OUTCOME, {})
    duration = round(report.duration, 4)
    problems = []
    if status == "passed" and duration < 0.001:
        problems.append("took no measurable time")
    if status == "passed" and not facts.get("printed", True):
        problems.append("printed nothing")
    if problems:
        status = "flagged"
    results = item.config.stash[RESULTS]
    results[item.stash[ITEM_HASH]] = {
        "id": item.nodeid,
        "source": _item_source(item),
        "outcome": status,
        "problems": problems,
        "duration_s": duration,
        "checks": facts.get("checks", []),
        "benchmarks": facts.get("benchmarks", []),
        **{k: facts[k] for k in ("build_s", "process_s") if facts.get(k)},
        # The end of what it printed: pages can show a program's real output (course:output).
        "stdout": facts.get("stdout", "")[-STDOUT_KEPT:],
    }
    _write_record(item.config)


_RUN_ENV = pytest.StashKey[dict]()


def _write_record(config) -> int:
    """Merge this session's results into the record file; called after every GPU item, so that a run
    stopped at a time limit keeps what it verified."""
    fresh = config.stash[RESULTS]
    if not fresh:
        return 0
    if _RUN_ENV not in config.stash:
        config.stash[_RUN_ENV] = record.environment(" ".join(["python -m pytest", *sys.argv[1:]]))
    env = config.stash[_RUN_ENV]
    run_id = record.run_id(env)
    rec = record.load()
    rec["runs"][run_id] = env
    # A new entry replaces the older ones of the same item (same id), whatever their hash.
    fresh_ids = {e["id"] for e in fresh.values()}
    rec["items"] = {h: e for h, e in rec["items"].items() if e["id"] not in fresh_ids}
    for h, e in fresh.items():
        rec["items"][h] = {**e, "run": run_id}
    record.save(rec)
    return len(fresh)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not config.getoption("--gpu-record"):
        return
    written = _write_record(config)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr and written:
        tr.write_line(f"GPU record: {written} items written to {record.RECORD_PATH}")


# ----------------------------------------------------------------------------- page blocks


class BlockFailed(Exception):
    pass


# A block "runs a course program" when a command starts with build/... or ./build/..., or runs
# python on a file under kernels/. Such a block must print a passing CHECK line.
_RUNS_COURSE_PROGRAM = re.compile(r"(?:^|&&|\|\||;|\||\bthen\b|!)\s*(?:\w+=\S+\s+)*(?:\./)?build/\S+|python3?\s+kernels/\S+\.py", re.MULTILINE)


def _run_block(self):
    """Replacement for pytest_codeblocks' TestBlock.runtest (same semantics, better failures)."""
    block = self.obj
    if block.importorskip is not None:
        pytest.importorskip(block.importorskip)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    if block.syntax == "python":
        cmd = [sys.executable, "-c", block.code]
        proc = subprocess.run(cmd, cwd=programs.ROOT, capture_output=True, text=True, env=env, timeout=BLOCK_TIMEOUT_S)
    else:
        shell = "/bin/bash" if block.syntax == "bash" else "/bin/sh"
        proc = subprocess.run([shell, "-e", "-o", "pipefail", "-c", block.code] if block.syntax == "bash" else [shell, "-e", "-c", block.code],
                              cwd=programs.ROOT, capture_output=True, text=True, env=env, timeout=BLOCK_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    where = f"{self.path.relative_to(programs.ROOT)}:{block.lineno} ({block.syntax} block)"
    if proc.returncode != 0:
        raise BlockFailed(f"{where} exited with {proc.returncode}\n--- code\n{block.code}--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")
    runs_program = bool(_RUNS_COURSE_PROGRAM.search(block.code))
    verdict = verdicts.verdict(0, proc.stdout, proc.stderr, require_check=runs_program)
    if verdict.problems:
        raise BlockFailed(f"{where}: " + "; ".join(verdict.problems) + f"\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")
    if block.expected_output is not None:
        want, got = block.expected_output, proc.stdout
        if block.expected_output_ignore_whitespace:
            want, got = re.sub(r"\s+", "", want), re.sub(r"\s+", "", got)
        if want != got:
            raise BlockFailed(f"{where}: expected output\n{block.expected_output}but got\n{proc.stdout}")
    self.stash[ITEM_OUTCOME] = {
        "checks": verdict.checks,
        "benchmarks": verdict.benchmarks,
        "printed": bool(proc.stdout.strip() or proc.stderr.strip()),
        "stdout": proc.stdout,
        "elapsed": elapsed,
    }


def _block_failure(self, excinfo):
    if isinstance(excinfo.value, BlockFailed):
        return str(excinfo.value)
    return f"{excinfo.typename}: {excinfo.value}"


def _install_block_runner():
    try:
        from pytest_codeblocks.plugin import TestBlock
    except ImportError:  # pytest-codeblocks not installed: no page blocks are collected anyway
        return
    TestBlock.runtest = _run_block
    TestBlock.repr_failure = _block_failure
