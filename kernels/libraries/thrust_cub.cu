// thrust_cub.cu: sort, scan and reduce with Thrust (STL-like algorithms on device vectors) and
// with CUB (the building blocks underneath, with explicit temporary storage), checked against the
// CPU and timed against memory bandwidth.
//
// Taught in docs/libraries/thrust-cub.md.
// Build: nvcc -O3 -arch=native -o build/libraries/thrust_cub kernels/libraries/thrust_cub.cu
// Run:   ./build/libraries/thrust_cub                 (checks every operation on odd sizes)
//        ./build/libraries/thrust_cub --bench         (times them on 64 Mi elements)
//
// course: gpu
// course: run --n 1000003
// course: run --n 1
// course: run --n 4099
// course: bench --bench
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>

#include <exception>
#include <numeric>
#include <random>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// --8<-- [start:thrust]
// Thrust: containers and algorithms like the C++ standard library's. device_vector owns device
// memory; the algorithms run on the GPU because their iterators point there. Each call allocates
// any scratch it needs and synchronises where it returns a value to the host (reduce).
static void thrust_ops(const std::vector<int>& keys, std::vector<int>& sorted, std::vector<int>& scanned,
                       long long& sum) {
  thrust::device_vector<int> d(keys.begin(), keys.end());
  sum = thrust::reduce(d.begin(), d.end(), 0LL, thrust::plus<long long>());
  thrust::device_vector<int> s(d.size());
  thrust::inclusive_scan(d.begin(), d.end(), s.begin());
  thrust::sort(d.begin(), d.end());
  thrust::copy(d.begin(), d.end(), sorted.begin());
  thrust::copy(s.begin(), s.end(), scanned.begin());
}
// --8<-- [end:thrust]

// --8<-- [start:cub]
// CUB: every device-wide algorithm is called twice. The first call, with a null temp pointer,
// only writes the scratch size it needs; the second does the work. You own the scratch, so you
// can allocate it once and reuse it, and nothing synchronises unless you ask.
// `algorithm(temp, bytes)` is one CUB call with its scratch arguments filled in.
template <typename Algorithm>
static void cub_two_phase(Algorithm algorithm, void*& temp, size_t& temp_bytes) {
  size_t need = 0;
  CUDA_CHECK(algorithm(nullptr, need));  // phase 1: only the size
  if (need > temp_bytes) {
    if (temp) CUDA_CHECK(cudaFree(temp));
    CUDA_CHECK(cudaMalloc(&temp, need));
    temp_bytes = need;
  }
  CUDA_CHECK(algorithm(temp, temp_bytes));  // phase 2: the work
}

static void cub_sort(const int* in, int* out, int n, void*& temp, size_t& temp_bytes) {
  cub_two_phase([&](void* t, size_t& b) { return cub::DeviceRadixSort::SortKeys(t, b, in, out, n); }, temp,
                temp_bytes);
}

static void cub_scan(const int* in, int* out, int n, void*& temp, size_t& temp_bytes) {
  cub_two_phase([&](void* t, size_t& b) { return cub::DeviceScan::InclusiveSum(t, b, in, out, n); }, temp,
                temp_bytes);
}

struct Widen {
  __host__ __device__ long long operator()(int v) const { return v; }
};

static void cub_sum(const int* in, long long* out, int n, void*& temp, size_t& temp_bytes) {
  // Sum ints into a 64-bit total: a transform iterator widens each element as it is read.
  auto wide = thrust::make_transform_iterator(in, Widen{});
  cub_two_phase([&](void* t, size_t& b) { return cub::DeviceReduce::Sum(t, b, wide, out, n); }, temp, temp_bytes);
}
// --8<-- [end:cub]

static bool check(int n, uint64_t seed) {
  std::vector<int> keys(n);
  std::mt19937_64 rng(seed);
  // Values in [-1000, 1000]: the inclusive scan of up to 2^21 of them fits in an int.
  for (auto& k : keys) k = (int)(rng() % 2001) - 1000;
  std::vector<int> want_sorted(keys), want_scan(n);
  std::sort(want_sorted.begin(), want_sorted.end());
  std::partial_sum(keys.begin(), keys.end(), want_scan.begin());
  const long long want_sum = std::accumulate(keys.begin(), keys.end(), 0LL);

  bool ok = true;
  std::vector<int> sorted(n), scanned(n);
  long long sum = 0;
  thrust_ops(keys, sorted, scanned, sum);
  ok &= course::check_close("thrust_sort", sorted.data(), want_sorted.data(), n, 0.0, 0.0);
  ok &= course::check_close("thrust_inclusive_scan", scanned.data(), want_scan.data(), n, 0.0, 0.0);
  ok &= course::check_true("thrust_reduce", sum == want_sum, 1);

  int *in, *out;
  long long* dsum;
  CUDA_CHECK(cudaMalloc(&in, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&out, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&dsum, sizeof(long long)));
  CUDA_CHECK(cudaMemcpy(in, keys.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  void* temp = nullptr;
  size_t temp_bytes = 0;
  course::poison(out, n * sizeof(int));
  cub_sort(in, out, n, temp, temp_bytes);
  CUDA_CHECK(cudaMemcpy(sorted.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
  ok &= course::check_close("cub_radix_sort", sorted.data(), want_sorted.data(), n, 0.0, 0.0);
  course::poison(out, n * sizeof(int));
  cub_scan(in, out, n, temp, temp_bytes);
  CUDA_CHECK(cudaMemcpy(scanned.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
  ok &= course::check_close("cub_inclusive_sum", scanned.data(), want_scan.data(), n, 0.0, 0.0);
  course::poison(dsum, sizeof(long long));
  cub_sum(in, dsum, n, temp, temp_bytes);
  CUDA_CHECK(cudaMemcpy(&sum, dsum, sizeof(long long), cudaMemcpyDeviceToHost));
  ok &= course::check_true("cub_reduce_sum", sum == want_sum, 1);
  for (void* p : {(void*)in, (void*)out, (void*)dsum, temp}) if (p) CUDA_CHECK(cudaFree(p));
  return ok;
}

struct Scramble {
  __host__ __device__ int operator()(int i) const { return (int)((unsigned)i * 2654435761u >> 1); }
};

// --8<-- [start:bench]
static void bench() {
  const int n = 1 << 26;  // 64 Mi ints, 256 MiB
  thrust::device_vector<int> keys(n), out(n), work(n);
  thrust::sequence(keys.begin(), keys.end(), 0);
  // Scramble the keys (a multiplicative hash) so that sorting has work to do.
  thrust::transform(keys.begin(), keys.end(), keys.begin(), Scramble{});
  int* in = thrust::raw_pointer_cast(keys.data());
  int* o = thrust::raw_pointer_cast(out.data());
  long long* dsum;
  CUDA_CHECK(cudaMalloc(&dsum, sizeof(long long)));
  void* temp = nullptr;
  size_t temp_bytes = 0;
  const double b = 4.0 * n;
  const float t_cub_sum = course::time_kernel_ms([&] { cub_sum(in, dsum, n, temp, temp_bytes); });
  const float t_thr_sum =
      course::time_kernel_ms([&] { (void)thrust::reduce(keys.begin(), keys.end(), 0LL, thrust::plus<long long>()); });
  const float t_cub_scan = course::time_kernel_ms([&] { cub_scan(in, o, n, temp, temp_bytes); });
  const float t_thr_scan =
      course::time_kernel_ms([&] { thrust::inclusive_scan(keys.begin(), keys.end(), out.begin()); });
  const float t_cub_sort = course::time_kernel_ms([&] { cub_sort(in, o, n, temp, temp_bytes); });
  // thrust::sort sorts in place, so each repeat copies the unsorted keys first (timed too: a
  // 512 MiB device copy, small next to the sort).
  const float t_thr_sort = course::time_kernel_ms([&] {
    thrust::copy(keys.begin(), keys.end(), work.begin());
    thrust::sort(work.begin(), work.end());
  });
  course::print_bench("reduce 64 Mi int -> int64", "CUB DeviceReduce::Sum", t_cub_sum, b, n, true);
  course::print_bench("reduce 64 Mi int -> int64", "thrust::reduce", t_thr_sum, b, n);
  course::print_bench("inclusive scan 64 Mi int", "CUB DeviceScan::InclusiveSum", t_cub_scan, 2 * b, n, true);
  course::print_bench("inclusive scan 64 Mi int", "thrust::inclusive_scan", t_thr_scan, 2 * b, n);
  course::print_bench("sort 64 Mi int keys", "CUB DeviceRadixSort::SortKeys", t_cub_sort, 2 * b, 0, true);
  course::print_bench("sort 64 Mi int keys", "copy + thrust::sort", t_thr_sort, 2 * b, 0);
  // --8<-- [end:bench]
  CUDA_CHECK(cudaFree(dsum));
  if (temp) CUDA_CHECK(cudaFree(temp));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Values up to 1000 in magnitude: the inclusive scan of 2^21 of them fits in an int.
  const long long n = args.get_int("--n", 1000003, 1, 1 << 21);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  args.finish();
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));  // no GPU: a plain error before Thrust throws
  // Thrust reports CUDA errors (and failed allocations) as exceptions, not return codes: catch them
  // so that a failure is a message and exit code 1, not std::terminate.
  try {
    const bool ok = check((int)n, seed);
    if (ok && run_bench) bench();
    return ok ? 0 : course::kExitFail;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return course::kExitFail;
  }
}
