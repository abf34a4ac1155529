// Solution to exercise 2 (docs/first-kernels/exercises.md): a bounds check and one atomicAdd.
// Check it: python -m course.exercise count_above --solution
//
// course: gpu
// course: run --n 1000003 --seed 31
// course: run --n 1 --seed 32
// course: run --n 7919 --seed 33
#include "../count_above_check.cuh"

// --8<-- [start:solution]
__global__ void count_above(const float* x, size_t n, float t, unsigned long long* count) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && x[i] > t) atomicAdd(count, 1ull);
}
// --8<-- [end:solution]
