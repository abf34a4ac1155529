"""sdpa_torch_backward.py: the backward of PyTorch's scaled_dot_product_attention, one row per backend
(flash, cuDNN, memory-efficient, math), the peers of the chapter's backward kernels (flash_bwd.cu,
flash_hopper_bwd.cu): every backend's output and gradients checked against float64 (sdpa_torch.py's
check), then autograd's backward timed on sdpa_torch.py's shapes.

Taught in docs/attention/backward.md and hopper-backward.md. The cases are the CUDA programs'
backward rows ("b4 h16 s4096 d128 causal backward" ...), so a page can compare a CUDA row with the
fastest SDPA row. The forward peers live in sdpa_torch.py: the forward kernels and the backward
kernels are compared with separate programs, so that each family and its peer are timed back to back
on one GPU in a run that fits one GPU command (course/gpu_run.py deals compared programs together).

Run: python kernels/attention/sdpa_torch_backward.py            (checks every backend)
     python kernels/attention/sdpa_torch_backward.py --bench    (also times their backward)

# course: gpu
# course: run
# course: bench --bench
# course: invariant faster causal non-causal "PyTorch SDPA flash*" max-ratio=0.8
# course: invariant faster causal non-causal "PyTorch SDPA cuDNN*" max-ratio=0.8
# course: invariant faster causal non-causal "PyTorch SDPA efficient*" max-ratio=0.8
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

from sdpa_torch import (LABEL, case_name, checked_start, inputs, run_backend, time_every_case,  # noqa: E402
                        unless_unavailable)


# --8<-- [start:backward]
def bench_backward(torch, backend, b, h, s, d, causal, seed, repeats=20):
    """Times autograd's backward of one case (the forward runs once, outside the timed region; the graph
    is kept so that every timed call computes the same gradients); prints why when the backend cannot
    run it."""
    label = f"PyTorch SDPA {LABEL[backend]} (bf16)"
    case = f"{case_name(b, h, s, d, causal)} backward"

    def backward():
        q, k, v, d_out = inputs(torch, b, h, s, d, seed)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = run_backend(torch, backend, *leaves, causal)
        return q, course_tools.time_ms(lambda: torch.autograd.grad(out, leaves, d_out, retain_graph=True),
                                       repeats=repeats)

    measured = unless_unavailable(torch, case, label, backward)
    if measured is not None:
        q, ms = measured
        # The usual count: five matrix products to the forward's two, so 2.5 times its FLOPs; the bytes
        # are Q, K, V, O and dO read, dQ, dK, dV written.
        flops = 2.5 * 4.0 * b * h * s * s * d / (2 if causal else 1)
        course_tools.bench(case, label, ms, 8 * q.numel() * q.element_size(), flops, peer=True, seq=s)
        del q
    torch.cuda.empty_cache()
# --8<-- [end:backward]


def main():
    args, torch, ok = checked_start("PyTorch SDPA backends: checked, and their backward timed",
                                    "time every backend's backward")
    if args.bench:
        time_every_case(torch, bench_backward, args.seed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
