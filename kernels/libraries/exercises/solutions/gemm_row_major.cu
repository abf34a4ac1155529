// Solution to the cuBLAS exercise (docs/libraries/exercises.md).
// Check it: python -m course.exercise gemm_row_major --solution
//
// course: gpu
// course: libs cublas
// course: run --seed 71
// course: bench --bench --seed 72
#include "../gemm_row_major_check.cuh"

// --8<-- [start:solution]
void gemm_row_major(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  const float alpha = 1.0f, beta = 0.0f;
  // Column-major view: C^T (N x M, leading dimension N) = B^T (N x K, ld N) * A^T (K x M, ld K).
  CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N));
}
// --8<-- [end:solution]
