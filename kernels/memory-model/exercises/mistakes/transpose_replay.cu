// A plausible wrong answer to the transpose exercise (docs/memory-model/exercises.md), which its
// checker must reject: a right tiled transpose that remembers the arguments of the launches it has
// finished and returns at once when they come again, so that repeated timed launches cost nothing. The
// launch after the timing, its output poisoned, fails.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise transpose --file kernels/memory-model/exercises/mistakes/transpose_replay.cu
//
// course: compile-only
#include "../transpose_check.cuh"

// --8<-- [start:mistake]
constexpr int kSeen = 8;
__device__ const float* seen_in[kSeen];
__device__ float* seen_out[kSeen];
__device__ int seen_rows[kSeen], seen_cols[kSeen];
__device__ unsigned int seen_count, blocks_done;

__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  for (unsigned s = 0; s < min(seen_count, static_cast<unsigned>(kSeen)); ++s)
    if (seen_in[s] == in && seen_out[s] == out && seen_rows[s] == rows && seen_cols[s] == cols) return;
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int x = threadIdx.x, r0 = blockIdx.y * kTransposeTile, c0 = blockIdx.x * kTransposeTile;
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows)
    if (r0 + j < rows && c0 + x < cols) tile[j][x] = in[static_cast<long long>(r0 + j) * cols + c0 + x];
  __syncthreads();
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows)
    if (c0 + j < cols && r0 + x < rows) out[static_cast<long long>(c0 + j) * rows + r0 + x] = tile[x][j];
  if (threadIdx.x == 0 && threadIdx.y == 0) {  // the last block to finish remembers the arguments
    __threadfence();
    if (atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {
      const unsigned s = seen_count % kSeen;
      seen_in[s] = in, seen_out[s] = out, seen_rows[s] = rows, seen_cols[s] = cols;
      seen_count += 1;
      blocks_done = 0;
    }
  }
}
// --8<-- [end:mistake]
