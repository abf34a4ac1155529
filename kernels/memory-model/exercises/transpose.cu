// Exercise (docs/memory-model/exercises.md): make this transpose run at copy speed. As shipped it is
// right but slow: each warp writes 32 floats into 32 different rows. Stage a 32 x 32 tile in shared
// memory so that reads and writes are both coalesced, without bank conflicts.
// Check it (builds this file, checks it, then times it against a copy of the same bytes):
//   python -m course.exercise transpose
//
// course: compile-only
#include "transpose_check.cuh"

// --8<-- [start:stub]
// Block: 32 x 8 threads; block (bx, by) owns the tile of rows by*32.. and columns bx*32.. of `in`.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  // TODO: replace this loop by two phases around a __syncthreads():
  //  1. read the tile row by row into __shared__ float tile[32][32 + 1] (why + 1? bank conflicts);
  //  2. write it out: thread x of output row (c0 + j) writes out[(c0 + j) * rows + r0 + x] = tile[x][j].
  //  Keep the bounds checks: rows and cols need not be multiples of 32.
  const int c = blockIdx.x * kTransposeTile + threadIdx.x;
  for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeBlockRows) {
    const int r = blockIdx.y * kTransposeTile + j;
    if (r < rows && c < cols) out[static_cast<long long>(c) * rows + r] = in[static_cast<long long>(r) * cols + c];
  }
}
// --8<-- [end:stub]
