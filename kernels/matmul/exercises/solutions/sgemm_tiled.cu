// Solution to the tiled SGEMM exercise (docs/fast-matmul-fft/exercises.md).
// Check it: python -m course.exercise sgemm_tiled --solution
//
// course: gpu
// course: libs cublas
// course: run --seed 91
// course: bench --bench --seed 92
#include "../sgemm_tiled_check.cuh"

// --8<-- [start:solution]
__global__ void sgemm_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C) {
  __shared__ float As[kGemmTile][kGemmTile], Bs[kGemmTile][kGemmTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kGemmTile + ty, col = blockIdx.x * kGemmTile + tx;
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kGemmTile) {
    // Zeros outside the matrices add nothing to the sum.
    As[ty][tx] = row < M && k0 + tx < K ? A[static_cast<long long>(row) * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = k0 + ty < K && col < N ? B[static_cast<long long>(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < kGemmTile; ++k) sum += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[static_cast<long long>(row) * N + col] = sum;
}
// --8<-- [end:solution]
