"""failure_modes.py: what a reader sees when a collective breaks (a rank that hangs, a rank that dies,
ranks that call different collectives) and what a healthy NCCL start-up prints under NCCL_DEBUG=INFO.

Taught in docs/many-gpus/failure-modes.md. Needs at least 2 GPUs of one machine (on fewer it reports itself
waived); --backend gloo runs the first three scenarios on the CPU instead. Every scenario starts fresh
processes, one per rank (this same file, with --child), and a watchdog in this parent kills whatever is
still running after a wall-time limit, so no scenario can hang the program. Each CHECK line says what
was expected and what was seen: exit codes, the first line of the error, the seconds to detect it.

Run: python kernels/many-gpus/failure_modes.py                  (NCCL, on every GPU)
     python kernels/many-gpus/failure_modes.py --backend gloo    (CPU processes: hang, death, mismatch)

# course: gpu
# course: gpus 2
# course: run --timeout 5
"""

import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
import ranks  # noqa: E402  NVLink multicast off, the GPU count

ELEMENTS_1MIB = (1 << 20) // 4          # float32 elements in 1 MiB
GRACE_S = 150   # beyond the timeout: PyTorch's import, CUDA and NCCL start-up, the watchdog's flight-recorder dump


# --8<-- [start:child]
def child(args) -> None:
    """One rank of one scenario; a Python exception is printed and ends the rank at once with exit code 1
    (no teardown that could wait on the broken communicator)."""
    try:
        scenario_rank(args)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(course_tools.EXIT_FAIL)


def scenario_rank(args) -> None:
    """Prints `calling <collective> at <epoch seconds>` just before the collective that is meant to break,
    so the parent can time the detection."""
    import torch
    import torch.distributed as dist

    sys.stdout.reconfigure(line_buffering=True)
    rank, n, scenario = args.rank, args.world, args.child
    nccl = args.backend == "nccl"
    dev = torch.device("cuda", rank) if nccl else torch.device("cpu")
    options = {"device_id": dev} if nccl else {}                  # NCCL: the communicator is made here, eagerly
    if nccl:
        torch.cuda.set_device(dev)
    dist.init_process_group(args.backend, init_method=f"file://{args.store}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=args.timeout), **options)
    last = rank == n - 1
    x = torch.ones(ELEMENTS_1MIB, device=dev)
    if scenario == "hang":
        dist.all_reduce(x)   # one healthy collective first: NCCL connects the ranks at the first one
        sync(torch, nccl)
        if last:
            time.sleep(10 * args.timeout + GRACE_S)             # never joins: the parent kills it
        print(f"calling all_reduce at {time.time():.3f}")
        dist.all_reduce(x)
        sync(torch, nccl)
    elif scenario == "death":
        dist.all_reduce(x)                                        # one healthy collective first
        sync(torch, nccl)
        if last:
            os._exit(1)                                           # dies without a word, as a crash does
        print(f"calling all_reduce at {time.time():.3f}")
        dist.all_reduce(x)
        sync(torch, nccl)
    elif scenario == "mismatch":
        y = torch.ones(ELEMENTS_1MIB * (1 if rank == 0 else 2), device=dev)   # 1 MiB on rank 0, 2 MiB elsewhere
        print(f"calling all_reduce at {time.time():.3f}")
        dist.all_reduce(y)
        sync(torch, nccl)
        print(f"all_reduce returned: first={float(y[0])} want={float(n)}")
    elif scenario == "healthy":
        dist.all_reduce(x)
        sync(torch, nccl)
        ok = bool((x == n).all())
        print(f"all_reduce {'correct' if ok else 'WRONG'}: first={float(x[0])} want={float(n)}")
    dist.destroy_process_group()
    print("rank finished")


def sync(torch, nccl: bool) -> None:
    """Wait for the collective's kernel: with NCCL, dist.all_reduce only queues it on the GPU."""
    if nccl:
        torch.cuda.synchronize()
# --8<-- [end:child]


# --8<-- [start:launch]
def launch(args, scenario: str, n: int, env: dict, limit_s: float, awaited=None):
    """Start n fresh rank processes of `scenario` with `env` added; once the `awaited` ranks (default all)
    have exited, or after limit_s seconds, kill any still running, and return, per rank, (exit code or
    None if killed, when it exited in epoch seconds or None, stdout, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        procs, logs = [], []
        for r in range(n):
            out, err = open(f"{tmp}/{r}.out", "w+"), open(f"{tmp}/{r}.err", "w+")
            cmd = [sys.executable, __file__, "--child", scenario, "--rank", str(r), "--world", str(n),
                   "--store", f"{tmp}/store", "--backend", args.backend, "--timeout", str(args.timeout)]
            dumps = {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp}/flight_recorder_rank_"}   # any dump lands here
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, **dumps, **env}))
            logs.append((out, err))
        start = time.time()
        ended = [None] * n
        awaited = range(n) if awaited is None else awaited
        while time.time() - start < limit_s and any(ended[r] is None for r in awaited):
            for r, p in enumerate(procs):
                if ended[r] is None and p.poll() is not None:
                    ended[r] = time.time()
            time.sleep(0.05)
        results = []
        for r, p in enumerate(procs):
            code = p.returncode if ended[r] is not None else None
            if code is None:                                      # the watchdog: still running at the limit
                p.kill()
                p.wait()
            out, err = logs[r]
            out.seek(0), err.seek(0)
            results.append((code, ended[r], out.read(), err.read()))
            out.close(), err.close()
        written = sorted(f for f in os.listdir(tmp) if f.startswith("flight_recorder_rank_"))
        if written:
            print(f"  flight recorder dumps written: {', '.join(written)}")
        return results
# --8<-- [end:launch]


ERROR_LINE = re.compile(r"(watchdog caught|timed out|timeout|mismatch|connection closed|"
                        r"error|exception|abort)", re.IGNORECASE)
# The messages that name the failure, most telling first: NCCL's watchdog, the fingerprint check, Gloo's
# timeout and closed connection; then any error line.
TELLING = [re.compile(p, re.IGNORECASE) for p in (r"watchdog caught", r"mismatch between collectives",
                                                   r"timed out", r"connection closed|connection reset")]


def first_error(stderr: str) -> str:
    """The line a reader should look at first: the most telling line that names the failure, shortened."""
    lines = [line.strip() for line in stderr.splitlines()
             if "Traceback" not in line and not line.lstrip().startswith("File ")]
    for pattern in TELLING + [ERROR_LINE]:
        for line in lines:
            if pattern.search(line):
                return line if len(line) <= 220 else line[:217] + "..."
    return "(no error line)"


def detect_s(code_ended, stdout: str) -> float | None:
    """Seconds from `calling ... at T` to the process's exit, or None."""
    m = re.search(r"calling \S+ at (\d+\.\d+)", stdout)
    return code_ended - float(m.group(1)) if m and code_ended is not None else None


def describe(results, ranks_shown) -> str:
    parts = []
    for r in ranks_shown:
        code, ended, out, _ = results[r]
        t = detect_s(ended, out)
        parts.append(f"rank{r}:exit={'killed' if code is None else code}"
                     f"{'' if t is None else f',detected_after={t:.1f}s'}")
    return " ".join(parts)


def show_errors(results, ranks_shown) -> None:
    for r in ranks_shown:
        print(f"  rank {r} error: {first_error(results[r][3])}")


# --8<-- [start:scenarios]
def scenario_hang(args, n: int) -> bool:
    """After one healthy all_reduce, the last rank sleeps instead of calling the second: the others must fail
    after the group's timeout."""
    limit = args.timeout + GRACE_S
    print(f"\n== hang: after one all_reduce, rank {n - 1} sleeps, ranks 0..{n - 2} call a second "
          f"(timeout {args.timeout} s)")
    res = launch(args, "hang", n, {}, limit, awaited=range(n - 1))   # the sleeper is killed after
    survivors = range(n - 1)
    show_errors(res, survivors)
    ok = all(res[r][0] not in (None, 0) and ERROR_LINE.search(res[r][3]) for r in survivors)
    ok = ok and all((detect_s(res[r][1], res[r][2]) or 0) >= args.timeout * 0.9 for r in survivors)
    return course_tools.check_true("hang_detected_by_timeout", ok, n - 1,
                                   f"expected=survivors_exit_nonzero_after_timeout seen: {describe(res, survivors)}")


def scenario_death(args, n: int) -> bool:
    """The last rank calls os._exit(1) between two all_reduces: every survivor must exit non-zero."""
    limit = args.timeout + GRACE_S
    print(f"\n== death: rank {n - 1} exits (os._exit(1)) after one all_reduce, the others call a second")
    res = launch(args, "death", n, {}, limit)
    survivors = range(n - 1)
    show_errors(res, survivors)
    ok = res[n - 1][0] == 1 and all(res[r][0] not in (None, 0) for r in survivors)
    return course_tools.check_true("death_detected", ok, n,
                                   f"expected=dead_exit=1,survivors_exit_nonzero seen: {describe(res, range(n))}")


def scenario_mismatch(args, n: int) -> bool:
    """Rank 0 all-reduces 1 MiB, the others 2 MiB: under TORCH_DISTRIBUTED_DEBUG=DETAIL every rank must
    stop with the fingerprint check's message; by default, whatever happens is shown."""
    limit = args.timeout + GRACE_S
    print(f"\n== mismatch, default: rank 0 all-reduces 1 MiB, ranks 1..{n - 1} 2 MiB")
    res = launch(args, "mismatch", n, {}, limit)
    for r in range(n):
        code, _, out, err = res[r]
        said = [line for line in out.splitlines() if line.startswith("all_reduce returned")]
        print(f"  rank {r}: exit={'killed' if code is None else code} "
              f"{said[0] if said else first_error(err)}")
    print("\n== mismatch, TORCH_DISTRIBUTED_DEBUG=DETAIL")
    res = launch(args, "mismatch", n, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, limit)
    show_errors(res, range(n))
    caught = [r for r in range(n) if re.search(r"mismatch between collectives", res[r][3], re.IGNORECASE)]
    ok = bool(caught) and all(res[r][0] not in (None, 0) for r in range(n))
    return course_tools.check_true("mismatch_caught_by_detail", ok, n,
                                   f"expected=every_rank_exits_nonzero,'mismatch between collectives' "
                                   f"seen: ranks_naming_it={caught} {describe(res, range(n))}")
# --8<-- [end:scenarios]


# --8<-- [start:debug]
NCCL_LINES = re.compile(r"NCCL version|nRanks|Channel 00|via (P2P|SHM|NET)|Trees|Connected all|NVLS|"
                        r"P2P Chunksize|NCCL_\w+ set by environment")


def scenario_debug(args, n: int) -> bool:
    """A healthy all_reduce under NCCL_DEBUG=INFO: rank 0's lines that name the version, the transport,
    the rings and trees, and NVLS, once each."""
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL"}     # every subsystem: the filter below picks
    print(f"\n== healthy all_reduce with {' '.join(f'{k}={v}' for k, v in env.items())}, rank 0's key lines")
    res = launch(args, "healthy", n, env, args.timeout + GRACE_S)
    seen, transport = set(), False
    for line in (res[0][2] + res[0][3]).splitlines():
        m = NCCL_LINES.search(line)
        if m and "NCCL INFO" in line:
            key = m.group(0)
            transport = transport or key.startswith("via ")
            if key not in seen:
                seen.add(key)
                print("  " + re.sub(r"^.*?NCCL INFO ", "NCCL INFO ", line.strip())[:200])
    correct = all(res[r][0] == 0 and "all_reduce correct" in res[r][2] for r in range(n))
    return course_tools.check_true("healthy_init_readable", correct and transport, n,
                                   f"expected=exit_0,sum_correct,a_'via_<transport>'_line seen: "
                                   f"transport_line={transport} {describe(res, range(n))}")
# --8<-- [end:debug]


def main():
    p = course_tools.parser("Collectives that break, in fresh processes under a watchdog: a hang, a death, "
                            "a mismatch, and NCCL_DEBUG output")
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                   help="nccl (GPUs; every scenario) or gloo (CPU processes; hang, death, mismatch)")
    p.add_argument("--timeout", type=course_tools.int_in(1, 60), default=5,
                   help="the process group's timeout, seconds")
    p.add_argument("--gpus", type=int, default=0, help="use at most this many GPUs or gloo ranks (0: all; gloo: 2)")
    p.add_argument("--child", choices=("hang", "death", "mismatch", "healthy"), help=argparse_hidden())
    p.add_argument("--rank", type=int, default=0, help=argparse_hidden())
    p.add_argument("--world", type=int, default=0, help=argparse_hidden())
    p.add_argument("--store", default="", help=argparse_hidden())
    args = p.parse_args()
    if args.gpus < 0 or args.gpus == 1:
        p.error(f"--gpus must be 0 (all) or at least 2, got {args.gpus}")
    if args.child:
        child(args)
        return
    if args.backend == "nccl":
        torch, n = ranks.gpus_or_waive(args.gpus)                 # NVLink multicast off; waived below 2 GPUs
        nccl = torch.cuda.nccl.version()
        print(f"PyTorch {torch.__version__}, NCCL {'.'.join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}, "
              f"{n} x {torch.cuda.get_device_name(0)}, process group timeout {args.timeout} s")
    else:
        import torch
        n = args.gpus or 2
        print(f"PyTorch {torch.__version__}, gloo on the CPU, {n} ranks, process group timeout {args.timeout} s")
    ok = [scenario_hang(args, n), scenario_death(args, n), scenario_mismatch(args, n)]
    if args.backend == "nccl":
        ok.append(scenario_debug(args, n))
    sys.exit(0 if all(ok) else course_tools.EXIT_FAIL)


def argparse_hidden():
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
