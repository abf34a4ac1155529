// Exercise (docs/libraries/exercises.md): a row-major matrix product with cuBLAS, which reads and
// writes column-major matrices, without copying or transposing anything.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise gemm_row_major
//
// course: compile-only
// course: libs cublas
#include "gemm_row_major_check.cuh"

// --8<-- [start:stub]
void gemm_row_major(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  const float alpha = 1.0f, beta = 0.0f;
  // TODO: one CUBLAS_CHECK(cublasSgemm(handle, ...)) call.
  //  A row-major M x N matrix, read column-major, is its N x M transpose. So compute
  //  C^T = B^T * A^T (N x M = (N x K) * (K x M)), which is what cuBLAS sees in your row-major arrays:
  //  no transpose flags; think about which matrix comes first and what each leading dimension is.
  (void)handle, (void)M, (void)N, (void)K, (void)A, (void)B, (void)C, (void)alpha, (void)beta;
}
// --8<-- [end:stub]
