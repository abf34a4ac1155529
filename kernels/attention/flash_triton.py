# flash_triton.py: the FlashAttention-2 forward pass in Triton: O = softmax(Q K^T / sqrt(d)) V for
# bf16 Q, K, V of shape (batch, heads, seq, d), d = 64 or 128, causal or not, with an optional
# key-padding length per batch; fp32 scores, softmax statistics and accumulator; bf16 output.
#
# Taught in docs/attention/triton.md. One program per (tile of BLOCK_M queries, batch x head): the Q
# tile stays on chip while K and V stream past in tiles of BLOCK_N keys, with the online softmax.
# Convention (the same as the chapter's CUDA kernels): a masked score is -inf and contributes 0; a
# query row whose keys are all masked gives zeros (where torch gives NaN); a NaN in Q or K propagates.
# Without a CUDA GPU the kernel runs in Triton's interpreter on the CPU (TRITON_INTERPRET=1), so the
# checks below run in CI; kernels/attention/flash_triton_bench.py checks and times it on a GPU.
# Run:   python kernels/attention/flash_triton.py --batch 2 --heads 3 --seq 37 --dim 64
#        python kernels/attention/flash_triton.py --seq 333 --plant zeros-small   (or --causal --plant tile:
#        the output corrupted after the run; passes only if the check rejects it)
#
# course: run --batch 1 --heads 1 --seq 1 --dim 64
# course: run --batch 2 --heads 3 --seq 37 --dim 64
# course: run --batch 2 --heads 2 --seq 70 --dim 128
# course: run --batch 1 --heads 2 --seq 333 --dim 64 --plant zeros-small
# course: run --batch 2 --heads 2 --seq 70 --dim 128 --causal --plant tile
import math
import os
import sys
from pathlib import Path

import torch

# The interpreter must be chosen before triton is imported: @triton.jit reads the setting.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

import attention_reference as attention_reference_module  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
HEAD_DIMS = (64, 128)


def attention_reference(q, k, v, causal: bool, kv_len=None):
    """The exact float64 output and the same computation rounded as this kernel rounds (P to bf16
    before P V, O to bf16): attention_reference.forward, on the inputs' device."""
    return attention_reference_module.forward(q, k, v, causal, kv_len, rounding=kernel_rounding)


def tile_configs():
    """Tile shapes autotuning chooses from on the GPU; the interpreter gets one (it cannot time)."""
    if INTERPRET:
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 16})]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
            for bm, bn, w, s in [(128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 32, 4, 4)]]


# --8<-- [start:inner]
@triton.jit
def mma(a, b, UPCAST: tl.constexpr):
    """a @ b with fp32 accumulation. Triton's interpreter does not support bf16 arithmetic (its
    debugging guide says so; tl.dot multiplies the raw bits: triton-lang/triton#11584), so there
    (UPCAST) the bf16 values are widened to fp32 first: exactly, so the products and the fp32
    accumulation are the arithmetic the tensor cores do."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b)


@triton.jit
def attend_tiles(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, rows, first, last, kv_len,
                 qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                 UPCAST: tl.constexpr):
    """Fold keys [first, last) into the running max m_i, sum l_i and output acc of BLOCK_M query rows.
    Scores are kept in base 2 (qk_scale includes log2(e)) so each exponential is one exp2."""
    for start_n in range(first, last, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        if MASKED:  # the tile crosses the diagonal or the end of the keys: mask what lies beyond
            k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[None, :] < kv_len, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_kn)
        s = mma(q, k, UPCAST) * qk_scale                         # [BLOCK_M, BLOCK_N] fp32 (bf16 in, fp32 acc)
        if MASKED:
            keep = cols[None, :] < kv_len
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, -float("inf"))            # a masked score contributes exp(-inf) = 0
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen only -inf scores has max -inf; exp2(-inf - -inf) would be NaN, so shift
        # by 0 instead: its p and alpha are exp2(-inf) = 0 and its sums stay 0. (With the masks here
        # a fully masked row skips every tile, kv_len = 0, but a -inf score from the data reaches it.)
        m_shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_shift)                      # rescales what was summed under the old max
        p = tl.exp2(s - m_shift[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < kv_len, other=0.0)
        else:
            v = tl.load(v_ptrs + start_n * stride_vn)
        acc = acc * alpha[:, None] + mma(p.to(v.dtype), v, UPCAST)  # P in bf16 for the tensor cores, fp32 acc
        m_i = m_new
    return acc, m_i, l_i
# --8<-- [end:inner]


# --8<-- [start:kernel]
@triton.autotune(configs=tile_configs(), key=["seq", "HEAD_DIM", "CAUSAL"])
@triton.jit
def flash_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, kv_len_ptr, seq, heads, qk_scale,
                         stride_b, stride_h, stride_s,  # Q, K, V and O share one contiguous layout
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, HAS_KV_LEN: tl.constexpr,
                         UPCAST: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tile_m = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // heads
    base = batch.to(tl.int64) * stride_b + (batch_head % heads).to(tl.int64) * stride_h
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    keys = tl.arange(0, BLOCK_N)
    kv_len = tl.load(kv_len_ptr + batch) if HAS_KV_LEN else seq

    q = tl.load(q_ptr + base + rows[:, None] * stride_s + dims[None, :], mask=rows[:, None] < seq, other=0.0)
    k_ptrs = k_ptr + base + keys[None, :] * stride_s + dims[:, None]   # K^T tile: [HEAD_DIM, BLOCK_N]
    v_ptrs = v_ptr + base + keys[:, None] * stride_s + dims[None, :]   # V tile:   [BLOCK_N, HEAD_DIM]
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    # Keys this tile of queries may see: all of them, or up to its last row when causal.
    end = tl.minimum(kv_len, (tile_m + 1) * BLOCK_M) if CAUSAL else kv_len
    # Tiles wholly below the diagonal and inside kv_len need no mask; the rest (at most a few) do.
    full = (kv_len // BLOCK_N) * BLOCK_N
    if CAUSAL:
        full = tl.minimum(full, tile_m * BLOCK_M // BLOCK_N * BLOCK_N)
    acc, m_i, l_i = attend_tiles(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_s, stride_s, rows, 0, full, kv_len,
                                 qk_scale, BLOCK_N, False, CAUSAL, UPCAST)
    acc, m_i, l_i = attend_tiles(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_s, stride_s, rows, full, end, kv_len,
                                 qk_scale, BLOCK_N, True, CAUSAL, UPCAST)

    # Normalise once at the end; a fully masked row has l_i = 0 and acc = 0, and gives 0.
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(o_ptr + base + rows[:, None] * stride_s + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < seq)
# --8<-- [end:kernel]


# --8<-- [start:launch]
def flash_attention(q, k, v, causal: bool, kv_len=None, out=None):
    """Q, K, V: (batch, heads, seq, d) bf16, contiguous, d in HEAD_DIMS; kv_len: optional int32 tensor
    of batch key lengths (keys at or beyond it are masked). Returns O in bf16."""
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape or q.dtype != torch.bfloat16:
        raise ValueError(f"flash_attention: Q, K, V must be equal-shaped 4-D bf16 tensors, got {tuple(q.shape)}")
    batch, heads, seq, dim = q.shape
    if dim not in HEAD_DIMS:
        raise ValueError(f"flash_attention: head dimension must be one of {HEAD_DIMS}, got {dim}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q) if out is None else out
    if o.shape != q.shape or o.dtype != q.dtype or not o.is_contiguous():
        raise ValueError("flash_attention: out must be a contiguous bf16 tensor shaped like Q")
    if kv_len is not None and (kv_len.shape != (batch,) or kv_len.dtype != torch.int32):
        raise ValueError("flash_attention: kv_len must be an int32 tensor with one length per batch")
    if q.numel() == 0:
        return o
    qk_scale = 1.0 / math.sqrt(dim) * math.log2(math.e)  # softmax in base 2: exp(x) = exp2(x log2 e)
    grid = lambda meta: (triton.cdiv(seq, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    flash_forward_kernel[grid](q, k, v, o, kv_len if kv_len is not None else q, seq, heads, qk_scale,
                               q.stride(0), q.stride(1), q.stride(2),
                               HEAD_DIM=dim, CAUSAL=causal, HAS_KV_LEN=kv_len is not None, UPCAST=INTERPRET)
    return o
# --8<-- [end:launch]


def random_qkv(batch, heads, seq, dim, device, seed):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, heads, seq, dim)
    # Q and K normal (scores of order 1 after the 1/sqrt(d) scale, softmax neither flat nor one-hot),
    # V uniform in [-1, 1).
    q = torch.randn(shape, generator=g) * 1.5
    k = torch.randn(shape, generator=g)
    v = torch.rand(shape, generator=g) * 2 - 1
    return [t.to(torch.bfloat16).to(device) for t in (q, k, v)]


# --8<-- [start:check]
# The tolerance follows the data (course_tools.check_scaled): the error against float64 may be twice
# that of the same computation rounded where this kernel rounds, P to bf16 before P V and O to bf16.
# On the GPU both conversions round to nearest; Triton's interpreter truncates fp32 to bf16, so on
# the CPU the rounded reference truncates too.
def kernel_rounding(x):
    return attention_reference_module.round_bf16(x, truncate=INTERPRET)


OLD_TOL = 2.0**-7  # the fixed rtol = atol this check had: only to report what a planted fault did to it


def check_case(label, q, k, v, causal, kv_len=None, plant=None) -> bool:
    want, rounded = attention_reference(q, k, v, causal, kv_len)
    out = torch.full_like(q, float("nan"))                  # poisoned: an unwritten element fails
    flash_attention(q, k, v, causal, kv_len, out=out)
    got = out.double()
    nan_want = want.isnan()
    ok = course_tools.check_true(f"{label}_nan_where_expected", bool(torch.equal(got.isnan(), nan_want)),
                                 got.numel(), f"nan={int(nan_want.sum())}")
    rows = ~nan_want.any(-1)                                # a NaN reaches whole rows: compare the others
    if rows.any():
        dim = q.shape[-1]
        if plant:
            return course_tools.check_planted(plant, got[rows], want[rows], rounded[rows], dim, OLD_TOL,
                                              OLD_TOL) and ok
        ok &= course_tools.check_scaled(label, got[rows], want[rows], rounded[rows], dim)
    return bool(ok)


def check_all(batch, heads, seq, dim, device, seed) -> bool:
    ok = True
    q, k, v = random_qkv(batch, heads, seq, dim, device, seed)
    shape = f"b{batch}_h{heads}_s{seq}_d{dim}"
    for causal in (False, True):
        mode = "causal" if causal else "noncausal"
        ok &= check_case(f"flash_triton_{mode}_{shape}", q, k, v, causal)
        # Key padding: the last batch sees no keys at all (its rows must be zeros), the first a prefix.
        lengths = torch.tensor([max(1, seq // 2)] * (batch - 1) + [0], dtype=torch.int32, device=device)
        ok &= check_case(f"flash_triton_{mode}_padded_{shape}", q, k, v, causal, lengths)
    # NaN in one key of one head: every query that sees it (all of them) gives NaN, and only there.
    k_nan = k.clone()
    k_nan[0, 0, 0, 0] = float("nan")
    ok &= check_case(f"flash_triton_nan_key_{shape}", q, k_nan, v, True)
    return bool(ok)
# --8<-- [end:check]


def main() -> int:
    p = course_tools.parser("FlashAttention-2 forward in Triton (the interpreter on the CPU without a GPU)")
    p.add_argument("--batch", type=course_tools.int_in(1, 64), default=2)
    p.add_argument("--heads", type=course_tools.int_in(1, 64), default=3)
    p.add_argument("--seq", type=course_tools.int_in(1, 1 << 16), default=37)
    p.add_argument("--dim", type=int, choices=HEAD_DIMS, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plant", choices=course_tools.PLANTS,
                   help="corrupt the output after the run: passes only if the check rejects it")
    p.add_argument("--causal", action="store_true", help="with --plant: the causal output, not the non-causal")
    args = p.parse_args()
    if args.causal and not args.plant:
        p.error("--causal picks the output --plant corrupts; without --plant both are checked")
    print(f"triton {triton.__version__}, {'interpreter on the CPU' if INTERPRET else torch.cuda.get_device_name()}")
    if args.plant:
        q, k, v = random_qkv(args.batch, args.heads, args.seq, args.dim, DEVICE, args.seed)
        mode = "causal" if args.causal else "noncausal"
        ok = check_case(f"flash_triton_{mode}", q, k, v, args.causal, plant=args.plant)
    else:
        ok = check_all(args.batch, args.heads, args.seq, args.dim, DEVICE, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
