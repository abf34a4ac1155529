// Solution to the transpose exercise (docs/memory-model/exercises.md).
// Check it: python -m course.exercise transpose --solution
//
// course: gpu
// course: run --seed 61
// course: bench --bench --seed 62
#include "../transpose_check.cuh"

// --8<-- [start:solution]
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];  // + 1: column reads hit 32 different banks
  const int x = threadIdx.x, r0 = blockIdx.y * kTransposeTile, c0 = blockIdx.x * kTransposeTile;
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows)
    if (r0 + j < rows && c0 + x < cols) tile[j][x] = in[static_cast<long long>(r0 + j) * cols + c0 + x];
  __syncthreads();
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows)
    if (c0 + j < cols && r0 + x < rows) out[static_cast<long long>(c0 + j) * rows + r0 + x] = tile[x][j];
}
// --8<-- [end:solution]
