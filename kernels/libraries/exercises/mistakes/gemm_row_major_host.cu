// A plausible wrong answer to the gemm_row_major exercise (docs/libraries/exercises.md), which its
// checker must reject: the product computed on the host (copy A and B back, three loops, copy C up):
// right numbers, no cuBLAS call, and far slower.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise gemm_row_major --file
//           kernels/libraries/exercises/mistakes/gemm_row_major_host.cu
//
// course: compile-only
// course: libs cublas
#include "../gemm_row_major_check.cuh"

// --8<-- [start:mistake]
void gemm_row_major(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  (void)handle;
  const size_t m = M, n = N, k_size = K;
  const std::vector<float> a = course::to_host(A, m * k_size), b = course::to_host(B, k_size * n);
  std::vector<float> c(m * n, 0.0f);
  for (size_t i = 0; i < m; ++i)
    for (size_t k = 0; k < k_size; ++k)
      for (size_t j = 0; j < n; ++j) c[i * n + j] += a[i * k_size + k] * b[k * n + j];
  CUDA_CHECK(cudaMemcpy(C, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));
}
// --8<-- [end:mistake]
