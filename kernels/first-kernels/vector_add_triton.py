"""vector_add_triton.py: vector addition in Triton, checked against PyTorch; with --bench, timed
against the strongest configurations PyTorch offers (torch.add eager and under torch.compile in each
mode, each checked first; course_tools.torch_peers) and against a device-to-device copy of the same
number of bytes (the reference).

Taught in docs/first-kernels/python.md and docs/first-kernels/vector-add.md.
Run: python kernels/first-kernels/vector_add_triton.py --n 1000003            (on a GPU)
     TRITON_INTERPRET=1 python kernels/first-kernels/vector_add_triton.py --n 1000  (on the CPU)
"""
# course: gpu
# course: run --n 1000003
# course: run --n 1
# course: run --n 4099
# course: bench --bench
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# Triton's interpreter runs the kernel on the CPU with CPU tensors: no GPU needed.
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


def parse_args():
    parser = course_tools.parser("Vector addition in Triton, checked against PyTorch; --bench times it.")
    parser.add_argument("--n", type=int, default=1_000_003)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--bench", action="store_true")
    args = parser.parse_args()
    if not 1 <= args.n <= 1 << 30:
        parser.error("--n must be in [1, 2^30]")
    return args


if __name__ == "__main__":
    ARGS = parse_args()  # before the slow imports below, so that a bad option fails at once

if INTERPRET:
    import torch
    import triton
else:  # without a GPU, torch or triton: one plain line and exit 1
    torch, triton = course_tools.require_cuda("torch", "triton")
import triton.language as tl  # noqa: E402


# --8<-- [start:kernel]
@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)                  # which block ("program") this is
    offsets = pid * BLOCK + tl.arange(0, BLOCK)  # a whole block of indices at once
    mask = offsets < n                           # the boundary check, as a mask
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)


def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    n = a.numel()
    grid = (triton.cdiv(n, 1024),)
    add_kernel[grid](a, b, c, n, BLOCK=1024)
    return c
# --8<-- [end:kernel]


def bench(n: int) -> bool:
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    src = torch.zeros(n // 2 * 3, device="cuda")  # a copy of 1.5 n floats moves as many bytes as the add
    dst = torch.empty_like(src)
    case = f"vector add, {n} floats (Python)"
    moved = 3 * 4 * n
    want = a.double() + b.double()
    course_tools.bench(case, "device copy (Tensor.copy_), same bytes", course_tools.time_ms(lambda: dst.copy_(src)),
                       2 * 4 * src.numel())
    ok = True
    # 3 GiB moved: torch_peers prunes the CUDA-graph configurations, with the reason, at this size.
    for impl, run in course_tools.torch_peers(lambda u, v: torch.add(u, v), (a, b), "torch.add, fp32", moved):
        good = course_tools.check_close_on_device(course_tools.slug(f"{impl} {n}"), run(), want, 1e-6, 1e-6)
        ok &= good
        if good:
            course_tools.bench(case, impl, course_tools.time_ms(run), moved, n, peer=True)
    c.fill_(float("nan"))  # poisoned: the kernel is checked again at the timed size
    if course_tools.check_close_on_device(f"triton_vector_add_{n}", add(a, b, c), want, 1e-6, 1e-6):
        course_tools.bench(case, "Triton add_kernel", course_tools.time_ms(lambda: add(a, b, c)), moved, n)
    else:
        ok = False
    return ok


def main(args) -> int:
    gen = torch.Generator().manual_seed(args.seed)
    a = (torch.rand(args.n, generator=gen) * 2 - 1).to(DEVICE)
    b = (torch.rand(args.n, generator=gen) * 2 - 1).to(DEVICE)
    c = torch.full_like(a, float("nan"))  # poisoned output
    got = add(a, b, c)
    want = a.double() + b.double()
    ok = course_tools.check_close(f"triton_vector_add_{DEVICE}", got, want, rtol=1e-6, atol=1e-6)
    if ok and args.bench:
        ok = bench(1 << 28)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(ARGS))
