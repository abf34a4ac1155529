"""batch_invariance.py: the same logits whatever the batch. A served prompt shares its matrix products
with whatever else the server batched it with; if a kernel's reduction order depends on the batch size,
the prompt's logits change with the load, even though every kernel is deterministic run to run.

Taught in docs/serving/batch-invariance.md. What it does, in order:
  1. torch.matmul (bf16, cuBLAS), x[M][K] by W[K][N] at K = N = 4096 and K = 4096, N = 14336: row 0
     for M = 1 ... 2048 compared bit for bit with M = 1 (reported, not assumed), and every M run
     1,000 times against its own first result (CHECK: run-to-run deterministic).
  2. A batch-invariant matmul in Triton: one tile configuration and no split-K whatever M is, K summed
     in one order; checked against float64 (error relative to sum_k |x||w|) and bit for bit across M
     for row 0 and a random row, with NaN and inf rows in the batch that must not touch the others.
  3. A batch-invariant RMSNorm in Triton (one program per row, a fixed reduction order), checked the
     same way; torch's own rms_norm is reported, not assumed.
  4. A tiny model (RMSNorm, 4096 x 4096 matmul, SiLU, 4096 x 32000 matmul) whose prompt row is run
     1,000 times inside batches of 1 to 256 fresh random rows at a random position: with the Triton
     ops its logits must be bit-identical every time; with torch's ops the number of distinct results
     is printed.
  --bench: the invariant matmul against torch.matmul at M = 1 ... 4096, K = N = 4096.

Run: python kernels/serving/batch_invariance.py                   (the checks, on a GPU)
     python kernels/serving/batch_invariance.py --plant split-k   (the matmul splits K in two for small
                                                 batches: passes only if the invariance check catches it)
     python kernels/serving/batch_invariance.py --bench           (also times the matmul against cuBLAS)
     TRITON_INTERPRET=1 python kernels/serving/batch_invariance.py  (the same checks at small sizes, on
                                                 the CPU, in Triton's interpreter)

# course: gpu
# course: run
# course: run --plant split-k
# course: bench --bench
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


def parse_args():
    p = course_tools.peer_parser("Batch invariance: torch.matmul across batch sizes, batch-invariant Triton "
                                 "matmul and RMSNorm, a thousand runs of a tiny model",
                                 "time the invariant matmul against torch.matmul at M = 1 to 4096")
    p.add_argument("--plant", choices=("split-k",),
                   help="split K in two for small batches: passes only if the invariance check catches it")
    args = p.parse_args()
    if args.plant and args.bench:
        p.error("--plant checks the invariance check; it cannot be combined with --bench")
    return args


if __name__ == "__main__":
    ARGS = parse_args()  # before the slow imports, so that a bad option fails at once

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # Triton's interpreter: the kernels run on the CPU with CPU tensors
    import torch
    import triton
else:  # without a GPU, torch or triton: one plain line and exit 1
    torch, triton = course_tools.require_cuda("torch", "triton")
import triton.language as tl  # noqa: E402

DEVICE = "cpu" if INTERPRET else "cuda"
# The sizes: a Llama-like layer on the GPU; small ones (not tile multiples) in the interpreter.
if INTERPRET:
    SHAPES = [(96, 80), (96, 200)]
    BATCHES = [1, 2, 3, 4, 8, 16, 32, 64, 100, 130, 200]
    HIDDEN, VOCAB, RUNS, MAX_BATCH, REPEATS = 96, 300, 40, 20, 20
else:
    SHAPES = [(4096, 4096), (4096, 14336)]
    BATCHES = [1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    HIDDEN, VOCAB, RUNS, MAX_BATCH, REPEATS = 4096, 32000, 1000, 256, 1000
EPS = 1e-6
LIBRARY = "CPU" if INTERPRET else "cuBLAS"  # what torch.matmul calls

# --8<-- [start:matmul]
# One tile configuration for every M: the tile, the K step and the order of the K loop fix the order in
# which each output element's products are summed, so a row's result cannot depend on the batch.
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 128, 64, 8
NUM_WARPS, NUM_STAGES = 8, 3


# M is not specialised: Triton would otherwise compile other code for M = 1 or M % 16 == 0.
@triton.jit(do_not_specialize=["M"])
def matmul_kernel(x_ptr, w_ptr, out_ptr, M, N, K, k_start, k_stop, stride_xm, stride_wk, stride_om,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  UPCAST: tl.constexpr):
    """out[M][N] = x[M][K] w[K][N] over k in [k_start, k_stop), fp32 accumulation, one tile per program."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    # Grouped order (GROUP_M tile rows at a time share W's tiles in L2): it moves tiles, not sums.
    in_group = GROUP_M * tiles_n
    first_m = pid // in_group * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + pid % in_group % group_rows
    tile_n = pid % in_group // group_rows

    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None].to(tl.int64) * stride_xm + (k_start + ks)[None, :]
    w_ptrs = w_ptr + (k_start + ks)[:, None].to(tl.int64) * stride_wk + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_stop, BLOCK_K):  # always in this order, always in steps of BLOCK_K
        k_in = (k + ks) < k_stop
        x = tl.load(x_ptrs, mask=(rows[:, None] < M) & k_in[None, :], other=0.0)  # rows past M: zeros
        w = tl.load(w_ptrs, mask=k_in[:, None] & (cols[None, :] < N), other=0.0)
        if UPCAST:  # the interpreter has no bf16 dot (see flash_triton.py): fp32 inputs, exactly widened
            acc = tl.dot(x.to(tl.float32), w.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(x, w, acc)  # bf16 tensor-core products, fp32 accumulation
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
    out = out_ptr + rows[:, None].to(tl.int64) * stride_om + cols[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul_range(x, w, out, k_start, k_stop):
    M, N = out.shape
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](x, w, out, M, N, x.shape[1], k_start, k_stop, x.stride(0), w.stride(0), out.stride(0),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, UPCAST=INTERPRET,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)


def invariant_matmul(x, w):
    """x[M][K] @ w[K][N] in bf16, the same launch whatever M is."""
    check_matmul_args(x, w)
    out = torch.empty((x.shape[0], w.shape[1]), dtype=x.dtype, device=x.device)
    if out.numel() > 0:
        matmul_range(x, w, out, 0, x.shape[1])
    return out
# --8<-- [end:matmul]


# --8<-- [start:split_k]
def split_k_matmul(x, w):
    """What a library does for small batches, whose few tiles leave most SMs idle: split K in two, sum
    the halves. Deterministic, and accurate, but a row of a small batch is summed in another order."""
    check_matmul_args(x, w)
    M, K = x.shape
    if M > 64:
        return invariant_matmul(x, w)
    half = triton.cdiv(K // 2, BLOCK_K) * BLOCK_K
    parts = torch.empty((2, M, w.shape[1]), dtype=torch.float32, device=x.device)
    matmul_range(x, w, parts[0], 0, half)
    matmul_range(x, w, parts[1], half, K)
    return (parts[0] + parts[1]).to(x.dtype)
# --8<-- [end:split_k]


def check_matmul_args(x, w):
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"matmul needs x[M][K] and w[K][N], got {tuple(x.shape)} and {tuple(w.shape)}")
    if x.dtype != w.dtype or x.stride(1) != 1 or w.stride(1) != 1:
        raise ValueError("matmul needs x and w of one dtype, each with contiguous rows")


# --8<-- [start:rmsnorm]
BLOCK_D = 1024  # the row is summed in chunks of BLOCK_D lanes, whatever the batch


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, D, stride_x, stride_out, eps, BLOCK_D: tl.constexpr):
    """One program per row: out = x / sqrt(mean(x^2) + eps) * w, in fp32, rounded once."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    squares = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for start in range(0, D, BLOCK_D):  # lane i sums elements i, i + BLOCK_D, ... in this order
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=start + cols < D, other=0.0).to(tl.float32)
        squares += x * x
    inv_rms = tl.rsqrt(tl.sum(squares, axis=0) / D + eps)  # one tree over the lanes, fixed by BLOCK_D
    for start in range(0, D, BLOCK_D):
        keep = start + cols < D
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=keep, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=keep, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride_out + start + cols, (x * inv_rms * w).to(out_ptr.dtype.element_ty), mask=keep)


def invariant_rmsnorm(x, weight, eps=EPS):
    if x.dim() != 2 or weight.shape != (x.shape[1],) or x.shape[1] < 1 or x.stride(1) != 1:
        raise ValueError(f"rmsnorm needs x[M][D] with contiguous rows, D >= 1, and weight[D]; got "
                         f"{tuple(x.shape)} and {tuple(weight.shape)}")
    out = torch.empty_like(x)
    if x.shape[0] > 0:
        rmsnorm_kernel[(x.shape[0],)](x, weight, out, x.shape[1], x.stride(0), out.stride(0), eps, BLOCK_D=BLOCK_D)
    return out
# --8<-- [end:rmsnorm]


def torch_rmsnorm(x, weight, eps=EPS):
    return torch.nn.functional.rms_norm(x, (x.shape[1],), weight, eps)


# --------------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------------

# One bf16 rounding of an output moves it by at most 2^-8 of itself. (Triton's interpreter truncates
# fp32 to bf16 where the GPU rounds to nearest: up to 2^-7.)
BF16_ROUNDING = 2.0**-7 if INTERPRET else 2.0**-8
MATMUL_RTOL = BF16_ROUNDING
MATMUL_ACC_TOL = 2.0**-14   # fp32 accumulation, relative to sum_k |x_ik w_kj|: far above the 2^-24 K it meets
RMSNORM_RTOL = BF16_ROUNDING + 2.0**-11  # the rounding, plus the fp32 sum of squares and rsqrt


def randn(shape, gen, scale=1.0):
    return (torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float32) * scale).to(torch.bfloat16)


def bits(t):
    return t.contiguous().view(torch.int16)


def bf16_units(a, b):
    """|a - b| in units of the bf16 spacing at the larger of the two (0 where they are equal)."""
    a, b = a.double(), b.double()
    size = torch.maximum(a.abs(), b.abs()).clamp_min(2.0**-126)
    ulp = torch.exp2(torch.floor(torch.log2(size)) - 7)
    return float(((a - b).abs() / ulp).max()) if a.numel() else 0.0


def matmul_close(name, got, x, w):
    """got against float64, each element within one bf16 rounding of itself plus the fp32 accumulation's
    share of sum_k |x||w| (a dot product with cancellation has a small value and a large error budget)."""
    x64, w64 = x.double(), w.double()
    exact = x64 @ w64
    scale = x64.abs() @ w64.abs()
    return course_tools.check_close_each(name, got, exact, MATMUL_ACC_TOL * scale, MATMUL_RTOL)


def rows_across_batches(matmul, x_all, w, tracked):
    """For each tracked row r: its result in every batch of BATCHES that holds it, compared bit for bit
    with the smallest such batch. Returns {r: [(M, equal, bf16 units)]}."""
    first, found = {}, {r: [] for r in tracked}
    for M in BATCHES:
        y = matmul(x_all[:M], w)
        for r in tracked:
            if r >= M:
                continue
            if r not in first:
                first[r] = y[r].clone()
                continue
            equal = bool(torch.equal(bits(y[r]), bits(first[r])))
            found[r].append((M, equal, 0.0 if equal else bf16_units(y[r], first[r])))
    return found


def report_rows(label, found):
    """One line per tracked row: at how many batch sizes it differs, and by how much at most. Returns
    (every comparison bit-identical, how many comparisons)."""
    all_equal, compared = True, 0
    for r, res in found.items():
        differ = [m for m, eq, _ in res if not eq]
        units = max([u for _, eq, u in res if not eq], default=0.0)
        all_equal &= not differ
        compared += len(res)
        print(f"{label}: row {r} differs from its smallest batch at {len(differ)} of {len(res)} batch sizes"
              + (f" (M = {', '.join(map(str, differ))}), by up to {units:.3g} bf16 units" if differ else ""))
    return all_equal, compared


def random_row(gen, low):
    """A row that at least two batch sizes of BATCHES hold, so that it is compared."""
    return int(torch.randint(low, BATCHES[-2], (1,), generator=gen, device=DEVICE))


def torch_matmul_findings(gen):
    """Part 1: cuBLAS across batch sizes (reported) and run to run (checked)."""
    ok = True
    for K, N in SHAPES:
        x_all, w = randn((BATCHES[-1], K), gen), randn((K, N), gen, K**-0.5)
        label = f"torch.matmul (bf16, {LIBRARY}) K{K} N{N}"
        report_rows(label, rows_across_batches(torch.matmul, x_all, w, [0]))
        differ_runs = torch.zeros((), dtype=torch.int64, device=DEVICE)
        for M in BATCHES:
            x = x_all[:M]
            first = bits(torch.matmul(x, w))
            for _ in range(REPEATS - 1):  # counted on the device: no synchronisation per run
                differ_runs += (bits(torch.matmul(x, w)) != first).any()
        n_runs = REPEATS * len(BATCHES)
        ok &= course_tools.check_true(f"torch_matmul_run_to_run_K{K}_N{N}", int(differ_runs) == 0, n_runs,
                                      f"{int(differ_runs)} of {n_runs} runs differ from their batch's first run")
    return ok


def matmul_checks(gen, matmul, name, check_invariance=True):
    """Part 2: accuracy and invariance of a matmul; returns (accurate, invariant). Without
    check_invariance the invariance is only reported (the --plant run judges it)."""
    accurate = invariant = True
    for K, N in SHAPES:
        x_all, w = randn((BATCHES[-1], K), gen), randn((K, N), gen, K**-0.5)
        accurate &= matmul_close(f"{name}_M{BATCHES[-1]}_K{K}_N{N}", matmul(x_all, w), x_all, w)
        rand_row = random_row(gen, 1)
        same, compared = report_rows(f"{name} K{K} N{N}", rows_across_batches(matmul, x_all, w, [0, rand_row]))
        invariant &= same
        if check_invariance:
            course_tools.check_true(f"{name}_rows_K{K}_N{N}", same, compared,
                                    f"rows 0 and {rand_row} bit-identical in every batch that holds them")
    return accurate, invariant


def matmul_edge_checks(gen):
    """Odd sizes, one element, an empty batch, and NaN and inf rows that must stay in their rows."""
    ok = True
    for M, K, N in [(37, 333, 1000), (1, 1, 1), (129, 64, 129)]:  # each a compile: a few, not many
        x, w = randn((M, K), gen), randn((K, N), gen, K**-0.5)
        ok &= matmul_close(f"invariant_matmul_M{M}_K{K}_N{N}", invariant_matmul(x, w), x, w)
    empty = invariant_matmul(torch.empty((0, 64), dtype=torch.bfloat16, device=DEVICE), randn((64, 5), gen))
    ok &= course_tools.check_true("invariant_matmul_empty_batch", tuple(empty.shape) == (0, 5), 1)
    K, N, M = SHAPES[0][0], SHAPES[0][1], 77
    x, w = randn((M, K), gen), randn((K, N), gen, K**-0.5)
    clean = invariant_matmul(x, w)
    x[5, 3], x[40, K - 1] = float("nan"), float("inf")
    dirty = invariant_matmul(x, w)
    bad_rows = torch.zeros(M, dtype=torch.bool, device=DEVICE)
    bad_rows[5] = bad_rows[40] = True
    others_same = torch.equal(bits(dirty[~bad_rows]), bits(clean[~bad_rows]))
    poisoned = bool((~torch.isfinite(dirty[bad_rows].float())).all())
    ok &= course_tools.check_true("invariant_matmul_nan_inf_rows_stay_in_their_rows", others_same and poisoned,
                                  M, f"other rows bit-identical: {others_same}; "
                                  f"NaN/inf rows all non-finite: {poisoned}")
    try:
        invariant_matmul(x, randn((K + 1, N), gen))
        ok &= course_tools.check_true("invariant_matmul_rejects_bad_shapes", False, 1)
    except ValueError:
        ok &= course_tools.check_true("invariant_matmul_rejects_bad_shapes", True, 1)
    return ok


def rmsnorm_close(name, got, x, weight):
    x64, w64 = x.double(), weight.double()
    exact = x64 * torch.rsqrt((x64 * x64).mean(dim=1, keepdim=True) + EPS) * w64
    return course_tools.check_close_each(name, got, exact, 0.0, RMSNORM_RTOL)


def rmsnorm_checks(gen):
    """Part 3: the Triton RMSNorm against float64 and across batches; torch's rms_norm reported."""
    D = SHAPES[0][0]
    ok = True
    weight = (torch.rand(D, generator=gen, device=DEVICE) + 0.5).to(torch.bfloat16)
    x_all = randn((BATCHES[-1], D), gen, 3.0)
    x_all[1] = 0          # eps alone: zeros out, not NaN
    x_all[2] *= 2.0**-20  # a quiet row: small outputs, held to their own size
    ok &= rmsnorm_close(f"invariant_rmsnorm_M{BATCHES[-1]}_D{D}", invariant_rmsnorm(x_all, weight), x_all, weight)
    for M, Dodd in [(5, 4099), (1, 1)]:
        x, w = randn((M, Dodd), gen), (torch.rand(Dodd, generator=gen, device=DEVICE) + 0.5).to(torch.bfloat16)
        ok &= rmsnorm_close(f"invariant_rmsnorm_M{M}_D{Dodd}", invariant_rmsnorm(x, w), x, w)
    rand_row = random_row(gen, 3)
    same, compared = report_rows("invariant_rmsnorm", rows_across_batches(invariant_rmsnorm, x_all, weight,
                                                                          [0, rand_row]))
    ok &= course_tools.check_true("invariant_rmsnorm_rows", same, compared,
                                  f"rows 0 and {rand_row} bit-identical in every batch that holds them")
    nan_x = x_all[:8].clone()
    nan_x[4, 7] = float("nan")
    clean, dirty = invariant_rmsnorm(x_all[:8], weight), invariant_rmsnorm(nan_x, weight)
    keep = torch.arange(8, device=DEVICE) != 4
    stays = torch.equal(bits(dirty[keep]), bits(clean[keep])) and bool(torch.isnan(dirty[4].float()).all())
    ok &= course_tools.check_true("invariant_rmsnorm_nan_row_stays_in_its_row", stays, 8)
    report_rows("torch rms_norm (bf16)", rows_across_batches(torch_rmsnorm, x_all, weight, [0, rand_row]))
    return ok


# --8<-- [start:model]
def tiny_model(x, norm_w, w_up, w_out, rmsnorm, matmul):
    """RMSNorm, a square projection, SiLU (elementwise, so batch-invariant in any library), the logits."""
    h = matmul(rmsnorm(x, norm_w), w_up)
    return matmul(torch.nn.functional.silu(h), w_out)


def thousand_runs(gen):
    """The prompt row, RUNS times, each time at a random place in a batch of 1 to MAX_BATCH fresh
    random rows (every tenth batch has a NaN row beside it): its logits with each set of ops."""
    norm_w = (torch.rand(HIDDEN, generator=gen, device=DEVICE) + 0.5).to(torch.bfloat16)
    w_up, w_out = randn((HIDDEN, HIDDEN), gen, HIDDEN**-0.5), randn((HIDDEN, VOCAB), gen, HIDDEN**-0.5)
    prompt = randn((HIDDEN,), gen)
    ops = {"batch-invariant Triton ops": (invariant_rmsnorm, invariant_matmul),
           f"torch ops (rms_norm, matmul: {LIBRARY})": (torch_rmsnorm, torch.matmul)}
    logits = {name: torch.empty((RUNS, VOCAB), dtype=torch.bfloat16, device=DEVICE) for name in ops}
    sizes = torch.randint(1, MAX_BATCH + 1, (RUNS,), generator=gen, device=DEVICE)
    places = (torch.rand(RUNS, generator=gen, device=DEVICE) * sizes).long().clamp_max(sizes - 1)
    sizes, places = sizes.tolist(), places.tolist()
    for run, (batch, place) in enumerate(zip(sizes, places)):
        x = randn((batch, HIDDEN), gen)
        x[place] = prompt
        if run % 10 == 9 and batch > 1:
            x[(place + 1) % batch, 0] = float("nan")  # a broken neighbour must not reach the prompt
        for name, (rmsnorm, matmul) in ops.items():
            logits[name][run] = tiny_model(x, norm_w, w_up, w_out, rmsnorm, matmul)[place]
    return logits, sizes
# --8<-- [end:model]


def distinct(rows):
    import numpy as np

    return len(np.unique(bits(rows).cpu().numpy(), axis=0))


def model_checks(gen):
    logits, sizes = thousand_runs(gen)
    ok = True
    for name, rows in logits.items():
        count = distinct(rows)
        finite = bool(torch.isfinite(rows.float()).all())
        line = (f"{name}: {count} distinct prompt logits in {len(sizes)} runs (batches of {min(sizes)} to "
                f"{max(sizes)} rows), all finite: {finite}")
        if name.startswith("batch-invariant"):
            ok &= course_tools.check_true("invariant_model_thousand_runs", count == 1 and finite, len(sizes), line)
        else:
            print(line)
    return ok


def planted_split_k(gen):
    """--plant split-k: the split-K matmul must pass the accuracy check and fail the invariance check."""
    accurate, invariant = matmul_checks(gen, split_k_matmul, "split_k_matmul", check_invariance=False)
    caught = accurate and not invariant
    print(f"CHECK {'PASS' if caught else 'FAIL'} planted_split_k_caught n={len(SHAPES)} "
          f"accurate={'yes' if accurate else 'NO'} "
          f"invariance_check={'rejected it' if not invariant else 'ACCEPTED it'}")
    return caught


# --8<-- [start:bench]
def bench(gen):
    ok = True
    K = N = 4096
    w = randn((K, N), gen, K**-0.5)
    for M in (1, 16, 64, 256, 1024, 4096):
        x = randn((M, K), gen)
        ok &= matmul_close(f"invariant_matmul_M{M}_K{K}_N{N}", invariant_matmul(x, w), x, w)
        nbytes, flops = 2 * (M * K + K * N + M * N), 2 * M * N * K
        case = f"M{M} K{K} N{N}"
        ms = course_tools.time_ms(lambda: invariant_matmul(x, w))
        course_tools.bench(case, "Triton batch-invariant matmul (bf16, fp32 acc, 128x128x64 tiles)", ms, nbytes,
                           flops, M=M)
        ms = course_tools.time_ms(lambda: torch.matmul(x, w))
        course_tools.bench(case, "torch.matmul (bf16, cuBLAS)", ms, nbytes, flops, peer=True, M=M)
    return ok
# --8<-- [end:bench]


def main(args) -> int:
    print(f"triton {triton.__version__}, torch {torch.__version__}, "
          + ("Triton interpreter on the CPU" if INTERPRET else f"CUDA {torch.version.cuda}, "
             f"{torch.cuda.get_device_name()}"))
    gen = torch.Generator(device=DEVICE).manual_seed(args.seed)
    torch.manual_seed(args.seed)
    with torch.no_grad():
        if args.plant:
            return 0 if planted_split_k(gen) else 1
        if args.bench:
            return 0 if bench(gen) else 1
        ok = torch_matmul_findings(gen)
        accurate, invariant = matmul_checks(gen, invariant_matmul, "invariant_matmul")
        ok &= accurate and invariant
        ok &= matmul_edge_checks(gen)
        ok &= rmsnorm_checks(gen)
        ok &= model_checks(gen)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(ARGS))
