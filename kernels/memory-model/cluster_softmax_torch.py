# cluster_softmax_torch.py: torch.softmax on the long rows of cluster_softmax.cu, the framework peer of
# the cluster softmax, with the same case strings and a copy of the same bytes in the same run: eager
# and under torch.compile in each mode (course_tools.torch_peers), each checked before it is timed.
#
# Taught in docs/memory-model/clusters.md. torch.softmax gives NaN for a fully masked row where the
# course's kernels give zeros (softmax.cuh's rules), so the check here uses random rows and partly
# masked rows (-inf runs and causal masks), compared with torch's own float64 softmax.
# Run:   python kernels/memory-model/cluster_softmax_torch.py            (checks 24 x 65537)
#        python kernels/memory-model/cluster_softmax_torch.py --bench    (also times 64K, 128K, 256K rows)
#
# course: gpu
# course: run
# course: run --plant zeros-small
# course: bench --bench
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

# The benchmark shapes of cluster_softmax.cu: 256 MiB in, 256 MiB out each.
BENCH_SHAPES = ((1024, 65536), (512, 131072), (256, 262144))


def scores(torch, rows: int, cols: int, seed: int):
    """Random scores in [-8, 8]; every fourth row starts with three quarters -inf, every fourth
    (offset 1) is a causal-mask row, as in softmax_reference.cuh."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(rows, cols, device="cuda", generator=g) * 16 - 8
    x[0::4, : 3 * (cols // 4)] = float("-inf")
    cols_idx = torch.arange(cols, device="cuda")
    for r in range(1, rows, 4):
        x[r, cols_idx > r] = float("-inf")
    return x


OLD_ATOL = 1e-9  # the fixed atol this check once had: what --plant zeros-small zeroes below
plant = False   # --plant zeros-small


def check_sample(name: str, got, want) -> bool:
    """Each output within SOFTMAX_RTOL of itself (softmax_reference.cuh's relative tolerance: at 64K
    columns and more, most outputs are below the old atol); with --plant also the planted verdict."""
    tol = (course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL)
    ok = course_tools.check_close_each(name, got, want, *tol)
    if plant:  # rows of 64K scores in [-8, 8] always have outputs below the old atol: planted n > 0
        ok = course_tools.check_each_planted(name, got, want, *tol, OLD_ATOL) and ok
    return ok


def check(torch, name: str, x, out, sample_rows: int) -> bool:
    out.fill_(float("nan"))  # poisoned
    torch.softmax(x, dim=1, out=out)
    want = torch.softmax(x[:sample_rows].double(), dim=1)
    return check_sample(name, out[:sample_rows], want)


def main() -> int:
    p = course_tools.peer_parser("torch.softmax on rows of 64K to 256K floats, against a copy of the same bytes",
                                 "also time the benchmark shapes")
    p.add_argument("--plant", choices=course_tools.PLANT_CHOICES,
                   help="also run each check on output with zeros where it is below the old atol")
    args = p.parse_args()
    global plant
    plant = args.plant == "zeros-small"
    torch = course_tools.require_cuda("torch")

    x = scores(torch, 24, 65537, args.seed)
    ok = check(torch, "torch_softmax_24x65537", x, torch.empty_like(x), 24)
    if args.bench and ok:
        # --8<-- [start:bench]
        for rows, cols in BENCH_SHAPES:
            gen = torch.Generator(device="cuda").manual_seed(args.seed + 1)
            x = torch.rand(rows, cols, device="cuda", generator=gen) * 16 - 8
            y = torch.empty_like(x)
            ok &= check(torch, f"torch_softmax_bench_{rows}x{cols}_sample", x, y, 4)
            want = torch.softmax(x[:4].double(), dim=1)
            case, nbytes = f"softmax {rows} x {cols} fp32", 2.0 * x.numel() * 4
            course_tools.bench(case, "cudaMemcpy (torch copy_, same bytes)",
                               course_tools.time_ms(lambda: y.copy_(x)), nbytes)
            # eager, and torch.compile in each mode; CUDA graphs are pruned (256 MiB each way), with the reason
            # printed
            for impl, run in course_tools.torch_peers(lambda t: torch.softmax(t, dim=1), (x,), "torch.softmax, fp32",
                                                      nbytes):
                good = check_sample(course_tools.slug(f"{impl} {rows}x{cols} sample"), run()[:4], want)
                ok &= good
                if good:
                    course_tools.bench(case, impl, course_tools.time_ms(run), nbytes, peer=True)
        # --8<-- [end:bench]
    return 0 if ok else course_tools.EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
