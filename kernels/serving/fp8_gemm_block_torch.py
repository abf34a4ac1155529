"""fp8_gemm_block_torch.py: the PyTorch peer of fp8_gemm_block.cu: torch._scaled_mm with DeepSeek-V3's block
scales (A: one fp32 scale per row per 128 values of K, "BlockWise1x128"; B: one per 128 x 128 block,
"BlockWise128x128"), e4m3 in, bf16 out. PyTorch picks the scaling mode from the scales' shapes and hands the
GEMM to cuBLASLt (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F and BLK128x128_32F, CUDA 12.9 and later; on Hopper,
without fast accumulation). Checked against float64 from the same codes and scales with fp8_gemm_block.cu's
criterion: |got - want| <= rtol |want| + (136 * 2^-13 + (K/128 + 2) * 2^-24) * sum |sa sb a_k b_k|.
Its scaled modes want K and N multiples of 128 here (and, in recent PyTorch, B's K blocks padded to a multiple
of 4, which every shape here meets: K a multiple of 512); a shape it refuses is reported, not run.

Taught in docs/serving/fp8-block-scaled.md.

Run: python kernels/serving/fp8_gemm_block_torch.py            (checks it at two shapes)
     python kernels/serving/fp8_gemm_block_torch.py --bench    (also times it at fp8_gemm_block.cu's shapes)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import course_tools  # noqa: E402
from fp8_gemm_torch import E4M3_MAX, RTOL, U_TC, accumulation_terms  # noqa: E402

BLOCK = 128


# --8<-- [start:quantise]
def quantise_blocks(torch, x, block_rows):
    """fp32 (rows x K) -> (e4m3 codes, fp32 scales [rows / block_rows][K / 128]): each block's amax / 448."""
    rows, k = x.shape
    blocks = x.view(rows // block_rows, block_rows, k // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3)).float()
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    codes = (blocks / scale[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes.view(rows, k), scale


def dequantise(codes, scale, block_rows):
    """The exact values the GEMM multiplies, in float64."""
    return codes.double() * scale.double().repeat_interleave(block_rows, 0).repeat_interleave(BLOCK, 1)
# --8<-- [end:quantise]


# --8<-- [start:peer]
def scaled_mm_blocks(torch, a8, b8, sa, sb):
    """A's scales (M x K/128) must be outer-dim-major (M contiguous, as fp8_gemm_block.cu stores them); B's
    (N/128 x K/128) go in transposed, as B does (b must be column-major, K x N)."""
    return torch._scaled_mm(a8, b8.t(), scale_a=sa.t().contiguous().t(), scale_b=sb.t(),
                            out_dtype=torch.bfloat16, use_fast_accum=False)
# --8<-- [end:peer]


def random_blocks(torch, rows, k, block_rows, g):
    """normal(0, 4) values, each scaling block times 2^e, e uniform in [-12, 12], as fp8_gemm_block.cu's."""
    e = torch.randint(-12, 13, (rows // block_rows, k // BLOCK), generator=g, device="cuda").float()
    magnitude = torch.exp2(e).repeat_interleave(block_rows, 0).repeat_interleave(BLOCK, 1)
    return torch.randn((rows, k), generator=g, device="cuda") * 4 * magnitude


def run_case(torch, m, n, k, seed, bench):
    case = f"fp8 gemm A*B^T {m}x{n}x{k}"
    label = "torch._scaled_mm block scales 1x128 / 128x128 (e4m3, fp32 acc)"
    if k % BLOCK or n % BLOCK:
        course_tools.pruned(f"{label} {case}", "K and N must be multiples of 128 for these scales here")
        return True
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = random_blocks(torch, m, k, 1, g)
    a[1::3] *= 2**-8  # quiet rows: small outputs the check must hold to their own size
    b = random_blocks(torch, n, k, BLOCK, g)
    a8, sa = quantise_blocks(torch, a, 1)
    b8, sb = quantise_blocks(torch, b, BLOCK)
    a64, b64 = dequantise(a8, sa, 1), dequantise(b8, sb, BLOCK)
    want = a64 @ b64.T
    atol_each = (accumulation_terms(True, k) * U_TC + (k // BLOCK + 2) * 2**-24) * (a64.abs() @ b64.abs().T)
    run = lambda: scaled_mm_blocks(torch, a8, b8, sa, sb)  # noqa: E731
    try:
        out = run()
    except (RuntimeError, ValueError) as e:  # a PyTorch or cuBLASLt without these modes: say why
        course_tools.pruned(f"{label} {case}", f"{type(e).__name__}: {e}")
        return True
    ok = course_tools.check_close_each(course_tools.slug(f"{label} {case}"), out, want, atol_each, RTOL)
    if bench:
        scale_bytes = 4 * (sa.numel() + sb.numel())
        course_tools.bench(case, label, course_tools.time_ms(run), m * k + n * k + 2 * m * n + scale_bytes,
                           2 * m * n * k, peer=True, m=m, n=n, k=k)
    return ok


def main():
    course_tools.check_then_bench(run_case, "Block-scaled FP8 GEMM in PyTorch: checked, and timed with --bench",
                                  "time it at the CUDA program's benchmark shapes",
                                  ((208, 384, 1024), (16, 1024, 4096)),
                                  ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 7168, 2048)))


if __name__ == "__main__":
    main()
