// Exercise (docs/fast-matmul-fft/exercises.md): a tiled SGEMM. Each block computes a 32 x 32 tile of
// C; its threads stage 32 x 32 tiles of A and B in shared memory, so that every element they load
// from global memory is used 32 times.
// Check it (builds this file, checks it, then times it against cuBLAS in the same run):
//   python -m course.exercise sgemm_tiled
//
// course: compile-only
// course: libs cublas
#include "sgemm_tiled_check.cuh"

// --8<-- [start:stub]
// Block: 32 x 32 threads; thread (tx, ty) of block (bx, by) computes C[by*32 + ty][bx*32 + tx].
__global__ void sgemm_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C) {
  // TODO: declare the tiles: __shared__ float As[kGemmTile][kGemmTile], Bs[kGemmTile][kGemmTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kGemmTile + ty, col = blockIdx.x * kGemmTile + tx;
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kGemmTile) {
    // TODO (about 6 lines):
    //  1. As[ty][tx] = A[row][k0 + tx] and Bs[ty][tx] = B[k0 + ty][col], or 0 outside the matrices
    //     (M, N and K need not be multiples of 32);
    //  2. __syncthreads(): the whole tile is loaded before anyone reads it;
    //  3. sum += As[ty][k] * Bs[k][tx] for k = 0..31;
    //  4. __syncthreads(): nobody overwrites the tile while others still read it.
  }
  (void)A, (void)B, (void)tx, (void)ty;
  if (row < M && col < N) C[static_cast<long long>(row) * N + col] = sum;
}
// --8<-- [end:stub]
