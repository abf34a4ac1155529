// A plausible wrong answer to the clamp exercise (docs/first-kernels/exercises.md), which its checker
// must reject: a grid-stride loop that runs to i <= n, writing one element past the end of y.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise clamp --file kernels/first-kernels/exercises/mistakes/clamp_past_the_end.cu
//
// course: compile-only
#include "../clamp_check.cuh"

// --8<-- [start:mistake]
__global__ void clamp_kernel(const float* x, float* y, size_t n, float lo, float hi) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i <= n; i += stride)
    y[i] = i < n ? fminf(fmaxf(x[i], lo), hi) : hi;
}
// --8<-- [end:mistake]
