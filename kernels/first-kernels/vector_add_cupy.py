"""vector_add_cupy.py: load the CUDA C++ kernel in kernels/first-kernels/vector_add_kernel.cu with
CuPy's RawModule, launch it from Python and check it against NumPy.

Taught in docs/first-kernels/python.md.
Run: python kernels/first-kernels/vector_add_cupy.py --n 1000003
"""
# course: gpu
# course: run --n 1000003
# course: run --n 1
# course: run --n 4099
import argparse
import sys
from pathlib import Path

import numpy as np

KERNEL_FILE = Path(__file__).with_name("vector_add_kernel.cu")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_003)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    if args.n < 1:
        print("error: --n must be at least 1", file=sys.stderr)
        return 1
    try:
        import cupy as cp
    except ImportError:
        print("error: CuPy is not installed (pip install cupy-cuda13x)", file=sys.stderr)
        return 1

    # --8<-- [start:load]
    module = cp.RawModule(code=KERNEL_FILE.read_text(), options=("-std=c++17",))
    vector_add = module.get_function("vector_add")  # extern "C": the name is not mangled

    rng = np.random.default_rng(args.seed)
    a_host = rng.uniform(-1, 1, args.n).astype(np.float32)
    b_host = rng.uniform(-1, 1, args.n).astype(np.float32)
    a, b = cp.asarray(a_host), cp.asarray(b_host)       # copy in
    c = cp.full(args.n, cp.nan, dtype=cp.float32)       # poisoned output
    threads = 256
    blocks = (args.n + threads - 1) // threads
    # grid, block, then the arguments; scalars must have the C type the kernel expects
    vector_add((blocks,), (threads,), (a, b, c, cp.uint64(args.n)))
    got = cp.asnumpy(c)                                  # copy out (waits for the kernel)
    # --8<-- [end:load]

    want = a_host.astype(np.float64) + b_host.astype(np.float64)
    err = np.abs(got.astype(np.float64) - want)
    ok = bool(np.all(err <= 1e-6 + 1e-6 * np.abs(want)))  # NaN compares False: fails
    status = "PASS" if ok else "FAIL"
    print(f"CHECK {status} cupy_rawmodule_vector_add n={args.n} max_abs_err={np.nanmax(err):.3g} rtol=1e-06 atol=1e-06")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
