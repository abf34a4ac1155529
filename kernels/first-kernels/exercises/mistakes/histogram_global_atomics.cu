// A plausible wrong answer to the histogram exercise (docs/first-kernels/exercises.md), which its
// checker must reject: right counts, but every byte one atomic on global memory, no shared-memory
// bins: its speed bar (twice the naive kernel's speed on equal bytes) fails.
// tests/test_exercises.py requires the checker to fail it.
// Check it:
//   python -m course.exercise histogram --file kernels/first-kernels/exercises/mistakes/histogram_global_atomics.cu
//
// course: compile-only
#include "../histogram_check.cuh"

// --8<-- [start:mistake]
__global__ void histogram256(const unsigned char* data, size_t n, unsigned int* bins) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(&bins[data[i]], 1u);
}
// --8<-- [end:mistake]
