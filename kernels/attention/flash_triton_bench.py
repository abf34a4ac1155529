# flash_triton_bench.py: the Triton FlashAttention forward (kernels/attention/flash_triton.py) compiled
# on the GPU, checked against float64 at odd sizes, and timed beside PyTorch's
# scaled_dot_product_attention (its default backend choice) in the same run.
#
# Taught in docs/attention/triton.md. The CUDA kernels of the chapter are timed by
# kernels/attention/flash_fwd.cu; the page compares the two through their BENCH rows (same case strings).
# Run:   python kernels/attention/flash_triton_bench.py            (checks on the GPU)
#        python kernels/attention/flash_triton_bench.py --bench    (also times b4 h16 s4096 d128)
#        python kernels/attention/flash_triton_bench.py --plant zeros-small   (or --causal --plant tile: the
#        benchmark size's output corrupted after the run; passes only if the check rejects it)
#
# course: gpu
# course: run
# course: run --plant zeros-small
# course: run --causal --plant tile
# course: bench --bench
# course: invariant faster causal non-causal * max-ratio=0.8
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


def main() -> int:
    p = course_tools.peer_parser("Triton FlashAttention forward on the GPU: checks, and timings beside PyTorch SDPA",
                                 "time b4 h16 s4096 d128, causal and not", seed=0)
    p.add_argument("--plant", choices=course_tools.PLANTS,
                   help="corrupt the benchmark size's output after the run: passes only if the check rejects it")
    p.add_argument("--causal", action="store_true", help="with --plant: the causal output, not the non-causal")
    args = p.parse_args()
    if args.plant and args.bench:
        p.error("--plant checks one output; it cannot be combined with --bench")
    if args.causal and not args.plant:
        p.error("--causal picks the output --plant corrupts; without --plant both are checked")
    torch = course_tools.require_cuda("torch")
    import flash_triton  # noqa: E402  (imports triton; compiled for this GPU since a GPU is present)

    print(f"triton {flash_triton.triton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if args.plant:  # at the benchmark size, where many outputs are smaller than the old fixed tolerance
        q, k, v = flash_triton.random_qkv(4, 16, 4096, 128, "cuda", args.seed)
        mode = "causal" if args.causal else "noncausal"
        return 0 if flash_triton.check_case(f"flash_triton_{mode}", q, k, v, args.causal, plant=args.plant) else 1
    ok = True
    # Odd sequence lengths (not multiples of any tile), both head dimensions, batch x heads > 1.
    for batch, heads, seq, dim in [(2, 3, 37, 64), (2, 2, 257, 128), (1, 3, 1000, 64), (3, 2, 129, 128)]:
        ok &= flash_triton.check_all(batch, heads, seq, dim, "cuda", args.seed)
    if not args.bench:
        return 0 if ok else 1

    # --8<-- [start:bench]
    import torch.nn.functional as F

    batch, heads, seq, dim = 4, 16, 4096, 128
    q, k, v = flash_triton.random_qkv(batch, heads, seq, dim, "cuda", args.seed)
    out = torch.empty_like(q)
    nbytes = 4 * q.numel() * q.element_size()              # read Q, K, V once, write O once
    for causal in (True, False):
        case = f"b{batch} h{heads} s{seq} d{dim} {'causal' if causal else 'non-causal'}"
        flops = 4 * batch * heads * seq * seq * dim // (2 if causal else 1)  # two GEMMs; causal: half
        # Check the benchmark size too, every element against float64 (computed on the GPU).
        ok &= flash_triton.check_case(f"flash_triton_{case.replace(' ', '_')}", q, k, v, causal)
        ms = course_tools.time_ms(lambda: flash_triton.flash_attention(q, k, v, causal, out=out))
        course_tools.bench(case, "Triton flash (bf16, fp32 acc)", ms, nbytes, flops,
                           config=str(flash_triton.flash_forward_kernel.best_config))
        ms = course_tools.time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        course_tools.bench(case, "PyTorch SDPA default (bf16)", ms, nbytes, flops, peer=True)
    # --8<-- [end:bench]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
