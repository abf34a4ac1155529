// Exercise 2 (docs/first-kernels/exercises.md): count the elements of x greater than t.
// Thousands of threads add to the same counter at once.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise count_above
//
// course: compile-only
#include "count_above_check.cuh"

__global__ void count_above(const float* x, size_t n, float t, unsigned long long* count) {
  // TODO: one thread per element (the checker launches ceil(n / 256) blocks of 256 threads).
  // If this thread's element exists and is greater than t, add 1 to *count, safely.
  // Hint: 2 lines. `(*count)++` compiles, runs, and loses counts.
}
