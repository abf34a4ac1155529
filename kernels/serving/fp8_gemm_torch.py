"""fp8_gemm_torch.py: the PyTorch peers of fp8_gemm.cu at its shapes, each a row named with its precision and
accumulation: torch._scaled_mm (e4m3 A and B, per-tensor scales, bf16 out) with use_fast_accum False and True,
and the bf16 torch.matmul of the same values as the precision baseline. Each is checked against float64 from
the same e4m3 values with fp8_gemm.cu's criterion: |got - want| <= rtol |want| + terms * 2^-13 * sum |a_k b_k|
(terms 136 where partial sums are promoted to fp32 every 128 products, 34 K / 32 where they are not; the bf16
matmul gets course.cuh's sum_atol bound for fp32 accumulation plus one bf16 rounding of a split-K partial sum).

Taught in docs/serving/fp8-gemm.md.

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


# --8<-- [start:peers]
def scaled_mm(torch, a8, b8, sa, sb, fast):
    """cuBLASLt's FP8 GEMM through PyTorch: b must be column-major (K x N), which B [N][K] transposed is."""
    return torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
# --8<-- [end:peers]


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
    course_tools.check_then_bench(run_case, "FP8 GEMM peers in PyTorch: checked, and timed with --bench",
                                  "time every configuration at the CUDA program's benchmark shapes",
                                  ((208, 144, 528), (16, 14336, 4096)),
                                  ((4096, 4096, 4096), (8192, 8192, 8192), (16, 14336, 4096)))


if __name__ == "__main__":
    main()
