"""fp8_gemm_torch.py: the PyTorch peers of fp8_gemm.cu at its shapes, each a row named with its precision and
accumulation: torch._scaled_mm (e4m3 A and B, per-tensor scales, bf16 out) with use_fast_accum False and True,
and the bf16 torch.matmul of the same values as the precision baseline; and the peer of fp8_gemm_block.cu,
torch._scaled_mm with DeepSeek-V3's block scales (1 x 128 for A, 128 x 128 for B: cuBLASLt's VEC128 and
BLK128x128 scale modes, sm_90 and CUDA 12.9+; fast accumulation is refused with them). Each is checked against float64 from
the same e4m3 values with fp8_gemm.cu's criterion: |got - want| <= rtol |want| + terms * 2^-13 * sum |a_k b_k|
(terms 136 where partial sums are promoted to fp32 every 128 products, 34 K / 32 where they are not; the bf16
matmul gets course.cuh's sum_atol bound for fp32 accumulation plus one bf16 rounding of a split-K partial sum).

Taught in docs/serving/fp8-gemm.md and docs/serving/fp8-block-scaled.md.

Run: python kernels/serving/fp8_gemm_torch.py            (checks every configuration)
     python kernels/serving/fp8_gemm_torch.py --bench    (also times them at 4096^3, 8192^3, 16 x 14336 x 4096)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

E4M3_MAX = 448.0
RTOL = 2**-8 * 1.015625  # one bf16 rounding of the output, and a little for the fp32 scaling
U_TC = 2**-13  # fp8_gemm.cu's unit for the tensor core's FP8 accumulator (DeepSeek-V3: "around 14 bits")
KSTEP, CHUNK = 32, 128


def accumulation_terms(promoted, k):
    """fp8_gemm.cu's accumulation_terms: 34 truncations per 32-deep instruction, over 128 products when
    partial sums are promoted, over all of K when they are not."""
    chunk = CHUNK if promoted else -(-k // KSTEP) * KSTEP
    return (KSTEP + 2) * chunk / KSTEP


# --8<-- [start:quantise]
def quantise_per_tensor(torch, x):
    """fp32 -> (e4m3 tensor, fp32 scale): one scale for the tensor, amax / 448, as fp8_gemm.cu does."""
    amax = x.abs().amax().float()
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale
# --8<-- [end:quantise]


# --8<-- [start:quantise_blocks]
def quantise_blocks(torch, x, rows_per_block):
    """fp32 (rows x K) -> (e4m3 tensor, fp32 scales [row blocks][K blocks]): one scale, amax / 448, per block of
    rows_per_block rows x 128 values of K (1 for activations, 128 for weights), as fp8_gemm_block.cu does;
    blocks at the edges are partial and scaled over the values they hold."""
    rows, k = x.shape
    rb, kb = -(-rows // rows_per_block), -(-k // CHUNK)
    padded = torch.zeros((rb * rows_per_block, kb * CHUNK), device=x.device, dtype=x.dtype)
    padded[:rows, :k] = x
    blocks = padded.view(rb, rows_per_block, kb, CHUNK)
    amax = blocks.abs().amax(dim=(1, 3)).float()
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (blocks / scale[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.view(rb * rows_per_block, kb * CHUNK)[:rows, :k].contiguous(), scale


def expand_blocks(scale, rows_per_block, rows, k):
    """A block-scale table stretched to one scale per element (float64): the dequantisation."""
    return scale.double().repeat_interleave(rows_per_block, 0).repeat_interleave(CHUNK, 1)[:rows, :k]
# --8<-- [end:quantise_blocks]


# --8<-- [start:peers]
def scaled_mm(torch, a8, b8, sa, sb, fast):
    """cuBLASLt's FP8 GEMM through PyTorch: b must be column-major (K x N), which B [N][K] transposed is."""
    return torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)


def scaled_mm_blocks(torch, a8, b8, sa, sb):
    """The block-scaled call: scale_a (M, K/128) "outer-dim-major" (stride 1 along M: sa's K-block-major
    layout, fp8_gemm_block.cu's), scale_b (K/128, N/128), the transpose of B's [N/128][K/128] table."""
    return torch._scaled_mm(a8, b8.t(), scale_a=sa.t().contiguous().t(), scale_b=sb.t(), out_dtype=torch.bfloat16)
# --8<-- [end:peers]


def run_block_case(torch, m, n, k, seed, bench):
    """fp8_gemm_block.cu's problem in PyTorch: blocks of A and B 2^-12..2^12 apart in size, every third row of
    A a further 2^-8 smaller; checked against float64 from the dequantised e4m3 values with fp8_gemm_block.cu's
    criterion (the promoted bound, plus the fp32 roundings of the scaling)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    kb = -(-k // CHUNK)
    a = torch.randn((m, k), generator=g, device="cuda") * 4
    b = torch.randn((n, k), generator=g, device="cuda") * 4
    a_sizes = torch.randint(-12, 13, (m, kb), generator=g, device="cuda").float().exp2()
    b_sizes = torch.randint(-12, 13, (-(-n // CHUNK), kb), generator=g, device="cuda").float().exp2()
    a *= expand_blocks(a_sizes, 1, m, k).float()
    b *= expand_blocks(b_sizes, CHUNK, n, k).float()
    a[1::3] *= 2**-8
    a8, sa = quantise_blocks(torch, a, 1)
    b8, sb = quantise_blocks(torch, b, CHUNK)
    a64 = a8.double() * expand_blocks(sa, 1, m, k)
    b64 = b8.double() * expand_blocks(sb, CHUNK, n, k)
    want = a64 @ b64.T
    atol_each = (accumulation_terms(True, k) * U_TC + (kb + 2) * 2**-24) * (a64.abs() @ b64.abs().T)
    label = "torch._scaled_mm block-scaled 1x128 / 128x128 (e4m3, fp32 acc)"
    case = f"fp8 gemm A*B^T {m}x{n}x{k}"
    run = lambda: scaled_mm_blocks(torch, a8, b8, sa, sb)
    try:
        out = run()
    except (RuntimeError, NotImplementedError) as e:  # no blockwise cuBLASLt here: say why
        course_tools.pruned(f"{label} {case}", f"{type(e).__name__}: {e}")
        return True
    ok = course_tools.check_close_each(course_tools.slug(f"{label} {case}"), out, want, atol_each, RTOL)
    if bench:
        ms = course_tools.time_ms(run)
        nbytes = m * k + n * k + 2 * m * n + 4 * (sa.numel() + sb.numel())
        course_tools.bench(case, label, ms, nbytes, 2 * m * n * k, peer=True, m=m, n=n, k=k)
    return ok


def run_case(torch, m, n, k, seed, bench):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((m, k), generator=g, device="cuda") * 4
    a[1::3] *= 2**-8  # quiet rows, as fp8_gemm.cu's: small outputs the check must hold to their own size
    b = torch.randn((n, k), generator=g, device="cuda") * 4
    a8, sa = quantise_per_tensor(torch, a)
    b8, sb = quantise_per_tensor(torch, b)
    a64, b64 = a8.double(), b8.double()  # every e4m3 value is exactly a double
    unscaled = a64 @ b64.T
    sum_abs_unscaled = a64.abs() @ b64.abs().T
    scale = sa.double() * sb.double()
    case = f"fp8 gemm A*B^T {m}x{n}x{k}"
    nbytes = m * k + n * k + 2 * m * n
    a16, b16 = a8.bfloat16(), b8.bfloat16()  # exact: 4 significant bits fit in bf16's 8
    configs = [
        ("torch._scaled_mm (e4m3, fp32 acc)", lambda: scaled_mm(torch, a8, b8, sa, sb, False),
         scale * unscaled, accumulation_terms(True, k) * U_TC * scale * sum_abs_unscaled),
        ("torch._scaled_mm fast accum (e4m3, tensor-core acc)", lambda: scaled_mm(torch, a8, b8, sa, sb, True),
         scale * unscaled, accumulation_terms(False, k) * U_TC * scale * sum_abs_unscaled),
        # the same e4m3 values in bf16, unscaled (2 bytes an input: twice fp8's traffic); the fp32 accumulation's
        # bound (course.cuh's sum_atol) plus one bf16 rounding of a partial sum, which cuBLAS may keep in bf16
        # when it splits K (allow_bf16_reduced_precision_reduction), as w4a16_torch.py allows
        ("torch.matmul on the e4m3 values (bf16, fp32 acc)", lambda: a16 @ b16.T,
         unscaled, (min(k, 8 * k**0.5) * 2**-23 + 2**-8) * sum_abs_unscaled),
    ]
    ok = True
    for label, run, want, atol_each in configs:
        try:
            out = run()
        except RuntimeError as e:  # _scaled_mm refuses some shapes: say why, check the rest
            course_tools.pruned(f"{label} {case}", f"{type(e).__name__}: {e}")
            continue
        ok &= course_tools.check_close_each(course_tools.slug(f"{label} {case}"), out, want, atol_each, RTOL)
        if bench:
            ms = course_tools.time_ms(run)
            course_tools.bench(case, label, ms, nbytes * (2 if "bf16" in label else 1), 2 * m * n * k, peer=True,
                               m=m, n=n, k=k)
    return ok


def main():
    args, torch = course_tools.peer_start("FP8 GEMM peers in PyTorch: checked, and timed with --bench",
                                          "time every configuration at the CUDA program's benchmark shapes")
    with torch.no_grad():
        if not args.bench:
            ok = run_case(torch, 208, 144, 528, args.seed, bench=False)
            ok &= run_case(torch, 16, 14336, 4096, args.seed + 1, bench=False)
            # K = 512: K / 128 = 4 scales, a 16-byte row of B's scale table, as cuBLASLt wants
            ok &= run_block_case(torch, 208, 144, 512, args.seed + 2, bench=False)
            ok &= run_block_case(torch, 16, 14336, 4096, args.seed + 3, bench=False)
        else:
            ok = True
            for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16, 14336, 4096)):
                ok &= run_case(torch, m, n, k, args.seed, bench=True)
                ok &= run_block_case(torch, m, n, k, args.seed + 2, bench=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
