// Exercise (docs/first-kernels/exercises.md): a 256-bin histogram of bytes, counted per block in
// shared memory, then added to the global bins once per block.
// Check it (builds this file, runs the checker with its speed bar, says what is wrong):
//   python -m course.exercise histogram
//
// course: compile-only
#include "histogram_check.cuh"

// --8<-- [start:stub]
__global__ void histogram256(const unsigned char* data, size_t n, unsigned int* bins) {
  // TODO (about 9 lines):
  //  0. declare the block's bins: __shared__ unsigned int local[kBins];
  //  1. zero local[] (256 bins, blockDim.x threads), then __syncthreads();
  //  2. grid-stride loop over the data (the grid is a few blocks per SM, far fewer threads than bytes):
  //     atomicAdd(&local[data[i]], 1u), an atomic on shared memory;
  //  3. __syncthreads(), then each thread adds some of the 256 block counts to bins[] with atomicAdd
  //     (skip the zero ones).
  (void)data;
  (void)n;
  (void)bins;
}
// --8<-- [end:stub]
