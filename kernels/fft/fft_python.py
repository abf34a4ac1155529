# fft_python.py: the discrete Fourier transform by its definition, then the recursive radix-2 FFT,
# in plain Python with complex numbers; both checked against numpy.fft.fft.
#
# Taught in docs/fast-matmul-fft/fft.md: the O(N^2) definition and the O(N log N) recursion that
# the CUDA kernels in fft.cu turn into loops.
# Run: python kernels/fft/fft_python.py --n 64
#
# course: run --n 64
# course: run --n 1
# course: run --n 8
import argparse
import cmath

import numpy as np


# --8<-- [start:dft]
def dft(x):
    """X[k] = sum_n x[n] exp(-2 pi i n k / N): N^2 complex multiply-adds."""
    N = len(x)
    return [sum(x[n] * cmath.exp(-2j * cmath.pi * n * k / N) for n in range(N)) for k in range(N)]
# --8<-- [end:dft]


# --8<-- [start:fft]
def fft(x):
    """Radix-2 decimation in time: a length-N DFT is two length-N/2 DFTs (even and odd samples)
    joined by N/2 butterflies. N must be a power of two."""
    N = len(x)
    if N == 1:
        return list(x)
    even, odd = fft(x[0::2]), fft(x[1::2])
    out = [0j] * N
    for k in range(N // 2):
        t = cmath.exp(-2j * cmath.pi * k / N) * odd[k]  # the twiddle factor w_N^k
        out[k] = even[k] + t
        out[k + N // 2] = even[k] - t
    return out
# --8<-- [end:fft]


def check(name, got, want, rtol, atol):
    got, want = np.asarray(got), np.asarray(want)
    err = np.abs(got - want)
    if got.size == 0 or not np.all(err <= atol + rtol * np.abs(want)):
        print(f"CHECK FAIL {name} n={got.size}")
        return False
    print(f"CHECK PASS {name} n={got.size} max_abs_err={err.max():.3g} rtol={rtol} atol={atol}")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    if a.n < 1 or a.n > 4096 or a.n & (a.n - 1):
        raise SystemExit("error: --n must be a power of two from 1 to 4096")
    rng = np.random.default_rng(a.seed)
    x = rng.uniform(-1, 1, a.n) + 1j * rng.uniform(-1, 1, a.n)
    want = np.fft.fft(x)
    ok = check("python_dft", dft(list(x)), want, 1e-9, 1e-9 * a.n)
    ok &= check("python_recursive_fft", fft(list(x)), want, 1e-9, 1e-9 * a.n)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
