// A plausible wrong answer to the gemm_row_major exercise (docs/libraries/exercises.md), which its
// checker must reject: the transposes the exercise forbids: a GEMM with both transpose flags into a
// scratch buffer (C column-major), then cublasSgeam to transpose it into C. Right numbers, two cuBLAS
// calls, transpose flags, and C moved twice.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise gemm_row_major --file
//           kernels/libraries/exercises/mistakes/gemm_row_major_geam.cu
//
// course: compile-only
// course: libs cublas
#include "../gemm_row_major_check.cuh"

// --8<-- [start:mistake]
void gemm_row_major(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  const float one = 1.0f, zero = 0.0f;
  float* c_col_major = course::device_alloc<float>(static_cast<size_t>(M) * N);
  // A row-major is A^T column-major (K x M, ld K): op T gives A. Likewise B. C_cm (M x N, ld M) = A B.
  CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_T, M, N, K, &one, A, K, B, N, &zero, c_col_major, M));
  // C row-major (as N x M column-major, ld N) = transpose of C_cm.
  CUBLAS_CHECK(
      cublasSgeam(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, &one, c_col_major, M, &zero, c_col_major, N, C, N));
  CUDA_CHECK(cudaFree(c_col_major));
}
// --8<-- [end:mistake]
