"""tensor_parallel.py: a transformer MLP block (Y = GELU(X W1) W2, bf16) split Megatron-style across every
GPU of one machine, its all-gather and reduce-scatter overlapped with its GEMMs: by chunked pipelining over
NCCL, and by PyTorch's symmetric-memory fused ops, whose copies run on the copy engines.

Taught in docs/many-gpus/tensor-parallel.md. One process per GPU (torch.multiprocessing), as in
collectives.py. Rank r holds tokens [r T/n, (r+1) T/n) of the input (sequence parallel), columns
[r H/n, (r+1) H/n) of W1 and the same rows of W2. The block, on every rank:
  all-gather X -> X W1_r (column parallel) -> GELU -> H_r W2_r (row parallel, a partial sum) -> reduce-scatter
The ways, each a BENCH row:
  no overlap:     all-gather, GEMM, GELU, GEMM, reduce-scatter, one after the other
  chunked:        the tokens in C chunks; the collectives on a communication stream, each chunk's GEMMs
                  starting when its chunk has arrived, its reduce-scatter starting when its GEMMs are done
                  (CUDA events between the streams, no host synchronisation); with the knobs that decide
                  how NCCL shares the GPU with the GEMMs, each combination a row: C = 2, 4, 8, the streams
                  at high priority or not, NCCL limited to a few CTAs (SMs) or not
  fused:          torch.ops.symm_mem.fused_all_gather_matmul and fused_matmul_reduce_scatter: peer-to-peer
                  copies on the copy engines (no SMs) pipelined with per-rank GEMMs; skipped, on one line,
                  where this PyTorch lacks them or symmetric memory cannot start
  one GPU:        the whole block on one GPU (the peer)
and, for the page's "hidden" share, each way's collectives alone and its GEMMs alone.
Every way is checked against a float64 reference of the whole block on fresh random inputs, with
check_scaled's tolerance (twice the error of the same computation rounded where the GPU rounds).
Needs at least 2 GPUs (on fewer it is waived); runs on 2, 4, ... and all of them. --cpu N runs the same
code on N CPU processes with the gloo backend (no streams), for the tests.

Run: python kernels/many-gpus/tensor_parallel.py                    (checks, on 2 GPUs and on all of them)
     python kernels/many-gpus/tensor_parallel.py --bench            (also times them)
     python kernels/many-gpus/tensor_parallel.py --cpu 3 --tokens 42 --d-model 64 (CPU, 3 processes)

# course: gpu
# course: gpus 2
# course: run --tokens 840 --d-model 1024 --chunks 8 --seed 11
# course: run --tokens 8192 --d-model 4096 --chunks 4 --seed 12
# course: bench --bench
# course: measured comm_ms compute_ms hidden_pct
"""

import contextlib
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402
import ranks  # noqa: E402  one process per GPU: the launch and each rank's life
from collectives import time_collective  # noqa: E402

BENCH_CHUNKS = (2, 4, 8)
# How the collectives share the GPU with the GEMMs: (name, high-priority streams, NCCL's CTA limit or 0).
KNOBS = (("", False, 0), ("high-priority streams", True, 0), ("NCCL 8 CTAs", False, 8),
         ("high-priority streams, NCCL 8 CTAs", True, 8), ("high-priority streams, NCCL 16 CTAs", True, 16))


def chunk_bounds(rows: int, chunks: int) -> list[int]:
    """Row boundaries of `chunks` chunks of a rank's `rows` tokens, sizes differing by at most one, so any
    token count works: chunk k is rows [b[k], b[k+1])."""
    return [rows * k // chunks for k in range(chunks + 1)]


# --8<-- [start:streams]
class Streams:
    """The compute stream (the current one) and a communication stream, with events between them. On the
    CPU (gloo) there are no streams: every call runs in order and these methods do nothing."""

    def __init__(self, torch, device, chunks: int, high_priority: bool = False):
        self.torch, self.cuda = torch, device.type == "cuda"
        # a high-priority stream's blocks are scheduled before queued blocks of lower ones as SMs free up
        # (PyTorch maps -1 to the device's greatest priority)
        self.comm = torch.cuda.Stream(device, priority=-1 if high_priority else 0) if self.cuda else None
        self.compute = torch.cuda.current_stream(device) if self.cuda else None
        # one event per chunk and direction, reused by every call (a wait takes the latest record)
        self.arrived = [torch.cuda.Event() if self.cuda else None for _ in range(chunks)]
        self.computed = [torch.cuda.Event() if self.cuda else None for _ in range(chunks)]

    def on_comm(self):
        return self.torch.cuda.stream(self.comm) if self.cuda else contextlib.nullcontext()

    def fork(self) -> None:
        """The communication stream waits for what the compute stream has queued so far (the inputs, a
        poisoned output, the timer's start), so that nothing it does can run ahead of them."""
        if self.cuda:
            self.comm.wait_stream(self.compute)

    def signal(self, event, stream) -> None:
        if self.cuda:
            event.record(stream)

    def wait(self, stream, event) -> None:
        if self.cuda:
            stream.wait_event(event)

    def join(self) -> None:
        """The compute stream waits for everything queued on the communication stream."""
        if self.cuda:
            self.compute.wait_stream(self.comm)
# --8<-- [end:streams]


class Shard:
    """Rank r's share of the block and the buffers every call reuses (allocated once, outside the timing)."""

    def __init__(self, torch, dist, x, w1, w2, rank: int, n: int):
        tokens, d_model = x.shape
        hidden = w1.shape[1]
        rows, cols = tokens // n, hidden // n
        self.torch, self.dist, self.n = torch, dist, n
        self.x = x[rank * rows:(rank + 1) * rows].contiguous()           # my tokens (sequence parallel)
        self.w1 = w1[:, rank * cols:(rank + 1) * cols].contiguous()      # my columns of W1
        self.w2 = w2[rank * cols:(rank + 1) * cols].contiguous()         # the same rows of W2
        self.gathered = torch.empty(tokens, d_model, dtype=x.dtype, device=x.device)  # every rank's tokens
        self.partial = torch.empty(tokens, d_model, dtype=x.dtype, device=x.device)   # my partial sum of Y
        self.hidden = torch.empty(tokens, cols, dtype=x.dtype, device=x.device)
        self.out = torch.empty(rows, d_model, dtype=x.dtype, device=x.device)         # Y for my tokens

    def mlp(self, a, h, y) -> None:
        """y = GELU(a W1_r) W2_r for the gathered rows a, into preallocated h and y."""
        self.torch.matmul(a, self.w1, out=h)
        self.torch.matmul(self.torch.nn.functional.gelu(h, approximate="tanh"), self.w2, out=y)

    # --8<-- [start:no_overlap]
    def no_overlap(self):
        dist = self.dist
        dist.all_gather_into_tensor(self.gathered, self.x)   # rank-major: rank q's tokens at rows q T/n...
        self.mlp(self.gathered, self.hidden, self.partial)
        dist.reduce_scatter_tensor(self.out, self.partial)   # part q of the sum goes to rank q: my tokens
        return self.out
    # --8<-- [end:no_overlap]

    # --8<-- [start:chunked]
    def chunked(self, streams: Streams, bounds: list[int], do_comm: bool = True, do_compute: bool = True,
                group=None):
        """The block in len(bounds) - 1 chunks of every rank's tokens. Chunk k gathers rows [b_k, b_k+1) of
        every rank's shard into rows [n b_k, n b_k+1) of `gathered` (rank-major within the chunk), so its
        reduce-scatter hands each rank back exactly its own rows [b_k, b_k+1). do_comm / do_compute = False
        leave out the collectives or the GEMMs, to time the other alone; `group` is the process group whose
        NCCL communicator runs the collectives (None: the default one)."""
        dist, n, chunks = self.dist, self.n, len(bounds) - 1
        rows = [slice(n * bounds[k], n * bounds[k + 1]) for k in range(chunks)]
        streams.fork()
        with streams.on_comm():                               # every chunk's all-gather, queued at once
            for k in range(chunks):
                if do_comm:
                    dist.all_gather_into_tensor(self.gathered[rows[k]], self.x[bounds[k]:bounds[k + 1]],
                                                group=group)
                streams.signal(streams.arrived[k], streams.comm)
        for k in range(chunks):
            streams.wait(streams.compute, streams.arrived[k])     # chunk k has arrived
            if do_compute:
                self.mlp(self.gathered[rows[k]], self.hidden[rows[k]], self.partial[rows[k]])
            streams.signal(streams.computed[k], streams.compute)
            with streams.on_comm():
                streams.wait(streams.comm, streams.computed[k])   # its partial sums are ready
                if do_comm:
                    dist.reduce_scatter_tensor(self.out[bounds[k]:bounds[k + 1]], self.partial[rows[k]],
                                               group=group)
        streams.join()                                        # the output is complete on the compute stream
        return self.out
    # --8<-- [end:chunked]

    # --8<-- [start:fused]
    def fused(self, group_name: str):
        """The block with PyTorch's async-TP ops. The first pulls every rank's tokens from its symmetric-
        memory buffer with copy-engine copies, multiplying each rank's rows by W1_r as they arrive; the
        second computes, rank by rank, the partial sums of that rank's tokens, copies them to it and sums
        what it received (rows [r T/n, (r+1) T/n) of Y for rank r, as reduce_scatter_tensor gives)."""
        ops = self.torch.ops.symm_mem
        _, (h,) = ops.fused_all_gather_matmul(self.x, [self.w1], 0, group_name, return_A=False)
        a = self.torch.nn.functional.gelu(h, approximate="tanh")
        self.out.copy_(ops.fused_matmul_reduce_scatter(a, self.w2, "sum", 0, group_name))
        return self.out

    def fused_comm_only(self, group_name: str):
        """The same copies without the GEMMs, for the hidden share: symm_mem's low-contention all-gather
        and reduce-scatter, copy-engine copies through the same symmetric-memory buffers."""
        ops, wait = self.torch.ops.symm_mem, self.torch.ops._c10d_functional.wait_tensor
        wait(ops._low_contention_all_gather(self.x, group_name))
        self.out.copy_(wait(ops._low_contention_reduce_scatter(self.partial, "sum", group_name)))
        return self.out
    # --8<-- [end:fused]


def random_block(torch, device, tokens: int, d_model: int, hidden: int, seed: int):
    """X ~ N(0, 1), W1 and W2 scaled by 1/sqrt(fan-in) so every stage stays of order one; in bf16. Drawn on
    the CPU from one seed, so every rank holds the same block."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, d_model, generator=g)
    w1 = torch.randn(d_model, hidden, generator=g) / d_model ** 0.5
    w2 = torch.randn(hidden, d_model, generator=g) / hidden ** 0.5
    return tuple(t.to(device=device, dtype=torch.bfloat16) for t in (x, w1, w2))


# --8<-- [start:reference]
def references(torch, x, w1, w2, n: int):
    """The block in float64 (exact), and rounded where the GPU rounds, in float32 from the bf16 values:
    once as one GPU computes it (GEMM -> bf16, GELU -> bf16, GEMM -> bf16) and once as n ranks do (each
    rank's partial sum rounded to bf16, the partials summed in bf16)."""
    bf16 = torch.bfloat16

    def gelu(t):                                            # the tanh approximation, as the GPU computes it
        return torch.nn.functional.gelu(t, approximate="tanh")
    exact = gelu(x.double() @ w1.double()) @ w2.double()
    one = (gelu((x.float() @ w1.float()).to(bf16).float()).to(bf16).float() @ w2.float()).to(bf16)
    cols = w1.shape[1] // n
    split = None
    for q in range(n):
        a = gelu((x.float() @ w1[:, q * cols:(q + 1) * cols].float()).to(bf16).float()).to(bf16)
        part = (a.float() @ w2[q * cols:(q + 1) * cols].float()).to(bf16)
        split = part if split is None else (split.float() + part.float()).to(bf16)
    return exact, one, split
# --8<-- [end:reference]


# --8<-- [start:groups]
def knob_groups(torch, dist, n: int, cuda: bool) -> dict:
    """The process group of each knob in KNOBS (None: the default group), each with its own NCCL
    communicator and so its own streams and CTA limit. Every rank creates them in the same order. On the
    CPU they are plain gloo groups: the same plumbing, no streams, no CTAs. A knob this PyTorch cannot set
    is left out, with a PRUNED line."""
    groups = {}
    for knob, high_priority, ctas in KNOBS:
        if not knob:
            groups[knob] = None
        elif not cuda:
            groups[knob] = dist.new_group(list(range(n)))
        else:
            options = dist.ProcessGroupNCCL.Options()
            options.is_high_priority_stream = high_priority  # NCCL's own streams, where PyTorch launches on them
            if ctas:
                if not hasattr(options, "config") or not hasattr(options.config, "max_ctas"):
                    if dist.get_rank() == 0:
                        course_tools.pruned(f"tensor-parallel, chunked overlap, {knob}",
                                            f"PyTorch {torch.__version__} does not expose ncclConfig_t.maxCTAs")
                    continue
                options.config.max_ctas = ctas  # ncclConfig_t.maxCTAs: each collective's kernel takes <= ctas SMs
            groups[knob] = dist.new_group(list(range(n)), pg_options=options)
    return groups
# --8<-- [end:groups]


def fused_group(torch, dist, rank: int, n: int, device):
    """The default group's name if the symmetric-memory fused ops run here, else None after one PRUNED line
    saying why (a PyTorch without them, no GPUs, or symmetric memory that cannot start, e.g. without
    peer-to-peer access). A small block is run once; every rank learns whether all of them succeeded."""
    reason = "symmetric memory needs CUDA GPUs" if device.type != "cuda" else ""
    name = dist.group.WORLD.group_name
    if not reason:
        try:
            import torch.distributed._symmetric_memory as symm_mem
            missing = [op for op in ("fused_all_gather_matmul", "fused_matmul_reduce_scatter",
                                     "_low_contention_all_gather", "_low_contention_reduce_scatter")
                       if not hasattr(torch.ops.symm_mem, op)]
            if missing:
                raise RuntimeError(f"torch.ops.symm_mem lacks {', '.join(missing)}")
            with warnings.catch_warnings(), contextlib.suppress(RuntimeError):
                warnings.simplefilter("ignore")   # deprecated (no longer needed) in newer PyTorch, needed in older;
                symm_mem.enable_symm_mem_for_group(name)  # an error here means already enabled: the probe decides
            x, w1, w2 = random_block(torch, device, 8 * n, 16, 16 * n, seed=1)
            probe = Shard(torch, dist, x, w1, w2, rank, n)
            probe.fused(name)
            probe.fused_comm_only(name)
            torch.cuda.synchronize(device)
        except Exception as e:  # noqa: BLE001  any failure means: skip this way, say why
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    ready = torch.tensor([0 if reason else 1], dtype=torch.int32, device=device)
    dist.all_reduce(ready, op=dist.ReduceOp.MIN)
    if ready.item():
        return name
    if rank == 0:
        course_tools.pruned("tensor-parallel, symmetric-memory fused overlap",
                            f"skipped: {reason or 'it failed on another rank'} (PyTorch {torch.__version__})")
    return None


def gather_output(torch, dist, out, tokens: int):
    """Every rank's output rows, in token order, on every rank (an all-gather checked on collectives.md)."""
    full = torch.empty(tokens, out.shape[1], dtype=out.dtype, device=out.device)
    dist.all_gather_into_tensor(full, out.contiguous())
    return full


def check_all(torch, dist, rank: int, n: int, args, device, groups: dict, fused: str | None) -> bool:
    """Every way on fresh inputs, its output poisoned (NaN) before the run, against float64; rank 0 prints
    the CHECK lines. Also checks that every overlapped result agrees with the unoverlapped one. With
    --bench, on at most 512 tokens per rank: the same ways and checks, without minutes of NumPy on the
    CPU for the float64 comparison of a block the timing alone needs to be large."""
    tokens, d_model, hidden = args.tokens, args.d_model, args.hidden or 4 * args.d_model
    if args.bench:
        tokens = min(tokens, 512 * n)
    x, w1, w2 = random_block(torch, device, tokens, d_model, hidden, args.seed + n)
    shard = Shard(torch, dist, x, w1, w2, rank, n)
    exact, one, split = references(torch, x, w1, w2, n) if rank == 0 else (None, None, None)
    size = f"{n}ranks_{tokens}x{d_model}x{hidden}"
    ok, results = True, {}
    chunk_counts = sorted({args.chunks, *(BENCH_CHUNKS if args.bench else ())})
    ways = [("no_overlap", lambda: shard.no_overlap())]
    for c in chunk_counts:
        streams, bounds = Streams(torch, device, c), chunk_bounds(tokens // n, c)
        ways.append((f"chunked{c}", lambda s=streams, b=bounds: shard.chunked(s, b)))
    for knob, high_priority, _ in [k for k in KNOBS[1:] if k[0] in groups]:  # each knob's group, checked C
        streams, bounds = Streams(torch, device, args.chunks, high_priority), chunk_bounds(tokens // n, args.chunks)
        ways.append((f"chunked{args.chunks}_{course_tools.slug(knob)}",
                     lambda s=streams, b=bounds, g=groups[knob]: shard.chunked(s, b, group=g)))
    if fused:
        ways.append(("fused", lambda: shard.fused(fused)))
    ways.append(("one_gpu", lambda: torch.matmul(torch.nn.functional.gelu(x @ w1, approximate="tanh"), w2)))
    for name, run in ways:
        shard.out.fill_(float("nan"))
        shard.partial.fill_(float("nan"))
        got = run()
        full = got if name == "one_gpu" else gather_output(torch, dist, got, tokens)
        if rank == 0:
            results[name] = full
            rounded = one if name == "one_gpu" else split
            ok &= course_tools.check_scaled(f"tp_{name}_{size}", full, exact, rounded, row_len=d_model)
    if rank == 0:
        flat_split, flat_exact = course_tools._flat64(split), course_tools._flat64(exact)
        tol = course_tools.compare_scaled(flat_split, flat_exact, flat_split, 16 * d_model)["tol"]
        zeros_pass = course_tools.compare_scaled(0 * flat_split, flat_exact, flat_split, 16 * d_model)["ok"]
        ok &= course_tools.check_true(f"tp_zero_output_rejected_{size}", not zeros_pass, flat_exact.size,
                                      "the same check fails an all-zero output")
        # GEMMs of fewer rows may sum in another order (cuBLAS picks its kernel by shape), so on a GPU the two
        # may differ by the rounding each is allowed: 2 tol. On the CPU they are bit-equal (the test checks).
        base = results["no_overlap"].double()
        for name in [way for way in results if way not in ("no_overlap", "one_gpu")]:
            diff = float((results[name].double() - base).abs().max())
            ok &= course_tools.check_true(f"tp_{name}_agrees_with_no_overlap_{size}", diff <= 2 * tol,
                                          base.numel(),
                                          f"max |overlapped - unoverlapped| {diff:.3g} <= 2 tol {2 * tol:.3g}")
    verdict = torch.tensor([int(ok)], dtype=torch.int32, device=device)
    dist.broadcast(verdict, src=0)                          # every rank learns whether rank 0's checks passed
    return bool(verdict.item())


# --8<-- [start:bench]
def bench_all(torch, dist, rank: int, n: int, args, device, groups: dict, fused: str | None) -> None:
    """Every way timed like collectives.py's collectives (back to back between CUDA events, the slowest
    rank's time); every tensor-parallel row also carries its collectives alone and its GEMMs alone, and the
    share of the communication the overlap hid: (t_comm + t_compute - t_overlap) / t_comm."""
    tokens, d_model, hidden = args.tokens, args.d_model, args.hidden or 4 * args.d_model
    x, w1, w2 = random_block(torch, device, tokens, d_model, hidden, args.seed)
    shard = Shard(torch, dist, x, w1, w2, rank, n)
    flops = 4 * tokens * d_model * hidden                   # two GEMMs of 2 T D H
    nbytes = 2 * (2 * tokens * d_model + 2 * d_model * hidden)  # X, Y, W1, W2 in bf16
    case = f"MLP {tokens} tokens, d_model {d_model}, hidden {hidden}, {n} GPUs"

    def timed(call):
        return time_collective(torch, dist, call, batch=5, repeats=9)

    def row(impl, ms, peer=False, **fields):
        if rank == 0:
            course_tools.bench(case, impl, ms, nbytes, flops, peer=peer, gpus=n, tokens=tokens, **fields)

    def overlap_row(impl, comm_only, compute_only, both):
        """A row with its three timings from this run: collectives alone, GEMMs alone, both."""
        comm, compute, ms = timed(comm_only), timed(compute_only), timed(both)
        row(impl, ms, comm_ms=round(comm, 4), compute_ms=round(compute, 4),
            hidden_pct=round(100 * (comm + compute - ms) / comm, 1))

    whole = Streams(torch, device, 1), chunk_bounds(tokens // n, 1)
    overlap_row("tensor-parallel, no overlap, bf16", lambda: shard.chunked(*whole, do_compute=False),
                lambda: shard.chunked(*whole, do_comm=False), shard.no_overlap)
    for c in BENCH_CHUNKS:
        for knob, high_priority, _ in [k for k in KNOBS if k[0] in groups]:
            streams, bounds, group = Streams(torch, device, c, high_priority), chunk_bounds(tokens // n, c), \
                groups[knob]                              # the lambdas run at once: no late binding
            overlap_row(f"tensor-parallel, chunked overlap, {c} chunks, {knob + ', ' if knob else ''}bf16",
                        lambda: shard.chunked(streams, bounds, do_compute=False, group=group),
                        lambda: shard.chunked(streams, bounds, do_comm=False),
                        lambda: shard.chunked(streams, bounds, group=group))
    if fused:  # its GEMMs are n of T/n rows each, as the chunked block's with n chunks
        per_rank = Streams(torch, device, n), chunk_bounds(tokens // n, n)
        overlap_row("tensor-parallel, symmetric-memory fused overlap, bf16", lambda: shard.fused_comm_only(fused),
                    lambda: shard.chunked(*per_rank, do_comm=False), lambda: shard.fused(fused))
    y = torch.empty(tokens, d_model, dtype=x.dtype, device=device)
    ms = timed(lambda: torch.matmul(torch.nn.functional.gelu(x @ w1, approximate="tanh"), w2, out=y))
    row("one GPU, whole block, bf16", ms, peer=True)
# --8<-- [end:bench]


def worker(rank: int, n: int, args, store: str) -> None:
    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)  # reduce_scatter_tensor's rename in newer PyTorch
    if args.cpu:
        device, backend, kw = torch.device("cpu"), "gloo", {}
        torch.set_num_threads(1)                               # n processes share the CPU
    else:
        torch.cuda.set_device(rank)
        device, backend = torch.device("cuda", rank), "nccl"
        kw = {"device_id": device}                               # the default group: NCCL's default settings
        torch.backends.cuda.matmul.allow_tf32 = False           # the float32 reference stays float32
    setup = {}

    def check():
        setup["groups"] = knob_groups(torch, dist, n, device.type == "cuda")
        setup["fused"] = fused_group(torch, dist, rank, n, device)
        return check_all(torch, dist, rank, n, args, device, setup["groups"], setup["fused"])

    timed = (lambda: bench_all(torch, dist, rank, n, args, device, setup["groups"], setup["fused"])) \
        if args.bench else None
    ranks.run_rank(rank, n, store, backend, timeout_s=300, check=check, bench=timed, **kw)


def main():
    p = ranks.parser("A tensor-parallel MLP block, with and without its communication overlapped",
                     "also time every way")
    p.add_argument("--tokens", type=int, default=16384, help="tokens T of the whole block (a multiple of the ranks)")
    p.add_argument("--d-model", type=int, default=4096, help="model width D")
    p.add_argument("--hidden", type=int, default=0, help="hidden width H (0: 4 D; a multiple of the ranks)")
    p.add_argument("--chunks", type=int, default=4, help="chunks of the checked pipelined run")
    p.add_argument("--cpu", type=int, default=0, help="run on this many CPU processes (gloo) instead of GPUs")
    args = p.parse_args()
    if not 1 <= args.tokens <= 1 << 20:
        p.error(f"--tokens must be in [1, {1 << 20}], got {args.tokens}")
    if not 1 <= args.d_model <= 1 << 16:
        p.error(f"--d-model must be in [1, {1 << 16}], got {args.d_model}")
    if not 0 <= args.hidden <= 1 << 18:
        p.error(f"--hidden must be 0 (4 D) or in [1, {1 << 18}], got {args.hidden}")
    if not 1 <= args.chunks <= 64:
        p.error(f"--chunks must be in [1, 64], got {args.chunks}")
    if args.gpus < 0 or args.cpu < 0 or args.cpu == 1 or args.cpu > 16:
        p.error("--gpus must be >= 0; --cpu must be 0 (GPUs) or a process count in [2, 16]")
    if args.cpu and (args.bench or args.gpus):
        p.error("--cpu checks the logic only: it takes neither --bench nor --gpus")
    if args.cpu:
        ranks.multicast_off()
        import torch
        sizes = [args.cpu]
    else:
        torch, available = ranks.gpus_or_waive(args.gpus)  # NVLink multicast off; waived below 2 GPUs
        sizes = ranks.world_sizes(available)
    hidden = args.hidden or 4 * args.d_model
    chunk_counts = {args.chunks, *(BENCH_CHUNKS if args.bench else ())}
    for n in sizes:  # sequence and tensor parallelism split tokens and hidden units evenly over the ranks
        if args.tokens % n or hidden % n:
            p.error(f"--tokens ({args.tokens}) and the hidden width ({hidden}) must be multiples of every "
                    f"rank count run ({sizes}); {n} does not divide them")
        needed = max(chunk_counts | ({n} if args.bench else set()))  # the fused row's GEMMs: n chunks
        if needed > args.tokens // n:
            p.error(f"{needed} chunks need at least that many tokens per rank; "
                    f"{n} ranks hold {args.tokens // n} each")
    where = f"{args.cpu} CPU processes (gloo)" if args.cpu else f"{torch.cuda.get_device_name(0)}, GPU counts {sizes}"
    print(f"PyTorch {torch.__version__}, {where}", flush=True)
    ranks.spawn_each(worker, sizes, (args,))


if __name__ == "__main__":
    main()
