"""timeline.py: record two GPU timelines with the PyTorch profiler and print them compactly, for the
figures on docs/first-kernels/cuda-graphs.md (drawn by scripts/timeline_svg.py from the recorded output):
  streams     8 chunks on 4 streams, each chunk copied in (pinned memory), computed (sin, scale, shift,
              four rounds) and copied out, as in kernels/first-kernels/streams.cu
  mnist-step  one training step of kernels/mnist/mnist_torch.py's network (batch 64, random images)

Each trace is one line: TIMELINE {"trace": ..., "names": [...], "events": [[stream, start_us, dur_us,
name index], ...]}, times relative to the trace's first GPU event. Both workloads are checked: the
streams result against a float64 CPU reference, the training step by its loss falling on a fixed batch.
Run: python kernels/first-kernels/timeline.py
"""
# course: gpu
import json
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "common"))
sys.path.insert(0, str(HERE.parents[1] / "mnist"))
import course_tools  # noqa: E402

CHUNKS, STREAMS, ROUNDS = 8, 4, 4


def short_name(name: str) -> str:
    """A kernel's name as a reader would say it: the PyTorch op for its elementwise kernels
    ("sin", "mul"), else the last identifier before its template or parameter list."""
    m = re.search(r"(\w+?)_kernel_cuda", name)
    if m:
        return m.group(1).split("::")[-1]
    m = re.search(r"Functor_(\w+?)[<, >]", name)  # CUDAFunctor_add<float>
    if m:
        return m.group(1)
    functors = [f for f in re.findall(r"(\w+?)Functor\b", name) if f.split("_")[-1] not in ("Binary", "Unary")]
    if functors:
        return functors[-1].split("::")[-1].lower()
    if name.startswith("Memcpy") or name.startswith("Memset"):
        return name.split(" (")[0]
    clean = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    head = re.split(r"[<(]", clean, maxsplit=1)[0]
    return head.split("::")[-1][:40] or name[:40]


# --8<-- [start:trace]
def gpu_events(prof) -> list[tuple[int, float, float, str]]:
    """(stream, start us, duration us, name) of every kernel, copy and memset the profiler saw."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))  # Chrome trace-event format; GPU rows carry their stream
        trace = json.loads(path.read_text())
    out = []
    for e in trace.get("traceEvents", []):
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
            out.append((int(e.get("args", {}).get("stream", -1)), float(e["ts"]), float(e["dur"]), e["name"]))
    return sorted(out, key=lambda ev: ev[1])
# --8<-- [end:trace]


def print_timeline(label: str, events) -> None:
    t0 = min(ev[1] for ev in events)
    names: list[str] = []
    rows = []
    for stream, ts, dur, name in events:
        short = short_name(name)
        if short not in names:
            names.append(short)
        rows.append([stream, round(ts - t0, 1), round(dur, 1), names.index(short)])
    print("TIMELINE " + json.dumps({"trace": label, "names": names, "events": rows}, separators=(",", ":")))


def streams_workload(torch, n: int, h_in, h_out, d_in, d_out, streams) -> None:
    per = -(-n // CHUNKS)
    for c in range(CHUNKS):
        part = slice(c * per, min(n, (c + 1) * per))
        with torch.cuda.stream(streams[c % STREAMS]):
            d_in[part].copy_(h_in[part], non_blocking=True)
            torch.sin(d_in[part], out=d_out[part])
            for r in range(ROUNDS):
                if r:
                    torch.sin(d_out[part], out=d_out[part])
                d_out[part].mul_(0.5).add_(0.25)
            h_out[part].copy_(d_out[part], non_blocking=True)


def main() -> int:
    course_tools.parser("record a multi-stream timeline and an MNIST training step with torch.profiler").parse_args()
    torch = course_tools.require_cuda("torch")
    from torch.profiler import ProfilerActivity, profile
    import mnist_torch  # kernels/mnist/mnist_torch.py: the network and its training step

    # The multi-stream pipeline.
    n = (1 << 22) + 3
    g = torch.Generator().manual_seed(2026)
    h_in = (torch.rand(n, generator=g) * 2 - 1).pin_memory()
    h_out = torch.full((n,), float("nan")).pin_memory()
    d_in = torch.empty(n, device="cuda")
    d_out = torch.full((n,), float("nan"), device="cuda")
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    streams_workload(torch, n, h_in, h_out, d_in, d_out, streams)  # warm-up: module load, allocator
    torch.cuda.synchronize()
    h_out.fill_(float("nan"))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        streams_workload(torch, n, h_in, h_out, d_in, d_out, streams)
        torch.cuda.synchronize()
    want = h_in.double()
    for _ in range(ROUNDS):
        want = torch.sin(want) * 0.5 + 0.25
    ok = course_tools.check_close("streams_result", h_out, want, rtol=1e-5, atol=1e-5)
    events = gpu_events(prof)
    used = {ev[0] for ev in events}
    ok = course_tools.check_true("streams_trace_has_every_stream", len(used) >= STREAMS, len(events),
                                 f"streams={len(used)}") and ok
    print_timeline("streams", events)

    # One MNIST training step (random images: the timeline, not the accuracy, is the point).
    model, opt = mnist_torch.make_model(0, "cuda")
    images = torch.randint(0, 256, (4096, 28, 28), dtype=torch.uint8, generator=g).cuda()
    labels = torch.randint(0, 10, (4096,), generator=g).cuda()
    idx = torch.randint(0, 4096, (mnist_torch.BATCH,), generator=g).cuda()
    first = mnist_torch.train_step(model, opt, images, labels, idx).item()
    for _ in range(3):  # warm-up: cuDNN's choices, the allocator
        mnist_torch.train_step(model, opt, images, labels, idx)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        mnist_torch.train_step(model, opt, images, labels, idx)
        torch.cuda.synchronize()
    for _ in range(20):
        last = mnist_torch.train_step(model, opt, images, labels, idx)
    last = last.item()
    ok = course_tools.check_true("mnist_step_loss_falls_on_a_fixed_batch", last == last and last < first, 1,
                                 f"first={first:.4f} after_25_steps={last:.4f}") and ok
    events = gpu_events(prof)
    ok = course_tools.check_true("mnist_step_trace_has_kernels", len(events) > 0, len(events)) and ok
    print_timeline("mnist-step", events)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
