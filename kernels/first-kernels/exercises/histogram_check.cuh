// histogram_check.cuh: the checker for the histogram exercise of docs/first-kernels/exercises.md. It
// launches YOUR histogram256 kernel on a fixed grid (4 blocks of 256 threads per SM) over random bytes,
// over bytes that are all equal (every thread hits the same bin), and over sizes 0, 1 and ones that are
// not multiples of the block, and compares the 256 counts with the CPU's; the bins sit between guard
// bytes. The speed bar (which `python -m course.exercise histogram` runs) times the kernel on 256 MiB
// against a copy of the same bytes (it must reach 5% of the copy's speed) and, on equal bytes, against
// the naive kernel whose every byte is a global atomic (it must be twice as fast). The timed launches
// rotate through three copies of the buffers, and one more launch on buffers already timed, its bins
// zeroed again, is checked: a kernel that skips repeated launches fails.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

constexpr int kBins = 256, kHistThreads = 256;
constexpr double kMinShareOfCopy = 0.05;   // the speed bar: 5% of a copy of the same bytes
constexpr double kMinSpeedupOverNaive = 2; // and twice the speed of global atomics on equal bytes
constexpr int kTimedSets = 3;              // buffer copies the timed launches rotate through

// You write this kernel: bins[v] += the number of i < n with data[i] == v. The checker zeroes bins.
__global__ void histogram256(const unsigned char* data, size_t n, unsigned int* bins);

// The naive kernel the speed bar compares with: every byte one atomic on global memory.
__global__ void histogram256_global_atomics(const unsigned char* data, size_t n, unsigned int* bins) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(&bins[data[i]], 1u);
}

static unsigned histogram_blocks() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>(4 * sms);
}

static bool check_histogram(size_t n, uint64_t seed, bool all_equal, bool bench) {
  namespace ex = course::exercise;
  std::vector<unsigned char> data(n);
  std::mt19937_64 rng(seed);
  const unsigned char same = static_cast<unsigned char>(rng());
  for (auto& v : data) v = all_equal ? same : static_cast<unsigned char>(rng());
  std::vector<unsigned> want(kBins, 0);
  for (unsigned char v : data) ++want[v];
  const int sets = bench ? kTimedSets : 1;
  std::vector<unsigned char*> d_data(sets);
  std::vector<std::unique_ptr<ex::Guarded<unsigned>>> bins(sets);
  for (int s = 0; s < sets; ++s) {
    d_data[s] = course::device_alloc<unsigned char>(std::max<size_t>(n, 1));
    if (n > 0) CUDA_CHECK(cudaMemcpy(d_data[s], data.data(), n, cudaMemcpyHostToDevice));
    bins[s] = std::make_unique<ex::Guarded<unsigned>>(kBins);
    bins[s]->zero();
  }
  const unsigned blocks = histogram_blocks();
  auto run = [&](int s) { histogram256<<<blocks, kHistThreads>>>(d_data[s], n, bins[s]->get()); };
  run(0);
  CUDA_CHECK_LAUNCH();
  char name[80];
  std::snprintf(name, sizeof(name), "histogram_n%zu%s", n, all_equal ? "_all_equal" : "");
  auto compare_set0 = [&](const char* check_name) {
    const bool right = ex::compare(check_name, bins[0]->read().data(), want.data(), kBins, 0.0, 0.0);
    return bins[0]->guards_intact(check_name) && right;
  };
  bool ok = compare_set0(name);
  if (ok && bench) {
    unsigned char* d_copy = course::device_alloc<unsigned char>(n);
    const double copy_ms = course::time_kernel_ms(
        [&] { CUDA_CHECK(cudaMemcpyAsync(d_copy, d_data[0], n, cudaMemcpyDeviceToDevice)); });
    const double your_ms = ex::time_rotating_ms(run, sets);  // the bins overflow here; rechecked below
    char bench_case[80];
    std::snprintf(bench_case, sizeof(bench_case), "exercise histogram %zu bytes%s", n,
                  all_equal ? ", all equal" : "");
    std::snprintf(name, sizeof(name), "histogram_speed%s", all_equal ? "_all_equal" : "");
    ok = ex::speed_bar(name, bench_case, "histogram256 (exercise)", your_ms, "cudaMemcpy (copy of the input)",
                       copy_ms, static_cast<double>(n), 0.0, kMinShareOfCopy);
    if (all_equal) {  // the naive kernel's worst case: every atomic on one address
      const double naive_ms = course::time_kernel_ms(
          [&] { histogram256_global_atomics<<<blocks, kHistThreads>>>(d_data[1], n, bins[1]->get()); }, 1, 3);
      ok = ex::margin_bar("histogram_speed_over_global_atomics", bench_case, "histogram256 (exercise)", your_ms,
                          "histogram256_global_atomics (naive)", naive_ms, static_cast<double>(n), 0.0,
                          kMinSpeedupOverNaive) && ok;
    }
    std::snprintf(name, sizeof(name), "histogram_n%zu%s", n, all_equal ? "_all_equal" : "");
    ok = ex::recheck(name, [&] { bins[0]->zero(); }, run, compare_set0) && ok;
    CUDA_CHECK(cudaFree(d_copy));
  }
  for (unsigned char* p : d_data) CUDA_CHECK(cudaFree(p));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_histogram(n, options.seed, false, false);
  ok = check_histogram(0, options.seed + 1, false, false) && ok;
  ok = check_histogram(1, options.seed + 2, false, false) && ok;
  ok = check_histogram(4099, options.seed + 3, true, false) && ok;
  if (options.bench) {  // the speed bar, on 256 MiB: random bytes, then all equal
    ok = check_histogram(size_t{1} << 28, options.seed + 4, false, true) && ok;
    ok = check_histogram(size_t{1} << 28, options.seed + 5, true, true) && ok;
  }
  return ok ? 0 : course::kExitFail;
}
