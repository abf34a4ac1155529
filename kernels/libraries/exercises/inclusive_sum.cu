// Exercise (docs/libraries/exercises.md): a prefix sum with cub::DeviceScan::InclusiveSum, and CUB's
// two-call pattern for temporary storage.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise inclusive_sum
//
// course: compile-only
#include "inclusive_sum_check.cuh"

// --8<-- [start:stub]
void inclusive_sum(const int* d_in, int* d_out, int n) {
  // TODO (6 lines):
  //  0. void* d_temp = nullptr; size_t temp_bytes = 0;
  //  1. call cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_in, d_out, n) with d_temp == nullptr:
  //     it only writes the scratch size it needs into temp_bytes;
  //  2. cudaMalloc that many bytes into d_temp;
  //  3. call it again: now it scans;
  //  4. cudaFree(d_temp). Wrap every call in CUDA_CHECK (CUB returns a cudaError_t).
  (void)d_in, (void)d_out, (void)n;
}
// --8<-- [end:stub]
