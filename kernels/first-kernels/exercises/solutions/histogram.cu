// Solution to the histogram exercise (docs/first-kernels/exercises.md).
// Check it: python -m course.exercise histogram --solution
//
// course: gpu
// course: run --n 1000003 --seed 51
// course: bench --bench --seed 52
#include "../histogram_check.cuh"

// --8<-- [start:solution]
__global__ void histogram256(const unsigned char* data, size_t n, unsigned int* bins) {
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(&local[data[i]], 1u);  // contention stays inside the block, in shared memory
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);  // at most 256 global atomics per block
}
// --8<-- [end:solution]
