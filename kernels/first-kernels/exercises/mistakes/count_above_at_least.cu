// A plausible wrong answer to the count_above exercise (docs/first-kernels/exercises.md), which its
// checker must reject: x[i] >= t counts the elements equal to the threshold, which are not above it.
// tests/test_exercises.py requires the checker to fail it.
// Check it:
//   python -m course.exercise count_above --file kernels/first-kernels/exercises/mistakes/count_above_at_least.cu
//
// course: compile-only
#include "../count_above_check.cuh"

// --8<-- [start:mistake]
__global__ void count_above(const float* x, size_t n, float t, unsigned long long* count) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && x[i] >= t) atomicAdd(count, 1ull);
}
// --8<-- [end:mistake]
