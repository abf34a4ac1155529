"""sampling_torch.py: greedy and top-k sampling as a PyTorch model writes them, the peers of sampling.cu:
torch.argmax, and torch.topk, softmax at temperature T, cumsum and searchsorted with the caller's u (the
same inverse CDF as the CUDA kernel, so the draws are checkable against the same float64 reference),
each eager, eager in a CUDA graph and in every torch.compile mode, checked, then timed at the CUDA
program's cases ("top50 b64 v128256": top-50 sampling of 64 rows of Llama-3's vocabulary of 128,256).

Checked against float64 on 64 rows of 32,001 logits: argmax on every row, including a row with NaN (it
must give the first NaN's index) and a row of -inf (index 0); the draws on the rows of finite logits
(torch.topk ranks NaN above every number, so a NaN row's softmax is NaN). torch.topk does not promise
which of two equal logits comes first, so a draw that picks a different token of the same logit passes.

Taught in docs/serving/sampling.md.

Run: python kernels/serving/sampling_torch.py            (checks every configuration)
     python kernels/serving/sampling_torch.py --bench    (also times them)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

MARGIN = 1e-5  # draws whose u * total lies this close (relative) to a boundary of the running sum are skipped


# --8<-- [start:torch]
def greedy(torch, logits):
    return torch.argmax(logits, dim=-1)


def top_k_sample(torch, logits, u, k: int, temperature: float):
    """logits: [batch, vocab] fp32; u: [batch] in [0, 1). The first of the k largest logits, in descending
    order, whose cumulative probability exceeds u."""
    values, indices = torch.topk(logits, k, dim=-1)  # sorted, largest first
    probs = torch.softmax(values / temperature, dim=-1)
    cdf = torch.cumsum(probs, dim=-1)
    pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).clamp(max=k - 1)
    return indices.gather(-1, pick).squeeze(-1)
# --8<-- [end:torch]


def reference_greedy(torch, logits):
    """float64: the first NaN's index, else the first index of the largest logit (0 for a row of -inf)."""
    x = logits.double()
    first_max = (x == x.max(dim=-1, keepdim=True).values).int().argmax(dim=-1)  # argmax of ints: the first 1
    nan = torch.isnan(x)
    return torch.where(nan.any(dim=-1), nan.int().argmax(dim=-1), first_max)


def reference_draws(torch, logits, u, k, temperature):
    """float64: the tokens and each draw's margin (distance of u * total to the nearest boundary of the
    running sum, relative to the total). Sorted stably, so equal logits go to the lower index."""
    x = logits.double()
    values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
    values, indices = values[:, :k], indices[:, :k]
    weights = torch.exp((values - values[:, :1]) / temperature)
    running = torch.cumsum(weights, dim=-1)
    total = running[:, -1:]
    threshold = u.double().unsqueeze(-1) * total
    pick = torch.searchsorted(running, threshold, right=True).clamp(max=k - 1)
    margin = ((running - threshold).abs() / total).min(dim=-1).values
    return indices.gather(-1, pick).squeeze(-1), margin


def inputs(torch, batch, vocab, seed, adversarial):
    g = torch.Generator(device="cuda").manual_seed(seed)
    logits = 4 * torch.randn((batch, vocab), generator=g, device="cuda")
    u = torch.rand((batch,), generator=g, device="cuda")
    if adversarial:  # row 1: NaN here and there; row 2: all -inf; row 3: logits rounded to halves (ties)
        logits[1, 13::97] = float("nan")
        logits[2] = float("-inf")
        logits[3] = torch.round(2 * logits[3]) / 2
    return logits, u


def check_draws(torch, name, got, logits, want, margin, rows):
    """Draws on `rows` must pick the reference's token, or another of the same logit, unless skipped."""
    keep = torch.zeros_like(margin, dtype=torch.bool)
    keep[rows] = True
    skipped = int((keep & (margin < MARGIN)).sum())
    keep &= margin >= MARGIN
    same_logit = logits.gather(-1, got.long().unsqueeze(-1)) == logits.gather(-1, want.unsqueeze(-1))
    bad = keep & ~same_logit.squeeze(-1)
    detail = f"skipped={skipped} (u within {MARGIN:g} of a boundary of the running sum)"
    if bool(bad.any()):
        row = int(bad.nonzero()[0])
        detail = f"first_bad_row={row} got={int(got[row])} want={int(want[row])} " + detail
    return course_tools.check_true(name, not bool(bad.any()), int(keep.sum()), detail)


def run_all(torch, batch, vocab, k, temperature, adversarial, seed, bench):
    logits, u = inputs(torch, batch, vocab, seed, adversarial)
    finite_rows = [r for r in range(batch) if not (adversarial and r in (1, 2))]
    want_greedy = reference_greedy(torch, logits)
    want_draws, margin = reference_draws(torch, logits, u, k, temperature)
    nbytes = batch * vocab * 4 + batch * 4  # as sampling.cu: the logits read once, a token written
    ok = True
    configs = [("greedy", "torch.argmax (fp32)", lambda x, _u: greedy(torch, x)),
               (f"top{k}", "torch.topk + softmax + searchsorted (fp32)",
                lambda x, v: top_k_sample(torch, x, v, k, temperature))]
    for case, label, fn in configs:
        for impl, run in course_tools.torch_peers(fn, (logits, u), label, nbytes):
            out = run()
            name = course_tools.slug(f"{impl} b{batch} v{vocab}")
            if case == "greedy":
                bad = (out != want_greedy).nonzero()
                detail = "(the first NaN, 0 for a row of -inf)" if adversarial else ""
                if len(bad):
                    r = int(bad[0])
                    detail = f"first_bad_row={r} got={int(out[r])} want={int(want_greedy[r])}"
                ok &= course_tools.check_true(name, len(bad) == 0, batch, detail)
            else:
                ok &= check_draws(torch, name, out, logits, want_draws, margin, finite_rows)
            if bench:
                ms = course_tools.time_ms(run)
                course_tools.bench(f"{case} b{batch} v{vocab}", impl, ms, nbytes, peer=True, batch=batch)
    return ok


def main():
    # Without --bench odd sizes and adversarial rows; the benchmark checks each case before timing it.
    course_tools.check_then_bench(run_all, "Greedy and top-k sampling in PyTorch: checked, and timed with --bench",
                                  "time every configuration at the CUDA program's cases",
                                  ((64, 32001, 50, 1.0, True),),
                                  [(batch, 128256, 50, 1.0, False) for batch in (1, 64)])


if __name__ == "__main__":
    main()
