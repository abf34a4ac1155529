"""profile_torch.py: profile PyTorch code with torch.profiler: which CUDA kernels ran, for how
long, and under which named range.

Taught in docs/first-kernels/profiling.md.
Run: python kernels/first-kernels/profile_torch.py
"""
# course: gpu
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


def main() -> int:
    course_tools.parser("Profile ten torch.add calls with torch.profiler and check what it saw.").parse_args()
    torch = course_tools.require_cuda("torch")
    from torch.profiler import ProfilerActivity, profile, record_function
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
    ok_ranges = (any(e.key == "vector add x10" for e in events)
                 and any(e.key == "aten::add" and e.count == 10 for e in events))
    ok_kernel = len(kernels) >= 1 and sum(e.count for e in kernels) >= 10
    ok_ranges = course_tools.check_true("profiler_saw_range_and_10_adds", ok_ranges, 2)
    ok_kernel = course_tools.check_true("profiler_saw_cuda_kernels", ok_kernel, max(1, len(kernels)))
    ok_result = course_tools.check_close("torch_add_result", c, a.double() + b.double(), rtol=1e-6, atol=1e-6)
    return 0 if ok_ranges and ok_kernel and ok_result else 1


if __name__ == "__main__":
    sys.exit(main())
