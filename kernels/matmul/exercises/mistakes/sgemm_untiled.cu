// A plausible wrong answer to the sgemm_tiled exercise (docs/fast-matmul-fft/exercises.md), which its
// checker must reject: the untiled kernel (v2 of sgemm.cu): right, and coalesced, but every operand is
// read from global memory for each multiply-add. It fails the bar of 1.2 times the untiled kernel's
// speed.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise sgemm_tiled --file kernels/matmul/exercises/mistakes/sgemm_untiled.cu
//
// course: compile-only
// course: libs cublas
#include "../sgemm_tiled_check.cuh"

// --8<-- [start:mistake]
__global__ void sgemm_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C) {
  const int row = blockIdx.y * kGemmTile + threadIdx.y, col = blockIdx.x * kGemmTile + threadIdx.x;
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + col];
  C[static_cast<long long>(row) * N + col] = sum;
}
// --8<-- [end:mistake]
