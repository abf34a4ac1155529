// histogram_check.cuh: the checker for the histogram exercise of docs/first-kernels/exercises.md. It
// launches YOUR histogram256 kernel on a fixed grid (4 blocks of 256 threads per SM) over random bytes,
// over bytes that are all equal (every thread hits the same bin), and over sizes that are not
// multiples of the block, and compares the 256 counts with the CPU's. With --bench it also times the
// kernel against a copy of the same bytes and requires a share of the copy's speed: a kernel whose
// every byte is a global atomic fails that bar by far.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

constexpr int kBins = 256, kHistThreads = 256;
constexpr double kMinShareOfCopy = 0.05;  // the speed bar: 5% of a copy of the same bytes

// You write this kernel: bins[v] += the number of i < n with data[i] == v. The checker zeroes bins.
__global__ void histogram256(const unsigned char* data, size_t n, unsigned int* bins);

static unsigned histogram_blocks() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>(4 * sms);
}

static bool check_histogram(size_t n, uint64_t seed, bool all_equal, bool bench) {
  std::vector<unsigned char> data(n);
  std::mt19937_64 rng(seed);
  const unsigned char same = static_cast<unsigned char>(rng());
  for (auto& v : data) v = all_equal ? same : static_cast<unsigned char>(rng());
  std::vector<unsigned> want(kBins, 0), got(kBins);
  for (unsigned char v : data) ++want[v];
  unsigned char* d_data = nullptr;
  unsigned* d_bins = nullptr;
  CUDA_CHECK(cudaMalloc(&d_data, n));
  CUDA_CHECK(cudaMalloc(&d_bins, kBins * sizeof(unsigned)));
  CUDA_CHECK(cudaMemcpy(d_data, data.data(), n, cudaMemcpyHostToDevice));
  const unsigned blocks = histogram_blocks();
  auto run = [&] { histogram256<<<blocks, kHistThreads>>>(d_data, n, d_bins); };
  CUDA_CHECK(cudaMemset(d_bins, 0, kBins * sizeof(unsigned)));
  run();
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(got.data(), d_bins, kBins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  char name[80];
  std::snprintf(name, sizeof(name), "histogram_n%zu%s", n, all_equal ? "_all_equal" : "");
  bool ok = course::exercise::compare(name, got.data(), want.data(), kBins, 0.0, 0.0);
  if (ok && bench) {
    unsigned char* d_copy = nullptr;
    CUDA_CHECK(cudaMalloc(&d_copy, n));
    const double copy_ms = course::time_kernel_ms([&] { CUDA_CHECK(cudaMemcpyAsync(d_copy, d_data, n, cudaMemcpyDeviceToDevice)); });
    const double your_ms = course::time_kernel_ms(run);  // the bins overflow; no longer checked
    char bench_case[80];
    std::snprintf(bench_case, sizeof(bench_case), "exercise histogram %zu bytes%s", n, all_equal ? ", all equal" : "");
    std::snprintf(name, sizeof(name), "histogram_speed%s", all_equal ? "_all_equal" : "");
    ok = course::exercise::speed_bar(name, bench_case, "histogram256 (exercise)", your_ms,
                                     "cudaMemcpy (copy of the input)", copy_ms, static_cast<double>(n), 0.0,
                                     kMinShareOfCopy);
    CUDA_CHECK(cudaFree(d_copy));
  }
  CUDA_CHECK(cudaFree(d_data));
  CUDA_CHECK(cudaFree(d_bins));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_histogram(n, options.seed, false, false);
  ok = check_histogram(1, options.seed + 1, false, false) && ok;
  ok = check_histogram(4099, options.seed + 2, true, false) && ok;
  if (options.bench) {  // the speed bar, on 256 MiB: random bytes, then all equal
    ok = check_histogram(size_t{1} << 28, options.seed + 3, false, true) && ok;
    ok = check_histogram(size_t{1} << 28, options.seed + 4, true, true) && ok;
  }
  return ok ? 0 : course::kExitFail;
}
