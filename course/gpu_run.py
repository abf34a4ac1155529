"""The course's GPU run: every GPU item on every GPU of one machine, in as few commands as the items need.

    python -m course.gpu_run [--stale-only [--since ISO]] [--phase all|shared|alone] [--per-gpu N] [--limit-s S] [--fill]
                             [--out DIR] [pytest selection args such as -k EXPR]

(.ci/gpu-run.sh is the usual way in: it installs carried wheels first.) One invocation is one
*sitting*: every process it starts records COURSE_SITTING, so the record knows which rows were
measured together. Two phases:

- shared: the items that may share a GPU (checked runs, sanitizer runs, page blocks), dealt longest
  first to `--per-gpu` processes on each GPU, each pinned with CUDA_VISIBLE_DEVICES, each in its own
  copy of the tree (a page's blocks build into build/). Items of programs that need several GPUs
  (`course: gpus N`) run in one more process that sees every GPU.
- alone: benchmarks and profiler runs, one process per GPU, so each has its GPU to itself. Items are
  dealt in *units*: a program's benchmark together with every benchmark its pages compare it with
  (a results section over two programs, a claim's vs_program, a plot of several), so that compared
  rows come from one GPU, back to back. Runs of compared programs that differ in a shared option
  (`--batch 64` against `--batch 256`) are not compared with each other and may go to different GPUs.
  Multi-GPU benchmarks run first, with every GPU, before the per-GPU processes start.

When nothing left to run needs several GPUs, the phases run per GPU instead (`plan_lanes`): each GPU
goes on to its alone units as soon as its own shared processes are done, so one long sanitizer run
holds back only its own GPU's benchmarks.

A process pinned to one GPU is also pinned to that GPU's share of the CPU cores (`cpu_share`), so
that host work on one GPU's behalf (a float64 reference, a CPU-bound eager loop) cannot slow another.

Every invocation first prints its estimate of the whole schedule: the wall time by the recorded
durations (`estimated_wall_s`) and the commands of `--limit-s` it needs (`--plan` stops there, with
the deal). Units that will not fit in the time left are left for the next command; `--stale-only` then runs
every unit that is not complete: an item without a passing entry for its current content, or a unit
whose entries come from more than one sitting or GPU (it is run whole again). A unit that a time limit
cut off, some of whose benchmarks were measured in this sitting (COURSE_SITTING) on one GPU of this
machine (its UUID), is *resumed*: only its missing items, and its benchmarks measured before this sitting,
run on that GPU (`resumable`), so that its rows still come from one sitting on one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import programs, record
from . import directives

ROOT = programs.ROOT
DOCS = ROOT / "docs"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MERGE_LOCK = threading.Lock()  # the lanes' processes finish at their own times; one merge at a time
# Set by SIGTERM (a wrapper's timeout): the running processes are interrupted as at the time limit, and
# the command is still noted in the record, marked as stopped.
STOP = threading.Event()
DEFAULT_S = {"bench": 30.0, "alone": 20.0, "other": 5.0}  # estimates for items never recorded

_VS_PROGRAM = re.compile(r'vs_program=(?:"([^"]*)"|(\S+))')
_PROGRAM_PATH = re.compile(r"(?<![\w=\"/.-])(kernels/[\w./-]+\.(?:cu|py|cpp|c))")


def compared_programs(pages: list[Path] | None = None) -> list[set[str]]:
    """Sets of programs whose benchmark rows some page compares: the programs of one results section
    or plot, a claim's program and its vs_program."""
    links = []
    for page in pages if pages is not None else sorted(DOCS.rglob("*.md")):
        found = directives.find(page.read_text(), {"course:results", "course:plot", "claim:"})
        for d in found:
            if d.name != "claim:":
                paths = set(_PROGRAM_PATH.findall(d.args["path"] + d.args.get("opts", "")))
                if len(paths) > 1:
                    links.append(paths)
        for d in found:
            vs = _VS_PROGRAM.search(d.args["opts"]) if d.name == "claim:" else None
            if vs:
                links.append({d.args["path"], vs[1] or vs[2]})
    return links


def _options(args: list[str]) -> dict[str, str]:
    """--name value pairs of a run's arguments (switches are left out)."""
    return {a: b for a, b in zip(args, args[1:]) if a.startswith("--") and not b.startswith("--")}


def compatible(a: list[str], b: list[str]) -> bool:
    """Two runs whose rows a page may compare: no option they both set has two different values."""
    oa, ob = _options(a), _options(b)
    return all(oa[k] == ob[k] for k in oa.keys() & ob.keys())


@dataclass
class Unit:
    """Items that run in one process, in order: a page's blocks, or compared benchmarks."""

    key: str
    items: list[dict] = field(default_factory=list)
    cost: float = 0.0

    @property
    def gpus(self) -> int:
        return max(i["gpus"] for i in self.items)


def estimate(item: dict, rec: dict) -> float:
    """Seconds the item is expected to take: its recorded duration, doubled for a benchmark recorded
    before benchmarks were timed in two processes."""
    e = next((e for e in rec["items"].values() if e["id"] == item["id"]), None)
    if e is None:  # a renamed run (--budget-s 70 became 50): the latest recorded run of its shape
        shape = re.sub(r"\d+(\.\d+)?", "#", item["id"])
        e = max((e for e in rec["items"].values() if re.sub(r"\d+(\.\d+)?", "#", e["id"]) == shape),
                key=lambda e: record.run_info(rec, e).get("started", ""), default=None)
    if e is None:
        return DEFAULT_S["bench" if item["bench"] else "alone" if item["alone"] else "other"]
    d = float(e.get("duration_s", 5.0))
    if item["bench"] and not any("medians" in b for b in e.get("benchmarks", [])):
        d *= 2
    return d


def distinct_items(items: list[dict]) -> tuple[list[dict], list[str]]:
    """The items with one item per key, and the ids of those dropped: a page block that repeats a
    program's declared run has the run's key (course/items.py: program_run_of_block), and one run of
    it is one verification. The program's own item is kept (it checks more than the block does)."""
    kept: dict[str, dict] = {}
    for it in sorted(items, key=lambda it: not it["id"].startswith("tests/")):
        kept.setdefault(it["hash"], it)
    ids = {id(it) for it in kept.values()}
    return [it for it in items if id(it) in ids], [it["id"] for it in items if id(it) not in ids]


def make_units(items: list[dict], links: list[set[str]], rec: dict) -> list[Unit]:
    """Every item in exactly one unit: a page's blocks together; alone items of compared programs
    with compatible arguments together (connected components); everything else on its own."""
    parent = list(range(len(items)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i, j):
        parent[find(i)] = find(j)

    linked: dict[str, set[str]] = {}
    for group in links:
        for p in group:
            linked.setdefault(p, set()).update(group)
    first_of_page: dict[str, int] = {}
    for i, it in enumerate(items):
        if ".md::" in it["id"]:
            page = it["id"].split("::")[0]
            join(i, first_of_page.setdefault(page, i))
    # Compared benchmarks join one unit only while every pair in it is compatible: a run that sets no
    # --batch is compatible with --batch 64 and with --batch 256, but must not bridge them into one unit.
    benches = [i for i, it in enumerate(items) if it["alone"] and it["program"]]
    members: dict[int, list[int]] = {}
    for i in range(len(items)):
        members.setdefault(find(i), []).append(i)
    for x in benches:
        for y in benches:
            a, b = items[x], items[y]
            rx, ry = find(x), find(y)
            if x < y and rx != ry and b["program"] in linked.get(a["program"], {a["program"]}) | {a["program"]} \
                    and all(compatible(items[i]["args"], items[j]["args"]) for i in members[rx] for j in members[ry]):
                joined = members.pop(rx) + members.pop(ry)
                join(x, y)
                members[find(y)] = joined
    units: dict[int, Unit] = {}
    for i, it in enumerate(items):
        u = units.setdefault(find(i), Unit(key=it["id"]))
        u.items.append(it)
        u.cost += estimate(it, rec)
    return list(units.values())


def prepare_out_record(out_record: Path, course_record: Path = record.RECORD_PATH) -> None:
    """The run's own record starts as a copy of the course's. One left in --out by an earlier command
    keeps its entries and takes the newer ones the course's record has gained since (another command's
    results merged there): the latest entry of each item wins, so neither a plan nor a run repeats
    what is already recorded."""
    if out_record.exists():
        record.merge(out_record, [course_record])
    else:
        shutil.copy(course_record, out_record)


def is_complete(unit: Unit, rec: dict, since: str = "") -> bool:
    """Every item passed for its current content (in a run started at `since` or later, an ISO time);
    a unit of benchmarks, all in one sitting on one GPU."""
    entries = [record.entry(rec, it["hash"]) for it in unit.items]
    if not all(e and e["outcome"] == "passed" and record.run_info(rec, e).get("started", "") >= since
               for e in entries):
        return False
    benches = [e for it, e in zip(unit.items, entries) if it["bench"]]
    return len({record.measured_where(rec, e) for e in benches}) <= 1


def resumable(unit: Unit, rec: dict, sitting: str, gpu_by_uuid: dict[str, int],
              since: str = "") -> tuple[int, Unit] | None:
    """A unit cut off in an earlier command of this sitting: some of its benchmarks measured in `sitting`
    on one GPU of this machine. Returns that GPU's index and the unit's missing items, which then
    complete it in the same sitting on the same GPU: the runs with no passing entry and the benchmarks
    not measured there (a benchmark whose content did not change still has its entry from an earlier
    sitting, and a row from there must not be compared with this sitting's). None for any other unit,
    which runs whole."""
    entries = [record.entry(rec, it["hash"]) for it in unit.items]
    passed = [e is not None and e["outcome"] == "passed" and record.run_info(rec, e).get("started", "") >= since
              for e in entries]
    here = {record.measured_where(rec, e) for it, e, ok in zip(unit.items, entries, passed) if ok and it["bench"]}
    here = {(s, uuid) for s, uuid in here if s == sitting and uuid in gpu_by_uuid}
    if len(here) != 1:
        return None
    (where,) = here
    done = [ok and (not it["bench"] or record.measured_where(rec, e) == where)
            for it, e, ok in zip(unit.items, entries, passed)]
    missing = [it for it, d in zip(unit.items, done) if not d]
    if not missing:
        return None
    return gpu_by_uuid[where[1]], Unit(key=unit.key, items=missing, cost=sum(estimate(it, rec) for it in missing))


def deal(units: list[Unit], bins: int, capacity: float | None = None, loads: list[float] | None = None,
         pinned: dict[str, int] | None = None) -> tuple[list[list[Unit]], list[Unit]]:
    """Longest first to the least loaded bin (LPT), the bins starting at `loads` (default 0); a unit named
    in `pinned` goes to its bin (a resumed unit's GPU). With a capacity, a unit that does not fit is left
    over. Deterministic: the same units give the same deal."""
    loads = list(loads) if loads is not None else [0.0] * bins
    pinned = pinned or {}
    dealt, left = [[] for _ in range(bins)], []
    for u in sorted(units, key=lambda u: (-u.cost, u.key)):
        k = pinned[u.key] if u.key in pinned else loads.index(min(loads))
        if capacity is not None and loads[k] + u.cost > capacity:
            left.append(u)
            continue
        loads[k] += u.cost
        dealt[k].append(u)
    return dealt, left


# ----------------------------------------------------------------------------- running


def gpu_uuids() -> dict[str, int]:
    """This machine's GPUs, UUID to index (nvidia-smi); {} without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    pairs = [line.split(",") for line in out.splitlines() if line.count(",") == 1]
    return {uuid.strip(): int(index) for index, uuid in pairs if index.strip().isdigit()}


def gpu_name() -> str:
    """The first GPU's name as nvidia-smi gives it (the record's runs use the same name)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown GPU"
    return out.splitlines()[0].strip() if out.strip() else "unknown GPU"


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _copy_tree(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run(f"tar -C {ROOT} --exclude=./.git --exclude=./site --exclude=./.venv -cf - . | tar -C {dest} -xf -",
                   shell=True, check=True)


@dataclass
class Slot:
    name: str
    gpu: str | None  # CUDA_VISIBLE_DEVICES, or None for every GPU
    units: list[Unit]


def cpu_share(gpu: str | None, gpus: int) -> set[int] | None:
    """The CPU cores of one GPU's share of the host (1/gpus of the cores this process may use), so that
    one benchmark's host work (a float64 reference on every core, a CPU-bound eager PyTorch loop) does
    not slow another GPU's; None (every core) for a process that sees every GPU."""
    cores = sorted(os.sched_getaffinity(0))
    if gpu is None or gpus <= 1 or len(cores) < gpus:
        return None
    k, per = int(gpu), len(cores) // gpus
    return set(cores[k * per:(k + 1) * per])


def run_slots(slots: list[Slot], deadline: float, record_path: Path, work: Path, log, pytest_args: list[str],
              gpus: int = 1) -> bool:
    """Runs each slot as one pytest process in its own copy of the tree, all side by side; merges
    their record files into record_path. True when every process passed."""
    slots = [s for s in slots if s.units]
    procs = []
    for s in slots:
        tree = work / s.name
        _copy_tree(tree)
        ids = tree / "gpu-ids.txt"
        ids.write_text("".join(it["id"] + "\n" for u in s.units for it in u.items))
        shutil.copy(record_path, work / f"{s.name}.json")
        env = dict(os.environ, COURSE_GPU_RECORD=str(work / f"{s.name}.json"), **NO_MULTICAST)
        if s.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = s.gpu
        out = open(work / f"{s.name}.log", "w")
        cmd = [sys.executable, "-m", "pytest", "--gpu-record", "-q", "-ra", "-p", "no:cacheprovider",
               "--gpu-ids", str(ids), *pytest_args]
        cores = cpu_share(s.gpu, gpus)
        pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        procs.append((s, subprocess.Popen(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          preexec_fn=pin), out))
    ok = True
    shards = [work / f"{s.name}.json" for s, _, _ in procs]
    # Merge what the processes have recorded every half minute, so that a command killed at its
    # limit still leaves every finished item in record_path.
    while any(proc.poll() is None for _, proc, _ in procs) and time.time() < deadline and not STOP.is_set():
        STOP.wait(min(30.0, max(1.0, deadline - time.time())))
        with MERGE_LOCK:
            record.merge(record_path, shards)
    # At the limit (or on SIGTERM) every process still running is interrupted at once, and all of them
    # get the same 30 s to record what they finished: one after another, eight slow ones took 240 s.
    running = [proc for _, proc, _ in procs if proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGINT)  # pytest abandons the item in hand, keeping what finished items recorded
    grace_end = time.time() + 30
    for proc in running:
        try:
            proc.wait(timeout=max(0.1, grace_end - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
    for s, proc, out in procs:
        rc = proc.wait()
        out.close()
        ok &= rc == 0
        text = (work / f"{s.name}.log").read_text(errors="replace")
        log(f"===== {s.name} (GPU {s.gpu if s.gpu is not None else 'all'}): "
            f"{sum(len(u.items) for u in s.units)} items, exit {rc}\n{text}")
    if procs:
        with MERGE_LOCK:
            record.merge(record_path, shards)
    return ok


def plan_lanes(shared: list[Unit], alone: list[Unit], gpus: int, per_gpu: int, capacity: float | None,
               pinned: dict[str, int] | None = None) -> tuple[list[tuple[list[Slot], Slot]], list[Unit]]:
    """One lane per GPU for work that needs one GPU each: the GPU's shared slots side by side, then its
    alone units one after another, without waiting for the other GPUs. The shared units are dealt so
    that the lanes with the most alone work get the least shared work (each slot starts at its lane's
    alone load); then the alone units are dealt longest first to the lane that finishes its shared work
    first, within `capacity` seconds."""
    first, _ = deal(alone, gpus, pinned=pinned)
    offsets = [sum(u.cost for u in first[k % gpus]) for k in range(gpus * per_gpu)]
    dealt, _ = deal(shared, gpus * per_gpu, loads=offsets)
    slots = [Slot(f"shared-{k + 1}", str(k % gpus), d) for k, d in enumerate(dealt)]
    shared_s = [max([sum(u.cost for u in s.units) for s in slots if s.gpu == str(g)], default=0.0) for g in range(gpus)]
    alone_dealt, left = deal(alone, gpus, capacity=capacity, loads=shared_s, pinned=pinned)
    lanes = [([s for s in slots if s.gpu == str(g)], Slot(f"alone-{g + 1}", str(g), alone_dealt[g])) for g in range(gpus)]
    return lanes, left


def estimated_wall_s(shared: list[Unit], alone: list[Unit], gpus: int, per_gpu: int,
                     pinned: dict[str, int] | None = None) -> float:
    """Seconds the units would take by their estimates with no time limit, scheduled as main() schedules
    them: per-GPU lanes when no unit needs several GPUs; otherwise the shared phase (single-GPU processes
    and the two multi-GPU ones side by side), then the multi-GPU benchmarks, then one alone process per GPU."""
    def load(units: list[Unit]) -> float:
        return sum(u.cost for u in units)

    if all(u.gpus <= 1 for u in shared + alone):
        lanes, _ = plan_lanes(shared, alone, gpus, per_gpu, None, pinned)
        return max((max([load(s.units) for s in slots], default=0.0) + load(a.units) for slots, a in lanes),
                   default=0.0)
    single, _ = deal([u for u in shared if u.gpus <= 1], gpus * per_gpu)
    multi, _ = deal([u for u in shared if u.gpus > 1], 2)
    per_gpu_alone, _ = deal([u for u in alone if u.gpus <= 1], gpus, pinned=pinned)
    return (max([load(d) for d in single + multi], default=0.0) + load([u for u in alone if u.gpus > 1])
            + max([load(d) for d in per_gpu_alone], default=0.0))


def commands_needed(wall_s: float, limit_s: float) -> int:
    """Commands of `limit_s` seconds that `wall_s` seconds of work need: each command starts no work in
    its last 30 seconds (a unit longer than that resumes in the next command, on the same GPU)."""
    return max(1, -(-int(wall_s) // max(1, int(limit_s) - 30))) if wall_s > 0 else 0


def run_lanes(lanes: list[tuple[list[Slot], Slot]], deadline: float, record_path: Path, work: Path, log,
              pytest_args: list[str], gpus: int) -> bool:
    """Each lane in its own thread: its shared slots, then its alone slot."""
    results: list[bool] = []

    def lane(shared_slots: list[Slot], alone_slot: Slot) -> None:
        ok = run_slots(shared_slots, deadline, record_path, work, log, pytest_args, gpus)
        if alone_slot.units and (deadline - time.time() < 30 or STOP.is_set()):
            log(f"lane GPU {alone_slot.gpu}: no time left for its alone units; left for the next command")
            ok = False
        elif alone_slot.units:
            ok &= run_slots([alone_slot], deadline, record_path, work, log, pytest_args, gpus)
        results.append(ok)

    threads = [threading.Thread(target=lane, args=ln) for ln in lanes]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return all(results) and len(results) == len(lanes)


def parser() -> argparse.ArgumentParser:
    """The command line of `python -m course.gpu_run`; options it does not know go to pytest."""
    p = argparse.ArgumentParser(prog="python -m course.gpu_run", description=__doc__.splitlines()[0])
    p.add_argument("--stale-only", action="store_true", help="run only units that are not complete in the record")
    p.add_argument("--since", default="", metavar="ISO-TIME",
                   help="with --stale-only: entries of runs started before this count as stale (a whole "
                        "re-verification spread over several commands passes the first one's start)")
    p.add_argument("--phase", choices=("all", "shared", "alone"), default="all")
    p.add_argument("--per-gpu", type=int, default=2, help="shared-phase processes per GPU (default 2)")
    p.add_argument("--limit-s", type=float, default=float(os.environ.get("GPU_RUN_LIMIT_S", 540)),
                   help="stop starting work after this many seconds (default 540, or GPU_RUN_LIMIT_S)")
    p.add_argument("--out", default=os.environ.get("OUT") or "build/gpu-run", help="the record and log go here")
    p.add_argument("--fill", action="store_true",
                   help="alone phase: deal every unit, longest first, and let the time limit stop what does not "
                        "fit (for a last command: estimates err long, so dealing by them leaves out units that fit)")
    p.add_argument("--plan", action="store_true", help="print the deal and exit without running anything")
    p.add_argument("--gpus", type=int, default=None,
                   help="with --plan: plan for this many GPUs (default: the machine's, or 4 where it has none)")
    return p


def main(argv: list[str] | None = None) -> int:
    args, pytest_args = parser().parse_known_args(argv)
    started = time.time()
    deadline = started + args.limit_s
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / "gpu-record.json"
    prepare_out_record(record_path)
    logfile = open(out / "pytest-gpu.log", "a")

    def log(text: str) -> None:
        logfile.write(text.rstrip("\n") + "\n")
        logfile.flush()
        print(text.splitlines()[0] if text else "", flush=True)

    if not args.plan:
        signal.signal(signal.SIGTERM, lambda signum, frame: STOP.set())
    gpus = gpu_count()
    if gpus == 0 and not args.plan:
        log("error: no GPU found (nvidia-smi -L): the GPU run needs one")
        return 1
    if args.gpus is not None:
        if not args.plan or args.gpus < 1:
            log("error: --gpus N (N >= 1) goes with --plan: a run uses every GPU of its machine")
            return 2
        gpus = args.gpus
    gpus = gpus or 4
    os.environ.setdefault("COURSE_SITTING", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)))
    log(f"sitting {os.environ['COURSE_SITTING']} (started {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime(started))}): "
        f"{gpus} GPU(s), limit {args.limit_s:.0f} s")

    listing = out / "gpu-items.json"
    listing.unlink(missing_ok=True)  # a listing left in --out by an earlier run must not stand in for this one
    collected = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "--gpu-list",
                                str(listing), *pytest_args], cwd=ROOT, capture_output=True, text=True, check=False)
    if not listing.exists():
        log("error: collecting the GPU items failed (python -m pytest --co --gpu-list):\n"
            + (collected.stdout + collected.stderr)[-3000:])
        print((collected.stdout + collected.stderr)[-3000:], flush=True)
        return 1
    items, repeats = distinct_items(json.loads(listing.read_text()))
    if repeats:
        log(f"{len(repeats)} page blocks repeat a program's declared run and share its key; that run verifies "
            f"them: {', '.join(repeats)}")
    rec = record.load(record_path)
    units = make_units(items, compared_programs(), rec)
    pinned: dict[str, int] = {}
    if args.stale_only:
        units = [u for u in units if not is_complete(u, rec, args.since)]
        machine = gpu_uuids()
        for i, u in enumerate(units):
            resumed = resumable(u, rec, os.environ["COURSE_SITTING"], machine, args.since)
            if resumed:
                pinned[u.key], units[i] = resumed
                log(f"resuming {u.key} on GPU {resumed[0]}: {len(resumed[1].items)} of its {len(u.items)} items "
                    f"left, the rest measured in this sitting on that GPU")
    shared = [u for u in units if not any(it["alone"] for it in u.items)]
    alone = [u for u in units if any(it["alone"] for it in u.items)]
    log(f"{len(items)} GPU items in {len(units)} units to run: {len(shared)} shared "
        f"(~{sum(u.cost for u in shared):.0f} s), {len(alone)} alone (~{sum(u.cost for u in alone):.0f} s)")
    wall_s = estimated_wall_s(shared, alone, gpus, args.per_gpu, pinned)
    log(f"by the recorded durations: ~{wall_s:.0f} s of wall time on {gpus} GPU(s) with {args.per_gpu} shared "
        f"processes per GPU, {commands_needed(wall_s, args.limit_s)} command(s) of --limit-s {args.limit_s:.0f}")

    ok = True
    work = Path("/tmp/course-gpu-run")
    if not args.plan:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        # Compiled programs only: build-all refuses a file it does not build (a Python program).
        wanted = sorted({it["program"] for u in units for it in u.items
                         if it["program"] and not it["program"].endswith(".py")})
        built = subprocess.run([sys.executable, "-m", "course.toolchain", "build-all", str(os.cpu_count() or 1), *wanted],
                               cwd=ROOT, capture_output=True, text=True)
        log(built.stdout.strip() or built.stderr.strip()[-2000:])
    if args.phase == "all" and units and all(u.gpus <= 1 for u in units):
        # Nothing needs several GPUs: each GPU goes on to its benchmarks as soon as its own shared work
        # is done (a long sanitizer run on one GPU no longer holds back the other GPUs' benchmarks).
        lanes, left = plan_lanes(shared, alone, gpus, args.per_gpu,
                                 None if args.fill else max(0.0, deadline - time.time() - 30), pinned)
        for shared_slots, alone_slot in lanes:
            log(f"plan lane GPU {alone_slot.gpu}: {len(shared_slots)} shared processes, "
                f"~{max([sum(u.cost for u in s.units) for s in shared_slots], default=0):.0f} s; then alone: "
                + (", ".join(f"{u.key} (~{u.cost:.0f} s)" for u in alone_slot.units) or "nothing"))
        if left:
            ok = False
            log(f"left for the next command (--stale-only): {len(left)} units, "
                f"~{sum(u.cost for u in left):.0f} s: " + ", ".join(u.key for u in left))
        if not args.plan:
            ok &= run_lanes(lanes, deadline, record_path, work, log, pytest_args, gpus)
        shared, alone = [], []
    if args.phase in ("all", "shared") and shared:
        multi = [u for u in shared if u.gpus > 1]
        dealt, _ = deal([u for u in shared if u.gpus <= 1], gpus * args.per_gpu)
        slots = [Slot(f"shared-{k + 1}", str(k % gpus), d) for k, d in enumerate(dealt)]
        # Two processes share the multi-GPU units: each sees every GPU (a run checks as many GPUs as it
        # finds), and one process alone would set the shared phase's length.
        multi_dealt, _ = deal(multi, 2)
        slots += [Slot(f"shared-multi-{k + 1}", None, d) for k, d in enumerate(multi_dealt)]
        for s in slots:
            log(f"plan {s.name} on GPU {s.gpu if s.gpu is not None else 'all'}: {len(s.units)} units, "
                f"~{sum(u.cost for u in s.units):.0f} s")
        if not args.plan:
            ok &= run_slots(slots, deadline, record_path, work, log, pytest_args, gpus)
    if args.phase in ("all", "alone") and alone:
        multi = [u for u in alone if u.gpus > 1]
        left_s = deadline - time.time()
        if multi and not args.plan:
            ok &= run_slots([Slot("alone-multi", None, multi)], deadline, record_path, work, log, pytest_args, gpus)
            left_s = deadline - time.time()
        dealt, left = deal([u for u in alone if u.gpus <= 1], gpus,
                           capacity=None if args.fill else max(0.0, left_s - 30), pinned=pinned)
        for k, d in enumerate(dealt):
            log(f"plan alone-{k + 1} on GPU {k}: " + ", ".join(f"{u.key} (~{u.cost:.0f} s)" for u in d))
        if left:
            ok = False
            log(f"left for the next command (--phase alone --stale-only): {len(left)} units, "
                f"~{sum(u.cost for u in left):.0f} s: " + ", ".join(u.key for u in left))
        if not args.plan and not STOP.is_set():
            ok &= run_slots([Slot(f"alone-{k + 1}", str(k), d) for k, d in enumerate(dealt)], deadline, record_path,
                            work, log, pytest_args, gpus)
    if not args.plan:
        final = record.load(record_path)
        incomplete = [u for u in make_units(items, compared_programs(), final) if not is_complete(u, final, args.since)]
        log(f"{'stopped (SIGTERM)' if STOP.is_set() else 'done'} in {time.time() - started:.0f} s; "
            f"{len(incomplete)} units not complete in the record"
            + (": " + ", ".join(u.key for u in incomplete[:20]) if incomplete else ""))
        record.note_command(record_path, os.environ["COURSE_SITTING"], {
            "started": round(started, 1), "ended": round(time.time(), 1), "gpus": gpus, "gpu": gpu_name(),
            "per_gpu": args.per_gpu, "phase": args.phase, "stale_only": args.stale_only, "since": args.since,
            "units": len(units), "incomplete_units": sum(u.gpus <= gpus for u in incomplete),
            "units_needing_more_gpus": sum(u.gpus > gpus for u in incomplete), "stopped": STOP.is_set()})
        ok &= not incomplete
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
