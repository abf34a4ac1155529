// Exercise (docs/memory-model/exercises.md): the maximum of every row of a rows x cols matrix, one
// warp per row, its 32 partial maxima combined with warp shuffles.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise row_max
//
// course: compile-only
#include "row_max_check.cuh"

// --8<-- [start:stub]
__global__ void row_max(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  // TODO (about 5 lines):
  //  0. row r starts at x + (long long)r * cols;
  //  1. each lane takes the max over columns lane, lane + 32, lane + 64, ... (start from -INFINITY);
  //  2. combine the 32 lane maxima: five steps of m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset))
  //     with offset = 16, 8, 4, 2, 1;
  //  3. one lane writes out[r].
  (void)x;
  (void)out;
  (void)lane;
  (void)cols;
}
// --8<-- [end:stub]
