"""fused_add_rmsnorm_torch.py: the residual add and RMSNorm of fused_add_rmsnorm.cu in PyTorch, the
peers of the course's kernel: eager, eager in a CUDA graph and every torch.compile mode (which fuses
the add, the reduction and the scaling into one Triton kernel), checked against float64 and timed at
the CUDA program's cases ("t4096 h2048": 4,096 tokens of hidden size 2048) with the same bytes.

Taught in docs/serving/fused-small.md.

Run: python kernels/serving/fused_add_rmsnorm_torch.py            (checks every configuration)
     python kernels/serving/fused_add_rmsnorm_torch.py --bench    (also times them)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

EPS = 1e-5
# One bf16 unit of the output (2^-7 relative at the bottom of a binade), plus room for the fp32 arithmetic
# before its rounding: torch.compile's fused fp32 code can round a near-tie the other way than float64
# would. (The course's CUDA kernel is held to half a unit: it rounds the float64-close value.)
RTOL = 2**-7 * 1.015625


# --8<-- [start:torch]
def add_rmsnorm(torch, x, residual, weight):
    """residual + x rounded to bf16, then its RMSNorm computed in fp32 and rounded once: the CUDA
    kernel's definition. Returns (out, new residual)."""
    r = x + residual
    rf = r.float()
    out = rf * torch.rsqrt(rf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(torch.bfloat16), r
# --8<-- [end:torch]


def inputs(torch, tokens, hidden, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    def uniform(shape, lo, hi):
        return torch.empty(shape, dtype=torch.bfloat16, device="cuda").uniform_(lo, hi, generator=g)
    return uniform((tokens, hidden), -1, 1), uniform((tokens, hidden), -2, 2), uniform((hidden,), 0.5, 1.5)


def run_all(torch, tokens, hidden, seed, bench):
    x, residual, weight = inputs(torch, tokens, hidden, seed)
    r64 = (x.double() + residual.double()).float().bfloat16().double()  # the add, rounded once to bf16
    want = r64 * torch.rsqrt(r64.pow(2).mean(-1, keepdim=True) + EPS) * weight.double()
    nbytes = (4 * x.numel() + weight.numel()) * x.element_size()
    ok = True
    fn = lambda a, b, c: add_rmsnorm(torch, a, b, c)  # noqa: E731
    for impl, run in course_tools.torch_peers(fn, (x, residual, weight), "add + RMSNorm (bf16)", nbytes):
        out, r = run()
        name = course_tools.slug(f"{impl} t{tokens} h{hidden}")
        ok &= course_tools.check_close(f"residual_{name}", r, r64, 0.0, 0.0)
        ok &= course_tools.check_close(name, out, want, RTOL, 0.0)
        if bench:
            ms = course_tools.time_ms(run)
            course_tools.bench(f"t{tokens} h{hidden}", impl, ms, nbytes, peer=True, tokens=tokens, hidden=hidden)
    return ok


def main():
    # Without --bench odd sizes; with it hidden 2048 only: each case compiles three modes, and the
    # sitting's time is shared. The benchmark checks each of its cases before timing it.
    course_tools.check_then_bench(run_all, "Residual add + RMSNorm in PyTorch: checked, and timed with --bench",
                                  "time every configuration at the CUDA program's cases",
                                  ((333, 2048), (1, 8)), [(tokens, 2048) for tokens in (1, 64, 4096, 32768)])


if __name__ == "__main__":
    main()
