# versus_pytorch.py: the chapter's best transpose, sum and softmax kernels against the strongest
# configurations PyTorch offers (eager, and torch.compile in its modes; CUDA graphs are pruned, with the
# reason printed, because every operation here moves hundreds of MiB), each against a copy of the same
# bytes measured in the same run.
#
# Taught in docs/memory-model/versus-pytorch.md. The CUDA kernels are the very files the C++ programs
# include: kernels/memory-model/transpose.cuh, kernels/memory-model/reduction.cuh and
# kernels/memory-model/softmax.cuh, compiled at run time by CuPy (NVRTC) and launched on PyTorch's
# tensors without copies. Every result is checked against PyTorch in float64 first.
# Run:   python kernels/memory-model/versus_pytorch.py            (checks on sizes 1, primes, odd shapes)
#        python kernels/memory-model/versus_pytorch.py --bench    (also times everything)
#
# course: gpu
# course: run
# course: run --plant zeros-small
# course: bench --bench
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

modes = course_tools.COMPILE_MODES  # torch.compile modes timed; none with --no-compile
cp = torch = None  # imported in main(), after the arguments are parsed (course_tools.require_cuda)
ROOT = Path(__file__).resolve().parents[2]
SOURCES = {
    "transpose": "kernels/memory-model/transpose.cuh",
    "reduction": "kernels/memory-model/reduction.cuh",
    "softmax": "kernels/memory-model/softmax.cuh",
}
bench, check_close, time_ms = course_tools.bench, course_tools.check_close, course_tools.time_ms
torch_peers, slug = course_tools.torch_peers, course_tools.slug


# --8<-- [start:load]
def load(name: str) -> "cp.RawModule":
    """Compile one of the chapter's kernel files with NVRTC for this GPU."""
    return cp.RawModule(code=(ROOT / SOURCES[name]).read_text(), options=("-std=c++17",))


def as_cupy(t: "torch.Tensor") -> "cp.ndarray":
    return cp.from_dlpack(t)  # the same memory, no copy
# --8<-- [end:load]


# --8<-- [start:launchers]
# name: (threads per block, 0 for 32 x 8; tile size). The float4 kernels need rows % 4 == cols % 4 == 0.
TRANSPOSE_KERNELS = {"transpose_padded": (0, 32), "transpose_padded_vec4": (256, 32),
                     "transpose_padded_vec4_x4": (64, 32), "transpose_tile64_vec4": (256, 64)}


def make_transpose(mod, kernel: str, x: "torch.Tensor", out: "torch.Tensor"):
    """A function that launches `kernel` to write x's transpose into out (cols x rows)."""
    rows, cols = x.shape
    fn, (threads, tile) = mod.get_function(kernel), TRANSPOSE_KERNELS[kernel]
    grid, block = ((cols + tile - 1) // tile, (rows + tile - 1) // tile), (threads,) if threads else (32, 8)
    args = (as_cupy(x), as_cupy(out), cp.int32(rows), cp.int32(cols))
    return lambda: fn(grid, block, args)


SUM_KERNELS = ("reduce_vec4_x4", "reduce_chunks_x4", "reduce_chunks_x8", "reduce_chunks_x4_fused")


def make_sum(mod, kernel: str, x: "torch.Tensor", out: "torch.Tensor"):
    """A function that writes sum(x) into out[0]: one of the grid kernels, then the partials pass,
    or the fused kernel alone (the launch configurations of reduction.cu)."""
    n, sms = x.numel(), torch.cuda.get_device_properties(0).multi_processor_count
    blocks = max(1, min((n // 4 + 511) // 512, 4 * sms))
    partials = torch.empty(blocks, device="cuda")
    main, finish = mod.get_function(kernel), mod.get_function("reduce_partials")
    if kernel.endswith("_fused"):
        blocks_done = torch.zeros(1, dtype=torch.int32, device="cuda")  # the kernel leaves it at zero
        args = (as_cupy(x), as_cupy(partials), as_cupy(blocks_done), as_cupy(out), cp.int64(n))
        return lambda: main((blocks,), (512,), args)
    main_args = (as_cupy(x), as_cupy(partials), cp.int64(n))
    finish_args = (as_cupy(partials), as_cupy(out), cp.int32(blocks))

    def run():
        main((blocks,), (512,), main_args)
        finish((1,), (512,), finish_args)
    return run


SOFTMAX_KERNELS = {  # name: (threads per block, needs cols % 4 == 0); all need cols <= 8192
    "softmax_block_regs_256x32": (256, False),
    "softmax_block_regs_v4_256x8": (256, True),
    "softmax_block_regs_v4_512x4": (512, True),
}


def make_softmax(mod, kernel: str, x: "torch.Tensor", out: "torch.Tensor"):
    """A function that writes softmax(x, dim=1) into out: one block per row."""
    rows, cols = x.shape
    fn, threads = mod.get_function(kernel), SOFTMAX_KERNELS[kernel][0]
    args = (as_cupy(x), as_cupy(out), cp.int32(cols))
    return lambda: fn((rows,), (threads,), args)
# --8<-- [end:launchers]


def softmax_applies(kernel: str, cols: int) -> bool:
    return cols <= 8192 and (cols % 4 == 0 or not SOFTMAX_KERNELS[kernel][1])


def run_transpose(mod, shapes, do_bench: bool) -> bool:
    ok = True
    kernels = tuple(TRANSPOSE_KERNELS)
    for rows, cols in shapes:
        x = torch.rand(rows, cols, device="cuda") * 2 - 1
        out = torch.empty(cols, rows, device="cuda")
        want = x.double().t()
        for kernel in kernels:
            if TRANSPOSE_KERNELS[kernel][0] and (rows % 4 or cols % 4):
                continue
            out.fill_(float("nan"))  # poisoned
            make_transpose(mod, kernel, x, out)()
            ok &= check_close(f"{kernel}_{rows}x{cols}", out, want, 0.0, 0.0)
        if do_bench and ok:
            # --8<-- [start:bench_transpose]
            case, nbytes = f"transpose {rows} x {cols} fp32", 2.0 * x.numel() * 4
            y = torch.empty_like(x)
            bench(case, "cudaMemcpy (torch copy_, same bytes)", time_ms(lambda: y.copy_(x)), nbytes)
            for impl, run in torch_peers(lambda t: t.t().contiguous(), (x,), "torch .t().contiguous(), fp32", nbytes,
                                         modes):
                good = check_close(slug(f"{impl} {rows}x{cols}"), run(), want, 0.0, 0.0)
                ok &= good
                if good:
                    bench(case, impl, time_ms(run), nbytes, peer=True)
            for kernel in kernels:
                if not TRANSPOSE_KERNELS[kernel][0] or (rows % 4 == 0 and cols % 4 == 0):
                    bench(case, f"course {kernel}", time_ms(make_transpose(mod, kernel, x, out)), nbytes)
            # --8<-- [end:bench_transpose]
    return ok


def run_sum(mod, sizes, do_bench: bool) -> bool:
    ok = True
    for n in sizes:
        x = torch.rand(n, device="cuda") * 2 - 1
        out = torch.empty(1, device="cuda")
        want = x.double().sum().reshape(1)
        atol = 1e-5 * float(x.double().abs().sum())
        for kernel in SUM_KERNELS:
            out.fill_(float("nan"))  # poisoned
            make_sum(mod, kernel, x, out)()
            ok &= check_close(f"{kernel}_{n}", out, want, 0.0, atol)
        ok &= check_close(f"torch_sum_{n}", torch.sum(x).reshape(1), want, 0.0, atol)
        if do_bench and ok:
            # --8<-- [start:bench_sum]
            case, nbytes = f"sum of {n} fp32", 4.0 * n
            half = x[: n // 2].clone()  # the copy moves n/2 floats: n * 4 bytes read and written
            y = torch.empty_like(half)
            bench(case, "cudaMemcpy (torch copy_, same bytes moved)", time_ms(lambda: y.copy_(half)), nbytes)
            for impl, run in torch_peers(lambda t: torch.sum(t), (x,), "torch.sum, fp32", nbytes, modes):
                good = check_close(slug(f"{impl} {n}"), run().reshape(1), want, 0.0, atol)
                ok &= good
                if good:
                    bench(case, impl, time_ms(run), nbytes, n, peer=True)
            for kernel in SUM_KERNELS:
                bench(case, f"course {kernel}", time_ms(make_sum(mod, kernel, x, out)), nbytes, n)
            # --8<-- [end:bench_sum]
    return ok


# --8<-- [start:softmax_rows]
def adversarial_rows(rows: int, cols: int) -> "torch.Tensor":
    """Random scores in [-8, 8], with row r % 8 of the kinds softmax.cu checks: a long run of -inf
    first, a causal mask (-inf after column r), fully masked, a single finite score, a NaN after a run
    of -inf, a NaN among random scores."""
    x = (torch.rand(rows, cols) * 2 - 1) * 8  # built on the host, then copied once
    inf = float("inf")
    for r in range(rows):
        kind = r % 8
        if kind == 1:
            x[r, : 3 * (cols // 4)] = -inf
        elif kind == 2:
            x[r, r + 1:] = -inf
        elif kind == 3:
            x[r] = -inf
        elif kind == 4:
            keep = cols - 1 if (r // 8) % 2 else (131 * r) % cols
            v = x[r, keep].item()
            x[r] = -inf
            x[r, keep] = v
        elif kind == 5:
            x[r, : cols // 2] = -inf
            x[r, cols // 2] = float("nan")
        elif kind == 7:
            x[r, (7 * r) % cols] = float("nan")
    return x.cuda()


def softmax_reference(x: "torch.Tensor") -> "torch.Tensor":
    """float64 softmax with the course's conventions: torch.softmax gives NaN for a fully masked row
    (exp(-inf - (-inf))); the course gives zeros. A row with a NaN stays NaN in both."""
    want = torch.softmax(x.double(), dim=1)
    fully_masked = (x == float("-inf")).all(dim=1, keepdim=True)
    return torch.where(fully_masked, torch.zeros_like(want), want)
# --8<-- [end:softmax_rows]


SOFTMAX_OLD_ATOL = 1e-9  # the fixed atol this check once had: what --plant zeros-small zeroes below
plant = False  # --plant zeros-small
planted_checks = 0  # how many checks had outputs small enough to plant zeros in


def check_softmax(name: str, got, want) -> bool:
    """Each output within SOFTMAX_RTOL of itself (softmax_reference.cuh's tolerance: relative, since
    every term is positive); with --plant zeros-small also the planted verdict, wherever some output is
    below the old atol (short rows of scores in [-8, 8] have none)."""
    global planted_checks
    ok = course_tools.check_close_each(name, got, want, course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL)
    if plant and bool(((want.abs() < SOFTMAX_OLD_ATOL) & (want != 0)).any()):
        planted_checks += 1
        ok = course_tools.check_each_planted(name, got, want, course_tools.SOFTMAX_ATOL, course_tools.SOFTMAX_RTOL,
                                             SOFTMAX_OLD_ATOL) and ok
    return ok


def check_softmax_kernel(name: str, run, x, out, want) -> bool:
    """Rows whose reference is NaN must come out NaN, checked after a run into zeros (a row the
    kernel never wrote cannot pass); every other row after a run into a NaN-poisoned output."""
    nan_rows = want.isnan().any(dim=1)
    out.fill_(float("nan"))  # poisoned
    run()
    ok = check_softmax(name, out[~nan_rows], want[~nan_rows])
    if bool(nan_rows.any()):
        out.zero_()
        run()
        got = out[nan_rows]
        ok &= course_tools.check_true(f"{name}_nan_rows", bool(got.isnan().all()), got.numel(),
                                      f"not_nan={int((~got.isnan()).sum())}")
    return ok


def run_softmax(mod, shapes, do_bench: bool, compiled) -> bool:
    ok = True
    for rows, cols in shapes:
        x = adversarial_rows(rows, cols)
        want = softmax_reference(x)
        out = torch.empty_like(x)
        for kernel in SOFTMAX_KERNELS:
            if softmax_applies(kernel, cols):
                ok &= check_softmax_kernel(f"{kernel}_{rows}x{cols}", make_softmax(mod, kernel, x, out), x, out, want)
        # PyTorch's own convention differs only on fully masked rows: compare it on random rows, and
        # record what it returns for a fully masked one.
        x = (torch.rand(rows, cols, device="cuda") * 2 - 1) * 8
        want = torch.softmax(x.double(), dim=1)
        ok &= check_softmax(f"torch_softmax_{rows}x{cols}", torch.softmax(x, dim=1), want)
        if compiled is not None:
            ok &= check_softmax(f"torch_compile_softmax_{rows}x{cols}", compiled(x), want)
        if do_bench and ok:
            # --8<-- [start:bench_softmax]
            case, nbytes = f"softmax {rows} x {cols} fp32", 2.0 * x.numel() * 4
            bench(case, "cudaMemcpy (torch copy_, same bytes)", time_ms(lambda: out.copy_(x)), nbytes)
            for impl, run in torch_peers(lambda t: torch.softmax(t, dim=1), (x,), "torch.softmax, fp32", nbytes,
                                         modes):
                good = check_softmax(slug(f"{impl} {rows}x{cols}"), run(), want)
                ok &= good
                if good:
                    bench(case, impl, time_ms(run), nbytes, peer=True)
            for kernel in SOFTMAX_KERNELS:
                if softmax_applies(kernel, cols):
                    bench(case, f"course {kernel}", time_ms(make_softmax(mod, kernel, x, out)), nbytes)
            # --8<-- [end:bench_softmax]
    masked = torch.full((1, 37), float("-inf"), device="cuda")
    ok &= course_tools.check_true("torch_softmax_fully_masked_row_is_nan",
                                  bool(torch.softmax(masked, dim=1).isnan().all()), masked.numel(),
                                  "torch.softmax of an all -inf row")
    return ok


def main() -> int:
    global cp, torch, modes, plant
    parser = course_tools.parser("The chapter's transpose, sum and softmax kernels against PyTorch")
    parser.add_argument("--bench", action="store_true", help="also time every kernel against PyTorch")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes a minute)")
    parser.add_argument("--plant", choices=course_tools.PLANT_CHOICES,
                        help="also run each softmax check on output with zeros where it is below the old atol")
    args = parser.parse_args()
    plant = args.plant == "zeros-small"
    cp, torch = course_tools.require_cuda("cupy", "torch")
    torch.manual_seed(2026)
    compiled = None
    if args.no_compile:
        modes = ()
        course_tools.pruned("torch.compile (every mode)", "--no-compile was given")
    else:
        # dynamic=False: one kernel specialised for each shape, as for a model with fixed shapes.
        compiled = torch.compile(lambda t: torch.softmax(t, dim=1), dynamic=False)
    ok = run_transpose(load("transpose"), [(1, 1), (1009, 997), (1004, 100)], False)
    ok &= run_sum(load("reduction"), [1, 4099, 1000003], False)
    ok &= run_softmax(load("softmax"), [(1, 1), (97, 997), (37, 8192), (3, 1000), (24, 20), (40, 33)], False,
                      compiled)
    if args.bench and ok:
        ok &= run_transpose(load("transpose"), [(8192, 8192)], True)
        ok &= run_sum(load("reduction"), [1 << 28], True)
        ok &= run_softmax(load("softmax"), [(8192, 8192)], True, compiled)
    if plant:  # the planted run proves something only if some check had small outputs to zero
        ok &= course_tools.check_true("planted_zeros_small_ran", planted_checks > 0, planted_checks,
                                      "checks with outputs below the old atol")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
