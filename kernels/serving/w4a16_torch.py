"""w4a16_torch.py: the peers of w4a16_gemv.cu at its benchmark's shapes, each a row named with its precision:
the bf16 GEMV x @ W.T (cuBLAS) on the dequantised weights, eager and in every torch.compile mode; PyTorch's own
int4 kernel (torch.ops.aten._weight_int4pack_mm, tinygemm); and dequantise-then-matmul written in PyTorch
(bit operations on the packed words, then a bf16 matmul), eager and compiled. Each is checked against float64.

It also measures what INT4 costs in accuracy: random bf16 weights (normal, standard deviation 0.02, as a
trained linear layer's are) quantised to 4 bits with one scale per group of 128 (symmetric, zero point 8,
scale = the group's largest |w| / 7), and the relative error of y against y computed with the bf16 weights.

Taught in docs/serving/w4a16.md.

Run: python kernels/serving/w4a16_torch.py            (checks every configuration, prints the INT4 error)
     python kernels/serving/w4a16_torch.py --bench    (also times them)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

GROUP = 128
INNER_K_TILES = 8  # tinygemm's 16-byte weight loads; K must be a multiple of 16 * INNER_K_TILES = 128
RTOL = 2**-8 * 1.015625  # one bf16 rounding of the output, and a little for the fp32 arithmetic before it


# --8<-- [start:quantise]
def quantise(torch, w):
    """bf16 weights [N][K] -> (q [N][K] int32 in 0..15, scale [N][K / 128] bf16): symmetric, zero point 8,
    the group's largest |w| mapped to 7."""
    n, k = w.shape
    groups = w.float().reshape(n, k // GROUP, GROUP)
    scale = (groups.abs().amax(-1) / 7).clamp_min(2**-100).bfloat16()
    q = torch.round(groups / scale.float().unsqueeze(-1)).clamp(-8, 7) + 8
    return q.reshape(n, k).int(), scale


def pack(torch, q):
    """q [N][K] in 0..15 -> int32 words [N][K / 8], the lowest nibble first: w4a16_gemv.cu's layout."""
    n, k = q.shape
    shifts = torch.arange(0, 32, 4, device=q.device, dtype=torch.int64)
    words = (q.reshape(n, k // 8, 8).long() << shifts).sum(-1)  # 0 .. 2^32 - 1
    return torch.where(words >= 2**31, words - 2**32, words).int()  # the same 32 bits as int32
# --8<-- [end:quantise]


# --8<-- [start:torch]
def bf16_gemv(torch, x, w_bf16):
    """The bf16 peer: the dequantised weights stored as bf16 (2 bytes a weight), cuBLAS's GEMV."""
    return x @ w_bf16.T


def dequantise_matmul(torch, x, words, scale):
    """Dequantise-then-matmul in PyTorch: nibbles out of the packed words, (q - 8) * scale rounded to bf16,
    then the bf16 matmul. Eager writes the whole bf16 matrix; torch.compile may fuse the two."""
    n = words.shape[0]
    shifts = torch.arange(0, 32, 4, device=words.device, dtype=torch.int32)
    q = ((words.unsqueeze(-1) >> shifts) & 0xF).reshape(n, -1, GROUP)
    w = ((q - 8).float() * scale.float().unsqueeze(-1)).bfloat16().reshape(n, -1)
    return x @ w.T


def tinygemm_operands(torch, q, scale):
    """PyTorch's int4 layout: bytes [N][K / 2] with the even k in the high nibble, converted to tinygemm's
    tiled int32 layout; scales and zeros [K / 128][N][2] in bf16. tinygemm dequantises to
    (q - 8) * scale + zero in bf16, so a zero of 0 gives the same weights as ours, rounded to bf16."""
    w_uint8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
    packed = torch.ops.aten._convert_weight_to_int4pack(w_uint8, INNER_K_TILES)
    scales_and_zeros = torch.stack([scale.T, torch.zeros_like(scale.T)], dim=-1).contiguous()
    return packed, scales_and_zeros


def tinygemm(torch, x, packed, scales_and_zeros):
    return torch.ops.aten._weight_int4pack_mm(x, packed, GROUP, scales_and_zeros)
# --8<-- [end:torch]


def run_case(torch, batch, n, k, seed, bench):
    g = torch.Generator(device="cuda").manual_seed(seed)
    w0 = (torch.randn((n, k), generator=g, device="cuda") * 0.02).bfloat16()
    x = torch.empty((batch, k), device="cuda").uniform_(-1, 1, generator=g).bfloat16()
    q, scale = quantise(torch, w0)
    words = pack(torch, q)
    deq64 = ((q - 8).double().reshape(n, -1, GROUP) * scale.double().unsqueeze(-1)).reshape(n, k)
    w_bf16 = deq64.bfloat16()  # exact: (q - 8) * scale has at most 12 significant bits, rounded to bf16's 8
    x64 = x.double()
    # Every peer multiplies by the bf16-rounded weights: its reference uses them. The tolerance: the fp32
    # accumulation's bound from each output's own terms (course.cuh's sum_atol), plus one bf16 rounding of
    # a partial sum, which cuBLAS may keep in bf16 when it splits K (allow_bf16_reduced_precision_reduction).
    want = x64 @ w_bf16.double().T
    sum_abs = x64.abs() @ w_bf16.double().abs().T
    atol_each = (min(k, 8 * k**0.5) * 2**-23 + 2**-8) * sum_abs
    if batch == 1:
        exact = x64 @ w0.double().T  # y with the bf16 weights the INT4 ones quantise
        int4 = x64 @ deq64.T
        rel = float((int4 - exact).norm() / exact.norm())
        worst = float((int4 - exact).abs().max() / exact.pow(2).mean().sqrt())
        print(f"INT4 g128 against the bf16 weights it quantises (n={n} k={k}): relative error of y {rel:.3g} "
              f"(rms), largest error {worst:.3g} of rms(y); bf16 storage of the dequantised weights adds "
              f"{float((x64 @ w_bf16.double().T - int4).norm() / exact.norm()):.2g}")

    int4_bytes = 4 * words.numel() + 2 * scale.numel() + 2 * batch * k + 2 * batch * n  # the course kernel's
    bf16_bytes = 2 * w_bf16.numel() + 2 * batch * k + 2 * batch * n
    case = f"b{batch} n{n} k{k}"
    ok = True
    configs = [
        (lambda a, b: bf16_gemv(torch, a, b), (x, w_bf16), "x @ W.T (bf16 weights, cuBLAS)", bf16_bytes, {}),
        (lambda a, b, c: dequantise_matmul(torch, a, b, c), (x, words, scale),
         "dequantise + matmul (int4 g128, PyTorch ops)", int4_bytes, {"cuda_graph": False, "modes": ("default",)}),
    ]
    try:  # PyTorch's int4 kernel needs sm_80 or newer and N a multiple of 8; say why if it refuses
        packed, sz = tinygemm_operands(torch, q, scale)
        tinygemm(torch, x, packed, sz)
        configs.append((lambda a, b, c: tinygemm(torch, a, b, c), (x, packed, sz),
                        "_weight_int4pack_mm (int4 g128, tinygemm)", int4_bytes, {"modes": ()}))
    except Exception as e:  # noqa: BLE001: any refusal is reported, not raised
        course_tools.pruned(f"_weight_int4pack_mm (int4 g128, tinygemm) {case}", f"{type(e).__name__}: {e}")
    for fn, args, label, nbytes, options in configs:
        for impl, run in course_tools.torch_peers(fn, args, label, nbytes, **options):
            out = run()
            ok &= course_tools.check_close_each(course_tools.slug(f"{impl} {case}"), out, want, atol_each, RTOL)
            if bench:
                ms = course_tools.time_ms(run)
                course_tools.bench(case, impl, ms, nbytes, 2 * batch * n * k, peer=True, batch=batch, n=n, k=k)
    return ok


def main():
    # Without --bench small and odd sizes; the benchmark checks each of its cases before timing it.
    course_tools.check_then_bench(run_case, "W4A16 GEMV peers in PyTorch: checked, and timed with --bench",
                                  "time every configuration at the CUDA program's cases",
                                  ((1, 4096, 4096), (3, 264, 384)),
                                  [(batch, n, k) for batch in (1, 4)
                                   for n, k in ((4096, 4096), (14336, 4096), (4096, 14336))])


if __name__ == "__main__":
    main()
