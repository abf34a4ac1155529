"""sdpa_torch.py: PyTorch's scaled_dot_product_attention, one row per backend (flash, cuDNN,
memory-efficient, math), the peers of the chapter's CUDA kernels: checked against a float64
reference (output and gradients), the forward timed on the chapter's benchmark, and its peak memory
measured at growing sequence lengths, up to where the math backend (which materialises the score
matrix) runs out. The backward is timed by sdpa_torch_backward.py, so that the forward kernels and
the backward kernels are each measured with their own peer, back to back on one GPU, in a run that
fits one GPU command (course/gpu_run.py deals compared programs together).

Taught in docs/attention/three-kernels.md, flash-forward.md and hopper-kernel.md. The cases are the
CUDA programs' ("b4 h16 s4096 d128 causal" and "... non-causal"), so a page can compare a CUDA row
with the fastest SDPA row. The course's backward (flash_bwd.cu) is checked against its own float64
reference there, not against autograd here: both are float64 computations of the same gradients,
and checking it here would mean loading the CUDA program's output into Python.

Run: python kernels/attention/sdpa_torch.py            (checks every backend)
     python kernels/attention/sdpa_torch.py --bench    (also times the forward and measures memory)

# course: gpu
# course: run
# course: bench --bench
# course: measured peak_bytes alloc_bytes
# course: invariant faster causal non-causal "PyTorch SDPA flash*" max-ratio=0.8
# course: invariant faster causal non-causal "PyTorch SDPA cuDNN*" max-ratio=0.8
# course: invariant faster causal non-causal "PyTorch SDPA efficient*" max-ratio=0.8
# course: invariant grows seq "PyTorch SDPA flash*"
# course: invariant grows seq "PyTorch SDPA math*"
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

import attention_reference  # noqa: E402

# Tolerances follow the data (course_tools.check_scaled): each backend's error against float64 may be
# twice that of the same computation rounded as the fused bf16 kernels round it (FlashAttention-2's
# scheme, attention_common.cuh's version 2): P to bf16 before P V and before dV = P^T dO, dS to bf16
# before dQ and dK, the output and every gradient to bf16, delta = rowsum(dO o O) from the bf16 output.
# One model for every backend; one that rounds less is held to the same bound. The math backend is
# one: with torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp off (PyTorch 2.13's default) it
# computes bf16 inputs in fp32 and rounds only its results.
BACKENDS = ["FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH"]
LABEL = {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cuDNN", "EFFICIENT_ATTENTION": "efficient", "MATH": "math"}


def case_name(b, h, s, d, causal):
    return f"b{b} h{h} s{s} d{d} {'causal' if causal else 'non-causal'}"


def inputs(torch, b, h, s, d, seed):
    """Q, K in [-2, 2], V and dO in [-1, 1], bf16 (the CUDA programs' distribution)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    def uniform(lo, hi):
        return (torch.rand(b, h, s, d, device="cuda", generator=g) * (hi - lo) + lo).to(torch.bfloat16)
    return uniform(-2, 2), uniform(-2, 2), uniform(-1, 1), uniform(-1, 1)


# --8<-- [start:backend]
def run_backend(torch, backend, q, k, v, causal):
    """Forward under one backend; raises RuntimeError when the backend cannot run this case."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
# --8<-- [end:backend]


def check(torch, backend, causal, seed):
    """Output and gradients of one backend against float64 (attention_reference.py, which matches
    float64 autograd) on a size that is no multiple of any tile (333) with head dimension 64 and 128
    and batch x heads = 6."""
    ok = True
    for d in (64, 128):
        q, k, v, d_out = inputs(torch, 2, 3, 333, d, seed)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        try:
            out = run_backend(torch, backend, *leaves, causal)
        except RuntimeError as e:
            print(f"SKIP PyTorch SDPA {LABEL[backend]} d{d} {'causal' if causal else 'non-causal'}: "
                  f"this backend cannot run here: {str(e).splitlines()[0]}")
            continue
        grads = torch.autograd.grad(out, leaves, d_out)
        round_bf16 = attention_reference.round_bf16
        ref, ref_low = attention_reference.forward(q, k, v, causal, rounding=round_bf16)
        ref_grads, ref_grads_low = attention_reference.backward(q, k, v, d_out, causal, round_bf16)
        name = f"{LABEL[backend]} {case_name(2, 3, 333, d, causal)}".replace(" ", "_")  # one word
        ok &= course_tools.check_scaled(name, out, ref, ref_low, d)
        for grad_name, got, want, low in zip(("dQ", "dK", "dV"), grads, ref_grads, ref_grads_low):
            ok &= course_tools.check_scaled(f"{grad_name}_{name}", got, want, low, d)
    return ok


def unless_unavailable(torch, case, label, measure):
    """measure()'s result, or None after printing why the backend could not run the case: out of device
    memory, or a RuntimeError (a backend that does not support this GPU, shape or dtype)."""
    try:
        return measure()
    except torch.cuda.OutOfMemoryError:
        print(f"MEMORY {case} {label}: out of device memory")
        torch.cuda.empty_cache()
    except RuntimeError as e:
        print(f"SKIP {case} {label}: this backend cannot run here: {str(e).splitlines()[0]}")
    return None


# The timed shapes, (backends, batch, sequence, head dim), each causal and not: the chapter's benchmark
# for every backend, then the Hopper backward's other shapes (hopper-backward.md): head dimension 64,
# and sequence 16384 at batch 2. Math is left out of those: it materialises the scores (8 GiB per batch
# entry at 16384) and is the slowest backend at every recorded size. sdpa_torch_backward.py times the same.
FUSED_BACKENDS = [backend for backend in BACKENDS if backend != "MATH"]
SHAPES = [(BACKENDS, 4, 4096, 128)] + [(FUSED_BACKENDS, b, s, d) for b, s, d in ((4, 4096, 64), (2, 16384, 128))]


def checked_start(description, bench_help):
    """The start of both SDPA peer programs: peer_start (seed 2024, cuDNN's version printed), then every
    backend, causal and not, checked against float64 (check). Returns (args, torch, all checks passed)."""
    args, torch = course_tools.peer_start(description, bench_help, seed=2024, cudnn=True)
    ok = True
    for backend in BACKENDS:
        for causal in (False, True):
            ok &= check(torch, backend, causal, args.seed)
    return args, torch, ok


def time_every_case(torch, bench_one, seed):
    """bench_one(torch, backend, batch, 16 heads, seq, dim, causal, seed) for every timed case, in the order
    both peer programs run them: per shape, non-causal then causal, every backend back to back."""
    for backends, b, s, d in SHAPES:
        for causal in (False, True):
            for backend in backends:
                bench_one(torch, backend, b, 16, s, d, causal, seed)


def bench_forward(torch, backend, b, h, s, d, causal, seed, repeats=20):
    """Times the forward of one case; returns False if the backend cannot run it or runs out of memory,
    after printing why."""
    label = f"PyTorch SDPA {LABEL[backend]} (bf16)"
    case = case_name(b, h, s, d, causal)

    def forward():
        q, k, v, _ = inputs(torch, b, h, s, d, seed)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run_backend(torch, backend, q, k, v, causal)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base  # what the forward itself allocated, at its peak
        ms = course_tools.time_ms(lambda: run_backend(torch, backend, q, k, v, causal), repeats=repeats)
        return q, peak, ms

    measured = unless_unavailable(torch, case, label, forward)
    if measured is None:
        return False
    q, peak, ms = measured
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    io_bytes = 4 * q.numel() * q.element_size()  # Q, K, V read, O written
    course_tools.bench(case, label, ms, io_bytes, flops, peer=True, seq=s, peak_bytes=peak,
                       alloc_bytes=peak + io_bytes)
    del q
    torch.cuda.empty_cache()
    return True


def main():
    args, torch, ok = checked_start("PyTorch SDPA backends: checked, the forward timed and its memory measured",
                                    "time every backend's forward and measure memory")
    if args.bench:
        time_every_case(torch, bench_forward, args.seed)
        # Memory at growing sequence lengths: the fused backends against math, which materialises
        # the batch x heads x seq x seq scores. Math stops at its first out-of-memory.
        for backend in ("FLASH_ATTENTION", "MATH"):
            for s in (1024, 2048, 8192, 16384, 32768):
                if not bench_forward(torch, backend, 4, 16, s, 128, False, args.seed, repeats=5):
                    break
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
