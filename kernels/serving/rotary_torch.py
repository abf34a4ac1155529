"""rotary_torch.py: the rotary embedding of rotary.cu in PyTorch, the peers of the course's kernel: the
rotate-half form of Hugging Face's Llama (the new heads in fp32, the cos and sin rows gathered from
the same fp32 table by position, the result rounded to bf16 once), run eager, in a CUDA graph and in
every torch.compile mode; checked against float64 and timed at the CUDA program's cases ("t4096":
4,096 tokens of 40 heads of 64, Llama-3.2-1B's 32 query and 8 key heads) with the same bytes.

Taught in docs/serving/fused-small.md.

Run: python kernels/serving/rotary_torch.py            (checks every configuration)
     python kernels/serving/rotary_torch.py --bench    (also times them)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

HEADS, DIM, THETA = 40, 64, 500000.0
RTOL = 2**-8 * 1.015625  # one bf16 unit of each output, plus room for the fp32 arithmetic before it


# --8<-- [start:torch]
def rotate(torch, x, positions, cos_table, sin_table):
    """x (tokens, heads, dim) bf16 rotated by each token's position; returns a new bf16 tensor."""
    c = cos_table[positions][:, None, :]                # (tokens, 1, dim / 2), fp32
    s = sin_table[positions][:, None, :]
    lo, hi = x.float().chunk(2, dim=-1)
    return torch.cat((lo * c - hi * s, hi * c + lo * s), dim=-1).to(torch.bfloat16)
# --8<-- [end:torch]


def tables(torch, positions):
    inv_freq = THETA ** (-torch.arange(0, DIM, 2, dtype=torch.float64, device="cuda") / DIM)
    angle = torch.arange(positions, dtype=torch.float64, device="cuda")[:, None] * inv_freq
    return angle.cos().float(), angle.sin().float()


def run_all(torch, tokens, seed, bench):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.empty(tokens, HEADS, DIM, dtype=torch.bfloat16, device="cuda").uniform_(-2, 2, generator=g)
    positions = torch.arange(tokens, device="cuda") if bench else \
        torch.randint(0, 1 << 17, (tokens,), generator=g, device="cuda")
    cos_t, sin_t = tables(torch, 1 << 17)
    c, s = cos_t[positions].double()[:, None, :], sin_t[positions].double()[:, None, :]
    lo, hi = x.double().chunk(2, dim=-1)
    want = torch.cat((lo * c - hi * s, hi * c + lo * s), dim=-1)
    # A pair whose terms cancel has a small result: its tolerance is the fp32 rounding of its terms.
    atol = 2.0**-21 * torch.cat(((lo * c).abs() + (hi * s).abs(), (hi * c).abs() + (lo * s).abs()), dim=-1)
    nbytes = 2 * x.numel() * x.element_size() + 2 * tokens * (DIM // 2) * 4
    ok = True
    fn = lambda a, p: rotate(torch, a, p, cos_t, sin_t)  # noqa: E731
    for impl, run in course_tools.torch_peers(fn, (x, positions), "rotary (bf16)", nbytes):
        ok &= course_tools.check_close_each(course_tools.slug(f"{impl} t{tokens}"), run(), want, atol, RTOL)
        if bench:
            ms = course_tools.time_ms(run)
            course_tools.bench(f"t{tokens}", impl, ms, nbytes, peer=True, tokens=tokens)
    return ok


def main():
    # Without --bench an odd size at random positions; the benchmark checks each of its cases.
    course_tools.check_then_bench(run_all, "The rotary embedding in PyTorch: checked, and timed with --bench",
                                  "time every configuration at the CUDA program's cases",
                                  ((333,),), [(tokens,) for tokens in (1, 64, 4096, 32768)])


if __name__ == "__main__":
    main()
