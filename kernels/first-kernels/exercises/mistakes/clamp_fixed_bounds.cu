// A plausible wrong answer to the clamp exercise (docs/first-kernels/exercises.md), which its checker
// must reject: the bounds typed in as -1 and 1 instead of the lo and hi it is given (right only when
// the checker happens to pass those).
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise clamp --file kernels/first-kernels/exercises/mistakes/clamp_fixed_bounds.cu
//
// course: compile-only
#include "../clamp_check.cuh"

// --8<-- [start:mistake]
__global__ void clamp_kernel(const float* x, float* y, size_t n, float lo, float hi) {
  (void)lo, (void)hi;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = fminf(fmaxf(x[i], -1.0f), 1.0f);
}
// --8<-- [end:mistake]
