// A plausible wrong answer to the row_max exercise (docs/memory-model/exercises.md), which its checker
// must reject: each lane's maximum starts from 0 instead of -INFINITY, right only for rows with a
// positive element.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise row_max --file kernels/memory-model/exercises/mistakes/row_max_zero_start.cu
//
// course: compile-only
#include "../row_max_check.cuh"

// --8<-- [start:mistake]
__global__ void row_max(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const float* row = x + static_cast<long long>(r) * cols;
  float m = 0.0f;  // should be -INFINITY
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, row[c]);
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (lane == 0) out[r] = m;
}
// --8<-- [end:mistake]
