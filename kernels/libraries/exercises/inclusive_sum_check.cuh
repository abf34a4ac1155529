// inclusive_sum_check.cuh: the checker for the CUB exercise of docs/libraries/exercises.md. It calls
// YOUR inclusive_sum on random non-negative integers (so that the poison, -1 in every element, can
// never be a right answer), on sizes 1 and ones that are not powers of two, with the output between
// guard bytes, and compares with the CPU's running sum. It runs your function twice on the same
// buffers: a second call must not depend on the first. With --bench (which `python -m course.exercise`
// passes) it caps your function's time at twice CUB's (the same two calls, scratch allocation
// included) on 2^26 integers, where a scan on the host or a hand-written scan that is not CUB's single
// pass takes many times as long. It does not check
// which library does the scan: a scan as fast as CUB's passes.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

#include <cub/device/device_scan.cuh>

constexpr double kMaxTimeOverCub = 2.0;  // the time cap
constexpr int kTimedSize = 1 << 26;      // values below 8: the sums stay below 2^29

// You write this function: d_out[i] = d_in[0] + ... + d_in[i] for every i < n, with CUB.
void inclusive_sum(const int* d_in, int* d_out, int n);

static bool check_inclusive_sum(int n, uint64_t seed) {
  namespace ex = course::exercise;
  std::vector<int> in(n), want(n);
  std::mt19937_64 rng(seed);
  for (auto& v : in) v = static_cast<int>(rng() % 1000);
  long long running = 0;
  for (int i = 0; i < n; ++i) want[i] = static_cast<int>(running += in[i]);
  int* d_in = course::to_device(in);
  const ex::Guarded<int> out(n);
  bool ok = true;
  for (int call = 1; call <= 2; ++call) {
    out.poison();  // every int -1: never a sum of non-negative numbers
    inclusive_sum(d_in, out.get(), n);
    CUDA_CHECK(cudaDeviceSynchronize());
    char name[64];
    std::snprintf(name, sizeof(name), "inclusive_sum_n%d_call%d", n, call);
    ok = ex::compare(name, out.read().data(), want.data(), static_cast<size_t>(n), 0.0, 0.0) && ok;
    ok = out.guards_intact(name) && ok;
  }
  CUDA_CHECK(cudaFree(d_in));
  return ok;
}

static bool check_inclusive_sum_time(uint64_t seed) {
  std::vector<int> in(kTimedSize);
  std::mt19937_64 rng(seed);
  for (auto& v : in) v = static_cast<int>(rng() % 8);
  int* d_in = course::to_device(in);
  int* d_out = course::device_alloc<int>(kTimedSize);
  auto cub_scan = [&] {
    void* d_temp = nullptr;
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_in, d_out, kTimedSize));
    CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
    CUDA_CHECK(cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_in, d_out, kTimedSize));
    CUDA_CHECK(cudaFree(d_temp));
  };
  char bench_case[64];
  std::snprintf(bench_case, sizeof(bench_case), "exercise inclusive_sum %d int32", kTimedSize);
  const bool ok = course::exercise::time_cap("inclusive_sum_time", bench_case, "inclusive_sum (exercise)",
                                             [&] { inclusive_sum(d_in, d_out, kTimedSize); },
                                             "cub::DeviceScan::InclusiveSum (called directly)", cub_scan,
                                             2.0 * kTimedSize * sizeof(int), 0.0, kMaxTimeOverCub);
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
  if (options.bench) ok = check_inclusive_sum_time(options.seed + 3) && ok;  // the time cap
  return ok ? 0 : course::kExitFail;
}
