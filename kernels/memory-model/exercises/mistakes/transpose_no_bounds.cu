// A plausible wrong answer to the transpose exercise (docs/memory-model/exercises.md), which its
// checker must reject: a tiled transpose without the bounds checks, right only when rows and cols are
// multiples of 32: on other sizes it reads past the input and writes past the output.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise transpose --file kernels/memory-model/exercises/mistakes/transpose_no_bounds.cu
//
// course: compile-only
#include "../transpose_check.cuh"

// --8<-- [start:mistake]
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int x = threadIdx.x, r0 = blockIdx.y * kTransposeTile, c0 = blockIdx.x * kTransposeTile;
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows)
    tile[j][x] = in[static_cast<long long>(r0 + j) * cols + c0 + x];
  __syncthreads();
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows)
    out[static_cast<long long>(c0 + j) * rows + r0 + x] = tile[x][j];
}
// --8<-- [end:mistake]
