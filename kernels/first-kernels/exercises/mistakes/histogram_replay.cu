// A plausible wrong answer to the histogram exercise (docs/first-kernels/exercises.md), which its
// checker must reject: a right histogram that remembers the arguments of the launches it has finished
// and returns at once when they come again, so that repeated timed launches cost nothing. The launch
// after the timing, its bins zeroed, fails.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise histogram --file kernels/first-kernels/exercises/mistakes/histogram_replay.cu
//
// course: compile-only
#include "../histogram_check.cuh"

// --8<-- [start:mistake]
constexpr int kSeen = 8;
__device__ const unsigned char* seen_data[kSeen];
__device__ unsigned int* seen_bins[kSeen];
__device__ size_t seen_n[kSeen];
__device__ unsigned int seen_count, blocks_done;

__global__ void histogram256(const unsigned char* data, size_t n, unsigned int* bins) {
  for (unsigned s = 0; s < min(seen_count, static_cast<unsigned>(kSeen)); ++s)
    if (seen_data[s] == data && seen_bins[s] == bins && seen_n[s] == n) return;  // seen: skip the work
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  if (threadIdx.x == 0) {  // the last block to finish remembers the arguments
    __threadfence();
    if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
      const unsigned s = seen_count % kSeen;
      seen_data[s] = data, seen_bins[s] = bins, seen_n[s] = n;
      seen_count += 1;
      blocks_done = 0;
    }
  }
}
// --8<-- [end:mistake]
