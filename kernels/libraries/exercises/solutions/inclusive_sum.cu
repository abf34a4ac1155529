// Solution to the CUB exercise (docs/libraries/exercises.md).
// Check it: python -m course.exercise inclusive_sum --solution
//
// course: gpu
// course: run --n 1000003 --seed 81
// course: bench --bench --seed 82
#include "../inclusive_sum_check.cuh"

// --8<-- [start:solution]
void inclusive_sum(const int* d_in, int* d_out, int n) {
  void* d_temp = nullptr;
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_in, d_out, n));  // size query only
  CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_in, d_out, n));  // the scan
  CUDA_CHECK(cudaFree(d_temp));
}
// --8<-- [end:solution]
