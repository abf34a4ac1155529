# matmul_python.py: C = alpha * A @ B + beta * C in plain Python (a triple loop), then in NumPy.
#
# Taught in docs/fast-matmul-fft/cpu.md: the slow, obviously correct starting point of the ladder.
# Both are checked against a float64 NumPy product on random inputs of odd sizes, and timed on the
# CPU (the timings are printed, not recorded: they depend on the machine that runs the tests).
# Run: python kernels/matmul/matmul_python.py --m 37 --n 29 --k 41
#
# course: run --m 37 --n 29 --k 41
# course: run --m 1 --n 1 --k 1
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


# --8<-- [start:loops]
def matmul_loops(alpha, A, B, beta, C):
    """Row-major lists of lists; returns a new C. 2*M*N*K multiply-adds, one Python object each."""
    M, K, N = len(A), len(B), len(B[0])
    out = [[0.0] * N for _ in range(M)]
    for i in range(M):
        for j in range(N):
            acc = 0.0
            for k in range(K):
                acc += A[i][k] * B[k][j]
            out[i][j] = alpha * acc + beta * C[i][j]
    return out
# --8<-- [end:loops]


# --8<-- [start:numpy]
def matmul_numpy(alpha, A, B, beta, C):
    """float32 arrays; NumPy hands A @ B to an optimised BLAS (blocked, vectorised, multithreaded)."""
    return alpha * (A @ B) + beta * C
# --8<-- [end:numpy]


def main():
    ap = course_tools.parser("C = alpha A B + beta C with Python loops and with NumPy, checked in float64")
    ap.add_argument("--m", type=int, default=37)
    ap.add_argument("--n", type=int, default=29)
    ap.add_argument("--k", type=int, default=41)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--time", type=int, default=0, help="also time both on an S x S x S problem")
    a = ap.parse_args()
    if min(a.m, a.n, a.k) < 1 or a.time < 0:
        ap.error("--m, --n and --k must be at least 1, --time at least 0")
    rng = np.random.default_rng(a.seed)
    A, B, C = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((a.m, a.k), (a.k, a.n), (a.m, a.n)))
    alpha, beta = 1.5, -0.5
    want = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C.astype(np.float64)
    ok = course_tools.check_close("python_loops", matmul_loops(alpha, A.tolist(), B.tolist(), beta, C.tolist()), want,
                                  1e-6, 1e-9)
    ok &= course_tools.check_close("numpy_float32", matmul_numpy(np.float32(alpha), A, B, np.float32(beta), C), want,
                                   1e-4, 1e-6 * a.k)
    if a.time:
        S = a.time
        A, B, C = (rng.uniform(-1, 1, (S, S)).astype(np.float32) for _ in range(3))
        flops = 2.0 * S**3
        t = time.perf_counter()
        matmul_loops(1.0, A.tolist(), B.tolist(), 0.0, C.tolist())
        t_loops = time.perf_counter() - t
        matmul_numpy(np.float32(1), A, B, np.float32(0), C)  # warm-up
        t = time.perf_counter()
        matmul_numpy(np.float32(1), A, B, np.float32(0), C)
        t_np = time.perf_counter() - t
        print(f"size {S}: loops {t_loops * 1e3:.1f} ms ({flops / t_loops / 1e9:.3f} GFLOP/s), "
              f"numpy {t_np * 1e3:.3f} ms ({flops / t_np / 1e9:.1f} GFLOP/s)")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
