// Solution to exercise 1 (docs/first-kernels/exercises.md): a grid-stride loop.
// Check it: python -m course.exercise clamp --solution
//
// course: gpu
// course: run --n 1000003 --seed 21
// course: run --n 1 --seed 22
// course: run --n 7919 --seed 23
#include "../clamp_check.cuh"

// --8<-- [start:solution]
__global__ void clamp_kernel(const float* x, float* y, size_t n, float lo, float hi) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = fminf(fmaxf(x[i], lo), hi);
  }
}
// --8<-- [end:solution]
