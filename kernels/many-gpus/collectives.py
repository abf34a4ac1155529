"""collectives.py: NCCL's five collectives through torch.distributed, one process per GPU, checked exactly
and then timed from 1 KiB to 1 GiB the way NVIDIA's nccl-tests reports them (algorithm and bus bandwidth).

Taught in docs/many-gpus/collectives.md. Needs at least 2 GPUs of one machine; on fewer it reports itself
waived. For every GPU count from 2 up to what the machine has (2, 4, 8, ... and the total), it starts one
process per GPU (torch.multiprocessing), checks all-reduce, reduce-scatter, all-gather, broadcast and
all-to-all bit for bit on random small integers (their float sums are exact), and under --bench times each
from 1 KiB to 1 GiB in steps of 4. NVLink multicast (NVLS) is switched off before NCCL starts.

Run: python kernels/many-gpus/collectives.py                  (checks, on 2 GPUs and on all of them)
     python kernels/many-gpus/collectives.py --bench          (also times them)
     python kernels/many-gpus/collectives.py --gpus 2 --bench (only 2 GPUs)

# course: gpu
# course: gpus 2
# course: run --count 250001 --seed 11
# course: run --count 1 --seed 12
# course: bench --bench
# course: measured algbw_gbps busbw_gbps busbw_gbps_*
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
import ranks  # noqa: E402  one process per GPU: the launch and each rank's life

# --8<-- [start:factors]
# nccl-tests' PERFORMANCE.md: a collective of S bytes on n ranks, timed t, has algorithm bandwidth S / t;
# the bus bandwidth multiplies in what each rank's links must carry, so that it can be compared with the
# hardware's one-direction link bandwidth whatever n is. S is the all-reduce's buffer, the reduce-scatter's
# input, the all-gather's output, the broadcast's buffer and each rank's all-to-all send buffer.
BUS_FACTOR = {
    "all-reduce": lambda n: 2 * (n - 1) / n,   # a reduce-scatter, then an all-gather
    "reduce-scatter": lambda n: (n - 1) / n,   # each rank receives n - 1 of the n chunks it sums
    "all-gather": lambda n: (n - 1) / n,       # each rank receives the n - 1 chunks it lacks
    "broadcast": lambda n: 1.0,                # every byte reaches every rank once (pipelined ring)
    "all-to-all": lambda n: (n - 1) / n,       # each rank keeps 1 / n of its buffer, sends the rest
}
# --8<-- [end:factors]
COLLECTIVES = tuple(BUS_FACTOR)
ELEMENT = 4  # bytes of a float32


def size_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def rank_input(torch, seed: int, rank: int, count: int):
    """Rank `rank`'s input: `count` random integers in [-64, 64] as float32, the same on every process
    that asks (a CPU generator seeded from seed and rank), so each rank can rebuild every other rank's
    input for its reference. Sums of up to 2^17 such values are exact in float32."""
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    return torch.randint(-64, 65, (count,), generator=g, dtype=torch.int32).to(torch.float32)


# --8<-- [start:check]
def expected_and_got(torch, dist, name: str, rank: int, n: int, c: int, seed: int):
    """Run collective `name` once on fresh inputs (chunk c: all-reduce and broadcast move c elements, the
    others n * c) with the output poisoned (NaN), and return (what this rank got, what it must hold)."""
    dev = torch.device("cuda", rank)
    total = c if name in ("all-reduce", "broadcast") else n * c
    inputs = [rank_input(torch, seed, r, total) for r in range(n)]   # every rank's input, rebuilt here
    mine = inputs[rank].to(dev, copy=True)                       # a copy even where dev is the CPU
    if name == "all-reduce":
        dist.all_reduce(mine)                                          # in place: the sum replaces the input
        return mine, torch.stack(inputs).sum(0)
    if name == "broadcast":
        buf = mine if rank == 0 else torch.full((c,), float("nan"), device=dev)
        dist.broadcast(buf, src=0)
        return buf, inputs[0]
    if name == "reduce-scatter":
        out = torch.full((c,), float("nan"), device=dev)
        dist.reduce_scatter_tensor(out, mine)                          # rank r gets chunk r of the sum
        return out, torch.stack(inputs).sum(0)[rank * c:(rank + 1) * c]
    if name == "all-gather":
        out = torch.full((n * c,), float("nan"), device=dev)
        dist.all_gather_into_tensor(out, mine[:c])                     # every rank gets every rank's chunk
        return out, torch.cat([x[:c] for x in inputs])
    out = torch.full((n * c,), float("nan"), device=dev)               # all-to-all
    dist.all_to_all_single(out, mine)                                  # chunk s of rank r goes to rank s
    return out, torch.cat([x[rank * c:(rank + 1) * c] for x in inputs])


def check_collectives(torch, dist, rank: int, n: int, c: int, seed: int) -> bool:
    """Each collective once, every rank's result compared bit for bit with its exact reference; rank 0
    prints one CHECK line per collective with the mismatches summed over ranks."""
    ok = True
    for k, name in enumerate(COLLECTIVES):
        got, want = expected_and_got(torch, dist, name, rank, n, c, seed + k)
        torch.cuda.synchronize()
        bad = int((got.cpu() != want).sum())                           # NaN != anything: a skipped element fails
        tally = torch.tensor([bad, got.numel()], dtype=torch.int64, device=got.device)
        dist.all_reduce(tally)
        bad_all, n_all = (int(v) for v in tally.cpu())
        passed = bad_all == 0 and n_all > 0
        if rank == 0:
            course_tools.check_true(f"{name}_{n}gpus_chunk{c}", passed, n_all,
                                    f"exact (every rank bit-equal to the integer reference), {bad_all} wrong")
        ok &= passed
    return ok
# --8<-- [end:check]


# --8<-- [start:time]
def time_collective(torch, dist, call, batch: int, repeats: int) -> float:
    """Milliseconds per call: `batch` calls back to back between CUDA events, after a barrier and a GPU-side
    sleep that lets the host queue them all (Python's launch cost stays out); per repeat the slowest rank's
    time counts (a collective is done when its last rank is), and the median of the repeats is returned."""
    for _ in range(3):
        call()                                                         # warm-up: connections, buffers
    times = []
    for _ in range(repeats):
        dist.barrier()                                                 # every host leaves it at about the same time
        torch.cuda._sleep(2_000_000)                                   # about a millisecond of GPU time
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / batch)
    slowest = torch.tensor(times, dtype=torch.float64, device="cuda")
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)                     # per repeat, the slowest rank
    return float(slowest.sort().values[repeats // 2])
# --8<-- [end:time]


def bench_collectives(torch, dist, rank: int, n: int, max_bytes: int) -> None:
    """Every collective at 1 KiB, 4 KiB, ... max_bytes on zeros (values do not change NCCL's speed, and
    zeros summed in place stay zeros); rank 0 prints the BENCH lines."""
    dev = torch.device("cuda", rank)
    elems = max_bytes // ELEMENT
    src = torch.zeros(elems, device=dev)
    dst = torch.zeros(elems, device=dev)
    for name in COLLECTIVES:
        size = 1024
        while size <= max_bytes:
            chunk = size // ELEMENT // n                               # each rank's share
            count = chunk * n                                          # S / 4 elements, rounded to n shares
            nbytes = count * ELEMENT
            calls = {
                "all-reduce": lambda: dist.all_reduce(src[:count]),
                "reduce-scatter": lambda: dist.reduce_scatter_tensor(dst[:chunk], src[:count]),
                "all-gather": lambda: dist.all_gather_into_tensor(dst[:count], src[:chunk]),
                "broadcast": lambda: dist.broadcast(src[:count], src=0),
                "all-to-all": lambda: dist.all_to_all_single(dst[:count], src[:count]),
            }
            big = size >= 64 << 20
            ms = time_collective(torch, dist, calls[name], batch=5 if big else 20, repeats=7 if big else 15)
            algbw = nbytes / (ms * 1e6)                                # GB/s
            busbw = algbw * BUS_FACTOR[name](n)
            if rank == 0:
                course_tools.bench(f"{name}, {n} GPUs, {size_label(nbytes)}", "NCCL through PyTorch, fp32", ms,
                                   nbytes, collective=name, gpus=n, size_bytes=nbytes,
                                   algbw_gbps=float(f"{algbw:.4g}"), busbw_gbps=float(f"{busbw:.4g}"),
                                   **{f"busbw_gbps_{n}gpus": float(f"{busbw:.4g}")})
            size *= 4


def worker(rank: int, n: int, args, store: str) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    timed = (lambda: bench_collectives(torch, dist, rank, n, args.max_mib << 20)) if args.bench else None
    # --8<-- [start:init]
    # device_id: the communicator is made at once, not at the first collective
    ranks.run_rank(rank, n, store, "nccl", timeout_s=120, device_id=torch.device("cuda", rank),
                   check=lambda: check_collectives(torch, dist, rank, n, args.count, args.seed), bench=timed)
    # --8<-- [end:init]


def main():
    p = ranks.parser("NCCL's collectives through torch.distributed: checked exactly, then timed",
                     "also time every collective from 1 KiB up")
    p.add_argument("--count", type=int, default=250001, help="elements per rank's chunk in the checks")
    p.add_argument("--max-mib", type=int, default=1024, help="largest message of the benchmark, in MiB")
    args = p.parse_args()
    if not 1 <= args.count <= 1 << 24:
        p.error(f"--count must be in [1, {1 << 24}], got {args.count}")
    if args.gpus < 0:
        p.error(f"--gpus must be 0 (all) or a positive count, got {args.gpus}")
    if not 1 <= args.max_mib <= 4096 or args.max_mib & (args.max_mib - 1):
        p.error(f"--max-mib must be a power of two in [1, 4096], got {args.max_mib}")
    torch, available = ranks.gpus_or_waive(args.gpus)                # NVLink multicast off; waived below 2 GPUs
    nccl = torch.cuda.nccl.version()
    print(f"PyTorch {torch.__version__}, NCCL {'.'.join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}, "
          f"{torch.cuda.get_device_name(0)}, GPU counts {ranks.world_sizes(available)}", flush=True)
    ranks.spawn_each(worker, ranks.world_sizes(available), (args,), unit="GPU")


if __name__ == "__main__":
    main()
