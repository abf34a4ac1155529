// inclusive_sum_check.cuh: the checker for the CUB exercise of docs/libraries/exercises.md. It calls
// YOUR inclusive_sum on random non-negative integers (so that the poison, -1 in every element, can
// never be a right answer), on sizes that are not powers of two, and compares with the CPU's running
// sum. It runs your function twice on the same buffers: a second call must not depend on the first.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

#include <cub/device/device_scan.cuh>

// You write this function: d_out[i] = d_in[0] + ... + d_in[i] for every i < n, with CUB.
void inclusive_sum(const int* d_in, int* d_out, int n);

static bool check_inclusive_sum(int n, uint64_t seed) {
  std::vector<int> in(n), got(n), want(n);
  std::mt19937_64 rng(seed);
  for (auto& v : in) v = static_cast<int>(rng() % 1000);
  long long running = 0;
  for (int i = 0; i < n; ++i) want[i] = static_cast<int>(running += in[i]);
  int *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  bool ok = true;
  for (int call = 1; call <= 2; ++call) {
    course::poison(d_out, n * sizeof(int));  // every int -1: never a sum of non-negative numbers
    inclusive_sum(d_in, d_out, n);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
    char name[64];
    std::snprintf(name, sizeof(name), "inclusive_sum_n%d_call%d", n, call);
    ok = course::exercise::compare(name, got.data(), want.data(), static_cast<size_t>(n), 0.0, 0.0) && ok;
  }
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int n = static_cast<int>(args.get_int("--n", 1000003, 1, 1 << 21));  // sums stay below 2^31
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_inclusive_sum(n, options.seed);
  ok = check_inclusive_sum(1, options.seed + 1) && ok;
  ok = check_inclusive_sum(4099, options.seed + 2) && ok;
  return ok ? 0 : course::kExitFail;
}
