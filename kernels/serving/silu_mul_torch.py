"""silu_mul_torch.py: the SiLU-and-multiply of silu_mul.cu in PyTorch, the peers of the course's kernel:
eager (F.silu(gate) * up: two kernels, and silu's result rounded to bf16 before the multiply), eager
in a CUDA graph and every torch.compile mode (which fuses both into one Triton kernel), checked against
float64 and timed at the CUDA program's cases ("t4096 i8192": 4,096 tokens of intermediate size 8192)
with the same bytes.

Taught in docs/serving/fused-small.md.

Run: python kernels/serving/silu_mul_torch.py            (checks every configuration)
     python kernels/serving/silu_mul_torch.py --bench    (also times them)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# Eager rounds twice (silu's result to bf16, then the product): up to two bf16 units (2^-8 relative each)
# of the float64 value, plus room for the fp32 arithmetic. torch.compile's fused code rounds once, so
# it is held to the same bound, which it meets with room; the course's CUDA kernel is held to one unit.
RTOL = 2**-7 * 1.015625


# --8<-- [start:torch]
def silu_mul(torch, x):
    """x: [tokens, 2 * inter] bf16, gate then up. vLLM's silu_and_mul written as a PyTorch model writes it."""
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up
# --8<-- [end:torch]


def inputs(torch, tokens, inter, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.empty((tokens, 2 * inter), dtype=torch.bfloat16, device="cuda")
    x[:, :inter].uniform_(-10, 10, generator=g)
    x[:, inter:].uniform_(-4, 4, generator=g)
    return x


def run_all(torch, tokens, inter, seed, bench):
    x = inputs(torch, tokens, inter, seed)
    gate, up = x.double().chunk(2, dim=-1)
    want = gate / (1 + torch.exp(-gate)) * up  # float64, not rounded: what the CUDA kernel rounds once
    once = want.float().bfloat16()  # one rounding of it (within float's range, float's rounding is exact enough)
    nbytes = 3 * x.numel() // 2 * x.element_size()  # gate and up read, out written
    ok = True
    fn = lambda a: silu_mul(torch, a)  # noqa: E731
    for impl, run in course_tools.torch_peers(fn, (x,), "silu * up (bf16)", nbytes):
        out = run()
        name = course_tools.slug(f"{impl} t{tokens} i{inter}")
        ok &= course_tools.check_close_on_device(name, out, want, RTOL, 0.0)
        differ = int((out != once).sum())
        print(f"{impl}: {differ} of {out.numel()} outputs differ from one rounding of the float64 value")
        if bench:
            ms = course_tools.time_ms(run)
            course_tools.bench(f"t{tokens} i{inter}", impl, ms, nbytes, peer=True, tokens=tokens, inter=inter)
    return ok


def main():
    # Without --bench odd sizes; the benchmark checks each of its cases before timing it.
    course_tools.check_then_bench(run_all, "SiLU-and-multiply in PyTorch: checked, and timed with --bench",
                                  "time every configuration at the CUDA program's cases",
                                  ((64, 4099), (1, 8)), [(tokens, 8192) for tokens in (1, 64, 4096, 32768)])


if __name__ == "__main__":
    main()
