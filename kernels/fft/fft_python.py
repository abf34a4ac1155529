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
import cmath
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402


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


def as_real(z):
    """Complex values as (real, imaginary) pairs: the shared check compares real numbers."""
    z = np.asarray(z, dtype=np.complex128)
    return np.stack([z.real, z.imag], axis=-1)


def main():
    ap = course_tools.parser("the DFT by its definition and the recursive FFT, checked against numpy.fft")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    if a.n < 1 or a.n > 4096 or a.n & (a.n - 1):
        ap.error("--n must be a power of two from 1 to 4096")
    rng = np.random.default_rng(a.seed)
    x = rng.uniform(-1, 1, a.n) + 1j * rng.uniform(-1, 1, a.n)
    want = np.fft.fft(x)
    ok = course_tools.check_close("python_dft", as_real(dft(list(x))), as_real(want), 1e-9, 1e-9 * a.n)
    ok &= course_tools.check_close("python_recursive_fft", as_real(fft(list(x))), as_real(want), 1e-9, 1e-9 * a.n)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
