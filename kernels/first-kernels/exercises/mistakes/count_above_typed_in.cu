// A plausible wrong answer to the count_above exercise (docs/first-kernels/exercises.md), which its
// checker must reject: the threshold typed in (0.25) instead of the t it is given.
// tests/test_exercises.py requires the checker to fail it.
// Check it:
//   python -m course.exercise count_above --file kernels/first-kernels/exercises/mistakes/count_above_typed_in.cu
//
// course: compile-only
#include "../count_above_check.cuh"

// --8<-- [start:mistake]
__global__ void count_above(const float* x, size_t n, float t, unsigned long long* count) {
  (void)t;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && x[i] > 0.25f) atomicAdd(count, 1ull);
}
// --8<-- [end:mistake]
