// Solution to the row-maximum exercise (docs/memory-model/exercises.md).
// Check it: python -m course.exercise row_max --solution
//
// course: gpu
// course: run --rows 1009 --cols 997 --seed 41
// course: run --rows 4099 --cols 33 --seed 42
#include "../row_max_check.cuh"

// --8<-- [start:solution]
__global__ void row_max(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const float* row = x + static_cast<long long>(r) * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, row[c]);  // coalesced: a warp reads 128 bytes
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (lane == 0) out[r] = m;
}
// --8<-- [end:solution]
