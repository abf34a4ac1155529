"""ranks.py: one process per rank for the chapter's PyTorch programs (collectives.py, tensor_parallel.py):
the parent's GPU count (waived below two, NVLink multicast switched off first), its launch of one process
per rank through torch.multiprocessing, and each rank's life (join the process group, run the checks and
then the benchmark, leave, exit 1 if a check failed). Taught in docs/many-gpus/collectives.md.

# course: header
"""

import datetime
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# --8<-- [start:env]
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def multicast_off() -> None:
    """NVLink multicast stays off on the course's machines: set before NCCL or PyTorch starts."""
    for key, value in NO_MULTICAST.items():
        os.environ[key] = value


def gpus_or_waive(gpus: int):
    """(torch, how many GPUs to use): at most `gpus` (0: all); fewer than two waives the program."""
    multicast_off()
    torch = course_tools.require_cuda("torch")
    available = torch.cuda.device_count()
    if gpus:
        available = min(available, gpus)
    if available < 2:
        print(f"WAIVED needs 2 GPUs of one machine (this one has {torch.cuda.device_count()} visible"
              f"{', --gpus ' + str(gpus) if gpus else ''})")
        sys.exit(course_tools.EXIT_WAIVED)
    return torch, available
# --8<-- [end:env]


def world_sizes(available: int) -> list[int]:
    """The GPU counts to run: 2, 4, 8, ... up to what is available, and the total if it is not one."""
    sizes, n = [], 2
    while n <= available:
        sizes.append(n)
        n *= 2
    if available >= 2 and available not in sizes:
        sizes.append(available)
    return sizes


def parser(description: str, bench_help: str):
    """The options every program of the chapter takes: --bench, --seed and --gpus (at most this many)."""
    p = course_tools.peer_parser(description, bench_help)
    p.add_argument("--gpus", type=int, default=0, help="use at most this many GPUs (0: all)")
    return p


# --8<-- [start:spawn]
def spawn_each(worker, sizes, worker_args, unit: str = "rank") -> None:
    """For every rank count n in sizes, n processes worker(rank, n, *worker_args, store), which meet
    through `store`, a file in a fresh temporary folder; a failed rank ends the program with its reason."""
    import torch.multiprocessing as mp

    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:                     # the rendezvous: a file every rank opens
            try:
                mp.spawn(worker, args=(n, *worker_args, os.path.join(tmp, "store")), nprocs=n, join=True)
            except mp.ProcessExitedException as e:                     # a rank failed: its own output says why
                sys.exit(f"error: a rank of the {n}-{unit} run exited with code {e.exit_code}")
            except mp.ProcessRaisedException as e:                     # a rank raised: its message, no traceback
                last = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                sys.exit(f"error: a rank of the {n}-{unit} run raised {last}")
# --8<-- [end:spawn]


# --8<-- [start:life]
def run_rank(rank: int, n: int, store: str, backend: str, timeout_s: int, check, bench=None, **options) -> None:
    """One rank's life: join the process group (options: device_id, pg_options), check() (True when every
    check passed), then bench() if given and the checks passed; leave the group even when a step raised;
    exit 1 if a check failed."""
    import torch.distributed as dist

    sys.stdout.reconfigure(line_buffering=True)                        # rank 0's lines reach the pipe at once
    # a hung collective fails, it does not wait forever
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=timeout_s), **options)
    try:
        ok = check()
        if ok and bench is not None:
            bench()
    finally:
        dist.destroy_process_group()
    if not ok:
        sys.exit(course_tools.EXIT_FAIL)
# --8<-- [end:life]
