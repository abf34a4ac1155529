"""vector_add_cupy.py: load the CUDA C++ kernel in kernels/first-kernels/vector_add_kernel.cu with
CuPy's RawModule, launch it from Python and check it against NumPy.

Taught in docs/first-kernels/python.md.
Run: python kernels/first-kernels/vector_add_cupy.py --n 1000003
"""
# course: gpu
# course: run --n 1000003
# course: run --n 1
# course: run --n 4099
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

KERNEL_FILE = Path(__file__).with_name("vector_add_kernel.cu")


def main() -> int:
    parser = course_tools.parser("Launch vector_add_kernel.cu through CuPy and check it against NumPy.")
    parser.add_argument("--n", type=int, default=1_000_003)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    if not 1 <= args.n <= 1 << 30:
        parser.error("--n must be in [1, 2^30]")
    cp = course_tools.require_cuda("cupy")

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
    ok = course_tools.check_close("cupy_rawmodule_vector_add", got, want, rtol=1e-6, atol=1e-6)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
