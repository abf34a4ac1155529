// A plausible wrong answer to the inclusive_sum exercise (docs/libraries/exercises.md), which its
// checker must reject: the running sum computed on the host (copy in, one loop, copy out): right
// numbers, no CUB, and many times slower than CUB's scan.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise inclusive_sum --file kernels/libraries/exercises/mistakes/inclusive_sum_host.cu
//
// course: compile-only
#include "../inclusive_sum_check.cuh"

// --8<-- [start:mistake]
void inclusive_sum(const int* d_in, int* d_out, int n) {
  std::vector<int> v = course::to_host(d_in, static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) v[i] += v[i - 1];
  CUDA_CHECK(cudaMemcpy(d_out, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice));
}
// --8<-- [end:mistake]
