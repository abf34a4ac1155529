"""decode_attention_sdpa.py: PyTorch's scaled_dot_product_attention at decode shapes, the peers of
decode_attention.cu: one query token per sequence against a bf16 KV cache, grouped-query attention
(32 query heads, 8 KV heads, head dimension 64: Llama-3.2-1B's), one row per backend (flash, cuDNN,
memory-efficient, math), each two ways: with enable_gqa=True (the KV heads shared, as the course's
kernel shares them) and with K and V expanded beforehand to one head per query head (what a backend
without GQA support needs; the expansion is not timed, but the kernel then reads four times the bytes).

Taught in docs/serving/decode-attention.md. The cases are the CUDA program's ("b1 ctx32768": batch 1,
every sequence 32,768 tokens), and every row's bytes are the same cache bytes as the CUDA rows', so a
page compares them directly and against the CUDA program's same-bytes copy.

Run: python kernels/serving/decode_attention_sdpa.py            (checks every backend against float64)
     python kernels/serving/decode_attention_sdpa.py --bench    (also times them)

# course: gpu
# course: run
# course: bench --bench
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attention"))
import course_tools  # noqa: E402

import attention_reference  # noqa: E402
from sdpa_torch import BACKENDS, LABEL  # noqa: E402

HEADS, KV_HEADS, DIM = 32, 8, 64
EXPANDED_LIMIT = 16 << 30  # expanded K and V above this are not allocated (a PRUNED line says so)


def inputs(torch, batch, context, seed, heads=HEADS, kv_heads=KV_HEADS, dim=DIM):
    """q (batch, heads, 1, dim) in [-2, 2], K in [-2, 2] and V in [-1, 1] (batch, kv_heads, context, dim),
    bf16, drawn in place (a 128k-token cache at batch 64 is 16 GiB: no float32 temporary)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    def uniform(shape, lo, hi):
        return torch.empty(shape, dtype=torch.bfloat16, device="cuda").uniform_(lo, hi, generator=g)
    return (uniform((batch, heads, 1, dim), -2, 2), uniform((batch, kv_heads, context, dim), -2, 2),
            uniform((batch, kv_heads, context, dim), -1, 1))


def expand(k, heads):
    """K or V with each KV head repeated for the query heads that share it (head h reads h // group)."""
    return k.repeat_interleave(heads // k.shape[1], dim=1)


# --8<-- [start:backend]
def run_backend(torch, backend, q, k, v, gqa):
    """One decode attention under one backend; raises RuntimeError when it cannot run this case."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
# --8<-- [end:backend]


def reference(q, k, v):
    """float64 decode attention and the same rounded as a fused bf16 kernel rounds (P and the output to
    bf16), from the chapter's reference: it takes one query length for queries and keys, so the query
    row is repeated over the context and row 0 kept (no mask: every row sees every key)."""
    heads, context = q.shape[1], k.shape[2]
    q_rows = q.expand(-1, -1, context, -1)
    exact, rounded = attention_reference.forward(q_rows, expand(k, heads), expand(v, heads), False,
                                                 rounding=attention_reference.round_bf16)
    return exact[:, :, :1], rounded[:, :, :1]


def check(torch, backend, seed):
    """Each way of running the backend against float64 on an odd context and a one-token cache."""
    ok = True
    for batch, context in ((2, 1037), (3, 1)):
        q, k, v = inputs(torch, batch, context, seed)
        exact, rounded = reference(q, k, v)
        for gqa in (True, False):
            how = "enable_gqa" if gqa else "expanded"
            name = course_tools.slug(f"{LABEL[backend]} {how} b{batch} ctx{context}")
            try:
                out = run_backend(torch, backend, q, k, v, True) if gqa else \
                    run_backend(torch, backend, q, expand(k, HEADS), expand(v, HEADS), False)
            except RuntimeError as e:
                print(f"SKIP PyTorch SDPA {name}: this backend cannot run here: {str(e).splitlines()[0]}")
                continue
            ok &= course_tools.check_scaled(name, out, exact, rounded, DIM)
    return ok


# --8<-- [start:bench]
def bench_case(torch, batch, context, seed):
    """Times every backend, both ways, on one case; a backend that cannot run it says why."""
    case = f"b{batch} ctx{context}"
    q, k, v = inputs(torch, batch, context, seed)
    cache_bytes = 2 * k.numel() * k.element_size()  # the bytes every row is credited with: K and V once
    flops = 4.0 * batch * HEADS * context * DIM
    for gqa in (True, False):
        if not gqa and cache_bytes * HEADS // KV_HEADS > EXPANDED_LIMIT:
            course_tools.pruned(f"{case} PyTorch SDPA (K/V expanded)", "the expanded cache would exceed 16 GiB")
            continue
        try:
            kk, vv = (k, v) if gqa else (expand(k, HEADS), expand(v, HEADS))
        except torch.cuda.OutOfMemoryError:
            print(f"MEMORY {case} K/V expanded: out of device memory")
            torch.cuda.empty_cache()
            continue
        for backend in BACKENDS:
            how = "enable_gqa" if gqa else f"K/V expanded to {HEADS} heads"
            label = f"PyTorch SDPA {LABEL[backend]} (bf16, {how})"
            try:
                ms = course_tools.time_ms(lambda: run_backend(torch, backend, q, kk, vv, gqa))
            except torch.cuda.OutOfMemoryError:
                print(f"MEMORY {case} {label}: out of device memory")
                torch.cuda.empty_cache()
                continue
            except RuntimeError as e:
                print(f"SKIP {case} {label}: this backend cannot run here: {str(e).splitlines()[0]}")
                continue
            course_tools.bench(case, label, ms, cache_bytes, flops, peer=True, batch=batch, context=context)
        del kk, vv
        torch.cuda.empty_cache()
    del q, k, v
    torch.cuda.empty_cache()
# --8<-- [end:bench]


def main():
    args, torch = course_tools.peer_start("PyTorch SDPA at decode shapes: checked and timed, one row per backend",
                                          "time every backend at the CUDA program's cases")
    ok = True
    for backend in BACKENDS:
        ok &= check(torch, backend, args.seed)
    if ok and args.bench:
        for batch in (1, 8, 64):
            for context in (1024, 8192, 32768, 131072):
                bench_case(torch, batch, context, args.seed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
