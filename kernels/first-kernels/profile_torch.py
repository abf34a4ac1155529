"""profile_torch.py: profile PyTorch code with torch.profiler: which CUDA kernels ran, for how
long, and under which named range.

Taught in docs/first-kernels/profiling.md.
Run: python kernels/first-kernels/profile_torch.py
"""
# course: gpu
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def main() -> int:
    if not torch.cuda.is_available():
        print("error: no CUDA GPU", file=sys.stderr)
        return 1
    n = (1 << 24) + 3
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    torch.add(a, b, out=c)  # warm-up outside the profile
    torch.cuda.synchronize()
    # --8<-- [start:profile]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("vector add x10"):  # a named range, like an NVTX range
            for _ in range(10):
                torch.add(a, b, out=c)
        torch.cuda.synchronize()  # the GPU work must finish inside the profile
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=6))
    # --8<-- [end:profile]
    events = prof.key_averages()
    kernels = [e for e in events if e.device_time_total > 0 and "aten::" not in e.key and "vector add" not in e.key]
    ok_ranges = any(e.key == "vector add x10" for e in events) and any(e.key == "aten::add" and e.count == 10 for e in events)
    ok_kernel = len(kernels) >= 1 and sum(e.count for e in kernels) >= 10
    want = a.double() + b.double()
    ok_result = bool(((c.double() - want).abs() <= 1e-6 + 1e-6 * want.abs()).all())
    print(f"CHECK {'PASS' if ok_ranges else 'FAIL'} profiler_saw_range_and_10_adds n=2")
    print(f"CHECK {'PASS' if ok_kernel else 'FAIL'} profiler_saw_cuda_kernels n={max(1, len(kernels))}")
    print(f"CHECK {'PASS' if ok_result else 'FAIL'} torch_add_result n={n} rtol=1e-06 atol=1e-06")
    return 0 if ok_ranges and ok_kernel and ok_result else 1


if __name__ == "__main__":
    sys.exit(main())
