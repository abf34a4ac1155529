"""fake_op_check.py: the checker for the fake-function exercise of docs/pytorch-extensions/exercises.md.
It imports kernels/pytorch-extensions/exercises/fake_op.py (or, with --solution,
kernels/pytorch-extensions/exercises/solutions/fake_op.py), compares the operator with a float64
reference on random tensors of several shapes (one row of one element, rows not a multiple of
anything), dtypes (float32, float64, float16, bfloat16), layouts (contiguous, transposed, every other
column) and devices (CPU, the meta device, and CUDA where there is a GPU), runs
torch.library.opcheck on each (schema, fake tensor, AOT dispatch tests: a fake result whose shape,
dtype, device or strides differ from the real one fails), and compiles it with
torch.compile(fullgraph=True), which traces through the fake function. On the meta device, where the
operator runs the fake function itself, it checks the result's shape, dtype, device and strides.

Run: python -m course.exercise fake_op     (or this file, with --solution, --seed S)
"""
# course: run --solution --seed 11
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import course_tools  # noqa: E402
import exercise_tools  # noqa: E402

EPS = 1e-6


def opcheck(name, op, args) -> bool:
    """torch.library.opcheck's tests, each reported; a failing one prints what it raised."""
    import torch

    report = torch.library.opcheck(op, args, raise_exception=False)
    failed = [test for test, outcome in report.items() if outcome != "SUCCESS"]
    for test in failed:
        print(f"  {name}: opcheck {test} failed: {' '.join(str(report[test]).split())[:400]}")
    detail = f"failed: {', '.join(failed)}" if failed else "passed: " + ", ".join(report)
    return course_tools.check_true(f"{name}_opcheck", not failed, len(report), detail)


def fake_result(name, got, x) -> bool:
    """The fake function's result for a meta x: x's shape, dtype and device, and the strides the real
    operator's result has (those of torch.empty_like(x))."""
    import torch

    want = torch.empty_like(x)
    facts = {"shape": (tuple(got.shape), tuple(want.shape)), "dtype": (got.dtype, want.dtype),
             "device": (got.device, want.device), "strides": (got.stride(), want.stride())}
    wrong = [f"{k} {g} (want {w})" for k, (g, w) in facts.items() if g != w]
    for what in wrong:
        print(f"  {name}: the fake result's {what}")
    return course_tools.check_true(f"{name}_fake_result", not wrong, len(facts),
                                   "; ".join(wrong) or "as the real one")


def main() -> int:
    module, _, seed = exercise_tools.start("Check the fake-function exercise (torch.library).", runs_on_cpu=True)
    import torch

    op = torch.ops.course_ex.rms_normalize.default
    gen = torch.Generator().manual_seed(seed)
    results = []
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    cases = [((7, 33), torch.float32, "contiguous", "cpu"), ((1, 1), torch.float32, "contiguous", "cpu"),
             ((3, 5, 129), torch.float64, "contiguous", "cpu"), ((40, 9), torch.float32, "transposed", "cpu"),
             ((6, 70), torch.bfloat16, "every_other_column", "cpu"), ((5, 31), torch.float16, "contiguous", "cpu"),
             ((4, 12), torch.float32, "transposed", "meta")]
    cases += [((9, 65), torch.float16, "transposed", d) for d in devices[1:]]
    for shape, dtype, layout, device in cases:
        # the view is taken last: .to() of a sliced (not dense) tensor returns a contiguous copy
        base = torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)
        x = {"contiguous": base, "transposed": base.transpose(-1, -2), "every_other_column": base[..., ::2]}[layout]
        name = "rms_normalize_" + "x".join(map(str, x.shape)) + f"_{str(dtype)[6:]}_{layout}_{device}"
        if device != "meta":  # meta tensors have no values: opcheck alone checks the fake function there
            xd = x.double()
            want = xd / torch.sqrt((xd * xd).mean(dim=-1, keepdim=True) + EPS)
            tol = {torch.float32: 1e-5, torch.float64: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
            results.append(exercise_tools.compare(name, module.rms_normalize(x, EPS), want, tol, tol))
        else:  # on the meta device the operator runs the fake function: its result must be a meta tensor too
            try:
                results.append(fake_result(name, module.rms_normalize(x, EPS), x))
            except Exception as e:  # the reader's fake function may raise anything
                print(f"  {name}: the fake function raised {type(e).__name__}: {' '.join(str(e).split())[:300]}")
                results.append(course_tools.check_true(f"{name}_fake_result", False, 1, f"raised {type(e).__name__}"))
        results.append(opcheck(name, op, (x, EPS)))
    try:
        compiled = torch.compile(lambda t: module.rms_normalize(t, EPS) * 2, fullgraph=True, backend="aot_eager")
        x = torch.randn(4, 17, generator=gen)
        results.append(exercise_tools.compare("rms_normalize_compiled", compiled(x), 2 * module.rms_normalize(x, EPS),
                                              1e-6, 1e-6))
    except Exception as e:  # the reader's fake function may raise anything while torch.compile traces
        print(f"  torch.compile(fullgraph=True) failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
        results.append(course_tools.check_true("rms_normalize_compiled", False, 1, f"raised {type(e).__name__}"))
    return exercise_tools.finish(results)


if __name__ == "__main__":
    sys.exit(main())
