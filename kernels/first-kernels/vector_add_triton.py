"""vector_add_triton.py: vector addition in Triton, checked against PyTorch; with --bench, timed
against torch.add and against a device-to-device copy of the same number of bytes (the peer).

Taught in docs/first-kernels/python.md and docs/first-kernels/vector-add.md.
Run: python kernels/first-kernels/vector_add_triton.py --n 1000003            (on a GPU)
     TRITON_INTERPRET=1 python kernels/first-kernels/vector_add_triton.py --n 1000  (on the CPU)
"""
# course: gpu
# course: run --n 1000003
# course: run --n 1
# course: run --n 4099
# course: bench --bench
import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

# Triton's interpreter runs the kernel on the CPU with CPU tensors: no GPU needed.
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


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


def median_ms(fn, warmup=3, repeats=20):
    """CUDA events, warm-up, L2 flushed before each repeat, median (like course::time_kernel_ms).
    A GPU-side sleep before the start event keeps Python's launch overhead out of the timing."""
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(repeats):
        flush.fill_(i & 0xFF)
        torch.cuda._sleep(1_000_000)  # ~0.5 ms of GPU work, so the host queues fn() before the start event runs
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[repeats // 2]


def bench(n: int) -> None:
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    src = torch.zeros(n // 2 * 3, device="cuda")  # a copy of 1.5 n floats moves as many bytes as the add
    dst = torch.empty_like(src)
    case = f"vector add, {n} floats (Python)"
    moved = 3 * 4 * n
    rows = [
        ("device copy (Tensor.copy_), same bytes", median_ms(lambda: dst.copy_(src)), 2 * 4 * src.numel(), 0, True),
        ("torch.add", median_ms(lambda: torch.add(a, b, out=c)), moved, n, False),
        ("Triton add_kernel", median_ms(lambda: add(a, b, c)), moved, n, False),
    ]
    for impl, ms, nbytes, flops, peer in rows:
        print("BENCH " + json.dumps({"case": case, "impl": impl, "time_ms": ms, "bytes": nbytes, "flops": flops,
                                     "peer": peer}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_003)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--bench", action="store_true")
    args = parser.parse_args()
    if args.n < 1:
        print("error: --n must be at least 1", file=sys.stderr)
        return 1
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU; run with TRITON_INTERPRET=1 to use Triton's CPU interpreter", file=sys.stderr)
        return 1
    gen = torch.Generator().manual_seed(args.seed)
    a = (torch.rand(args.n, generator=gen) * 2 - 1).to(DEVICE)
    b = (torch.rand(args.n, generator=gen) * 2 - 1).to(DEVICE)
    c = torch.full_like(a, float("nan"))  # poisoned output
    got = add(a, b, c).cpu().double()
    want = a.cpu().double() + b.cpu().double()
    err = (got - want).abs()
    ok = bool((err <= 1e-6 + 1e-6 * want.abs()).all())
    print(f"CHECK {'PASS' if ok else 'FAIL'} triton_vector_add_{DEVICE} n={args.n} "
          f"max_abs_err={err.max().item():.3g} rtol=1e-06 atol=1e-06")
    if ok and args.bench:
        bench(1 << 28)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
