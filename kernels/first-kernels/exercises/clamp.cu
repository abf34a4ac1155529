// Exercise 1 (docs/first-kernels/exercises.md): clamp every element of x into [lo, hi].
// The checker launches your kernel with only 8 blocks of 128 threads, for up to 2^30 elements.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise clamp
//
// course: compile-only
#include "clamp_check.cuh"

__global__ void clamp_kernel(const float* x, float* y, size_t n, float lo, float hi) {
  // TODO: write y[i] = fminf(fmaxf(x[i], lo), hi) for EVERY i < n.
  // Hint: about 3 lines. 1024 threads cannot cover n elements one each: each thread must loop.
}
