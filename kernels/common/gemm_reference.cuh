// gemm_reference.cuh: the CPU reference every GEMM program checks against.
// Taught in docs/first-kernels/matmul-naive.md; used by the matmul, libraries and MNIST programs.
//
//   gemm_reference(M, N, K, A, B, C, b_layout, C_abs)
//                                                 C[i][j] = sum_k A[i][k] * B(k, j), row-major, in
//                                                 float64 from the inputs as stored (float, half or
//                                                 bf16), so the reference sees exactly the values the
//                                                 GPU multiplies, never a higher-precision copy; and, if
//                                                 C_abs is given, sum_k |A[i][k]| |B(k, j)| beside it,
//                                                 the scale of each element's rounding errors.
//   to_double(x)                                  float, __half and __nv_bfloat16 to double
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace course {

inline double to_double(float x) { return x; }
inline double to_double(double x) { return x; }
inline double to_double(__half x) { return __half2float(x); }
inline double to_double(__nv_bfloat16 x) { return __bfloat162float(x); }

// How B is stored: K x N row-major (the textbook C = A B), or N x K row-major (C = A B^T, the
// layout of a linear layer's weights and of cuBLAS's "TN" GEMMs).
enum class BLayout { kKxN, kNxK };

// --8<-- [start:reference]
// O(M N K) in float64: the slow, obviously right version that the fast ones are compared with.
// The i-k-j loop order streams rows of B (for kKxN) so that a CPU check of a few hundred cubed
// takes milliseconds, not seconds.
template <typename TA, typename TB>
void gemm_reference(int M, int N, int K, const TA* A, const TB* B, double* C, BLayout b_layout = BLayout::kKxN,
                    double* C_abs = nullptr) {
  std::vector<double> row(static_cast<size_t>(N)), row_abs(static_cast<size_t>(N));
  for (int i = 0; i < M; ++i) {
    const TA* a = A + static_cast<size_t>(i) * K;
    if (b_layout == BLayout::kKxN) {
      std::fill(row.begin(), row.end(), 0.0);
      std::fill(row_abs.begin(), row_abs.end(), 0.0);
      for (int k = 0; k < K; ++k) {
        const double aik = to_double(a[k]);
        const TB* b = B + static_cast<size_t>(k) * N;
        for (int j = 0; j < N; ++j) row[j] += aik * to_double(b[j]);
        if (C_abs)
          for (int j = 0; j < N; ++j) row_abs[j] += std::fabs(aik * to_double(b[j]));
      }
    } else {
      for (int j = 0; j < N; ++j) {
        const TB* b = B + static_cast<size_t>(j) * K;
        double acc = 0.0, acc_abs = 0.0;
        for (int k = 0; k < K; ++k) {
          const double p = to_double(a[k]) * to_double(b[k]);
          acc += p;
          acc_abs += std::fabs(p);
        }
        row[j] = acc;
        row_abs[j] = acc_abs;
      }
    }
    std::copy(row.begin(), row.end(), C + static_cast<size_t>(i) * N);
    if (C_abs) std::copy(row_abs.begin(), row_abs.end(), C_abs + static_cast<size_t>(i) * N);
  }
}
// --8<-- [end:reference]

// --plant zeros-small zeroes the outputs of A's quiet rows, which start at the second row: with fewer
// than two rows there is nothing to plant. False, after a clear error, when m is too small.
inline bool plant_fits_rows(bool plant, int m) {
  if (plant && m < 2) {
    std::fprintf(stderr,
                 "error: --plant zeros-small needs --m 2 or more (the quiet rows of A start at the second)\n");
    return false;
  }
  return true;
}

}  // namespace course
