// histogram.cu: count how often each byte value occurs (256 bins).
//   hist_racy     bins[v]++ from many threads at once: updates are lost (shown, never checked as right)
//   hist_atomic   atomicAdd on global memory: correct, but every thread queues on the same 256 words
//   hist_shared   a private histogram per block in shared memory, merged into global memory at the end
// and atomicCAS: an atomic maximum of floats, built from compare-and-swap.
//
// Taught in docs/first-kernels/atomics.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/histogram kernels/first-kernels/histogram.cu
// Run:   ./build/first-kernels/histogram --n 1000003
//        ./build/first-kernels/histogram --bench       (times both correct versions on 2^28 bytes)
//
// course: gpu
// course: run --n 1000003 --seed 3
// course: run --n 1 --seed 4
// course: run --n 7919 --seed 5
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kBins = 256;

// --8<-- [start:racy]
// WRONG on purpose: bins[v]++ is a load, an add and a store. Two threads that load the same old
// value both store old + 1, and one of the two counts is lost.
__global__ void hist_racy(const unsigned char* data, size_t n, unsigned* bins) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    bins[data[i]]++;
  }
}
// --8<-- [end:racy]

// --8<-- [start:atomic]
// atomicAdd does the read-modify-write as one indivisible operation in the memory system.
__global__ void hist_atomic(const unsigned char* data, size_t n, unsigned* bins) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    atomicAdd(&bins[data[i]], 1u);
  }
}
// --8<-- [end:atomic]

// --8<-- [start:shared]
// Privatised: each block counts into its own 256 bins in shared memory (fast atomics, contention only
// within the block), then adds its 256 totals to the global bins: 256 global atomics per block
// instead of one per byte.
__global__ void hist_shared(const unsigned char* data, size_t n, unsigned* bins) {
  __shared__ unsigned local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();  // every bin is zero before anyone counts
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    atomicAdd(&local[data[i]], 1u);
  }
  __syncthreads();  // every count is in before the block's totals are published
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
    if (local[b]) atomicAdd(&bins[b], local[b]);
  }
}
// --8<-- [end:shared]

// --8<-- [start:cas]
// There is no atomicMax for float, but atomicCAS (compare-and-swap) builds any atomic update:
// read the current value, compute the new one, and store it only if nobody changed the word in
// between; otherwise retry with what is there now.
__device__ float atomic_max_float(float* address, float value) {
  unsigned* word = reinterpret_cast<unsigned*>(address);
  unsigned old = *word;
  while (__uint_as_float(old) < value) {
    const unsigned assumed = old;
    old = atomicCAS(word, assumed, __float_as_uint(value));
    if (old == assumed) break;  // our value went in
  }
  return __uint_as_float(old);
}

__global__ void max_kernel(const float* x, size_t n, float* result) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  float m = -INFINITY;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    m = fmaxf(m, x[i]);
  }
  atomic_max_float(result, m);  // one atomic per thread, not per element
}
// --8<-- [end:cas]

using HistKernel = void (*)(const unsigned char*, size_t, unsigned*);

static void launch_hist(HistKernel k, const unsigned char* data, size_t n, unsigned* bins) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t blocks = std::min<size_t>(course::ceil_div<size_t>(n, 256), 8u * sms);
  CUDA_CHECK(cudaMemsetAsync(bins, 0, kBins * sizeof(unsigned)));
  k<<<static_cast<unsigned>(blocks), 256>>>(data, n, bins);
  CUDA_CHECK_LAUNCH();
}

static std::vector<unsigned char> random_bytes(size_t n, uint64_t seed, bool all_equal) {
  std::vector<unsigned char> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = all_equal ? 42 : static_cast<unsigned char>(rng() & 0xFF);
  return v;
}

static bool check(size_t n, uint64_t seed) {
  const auto data = random_bytes(n, seed, false);
  std::vector<unsigned> want(kBins, 0), got(kBins);
  for (unsigned char b : data) ++want[b];  // CPU reference
  unsigned char* d_data = nullptr;
  unsigned* d_bins = nullptr;
  CUDA_CHECK(cudaMalloc(&d_data, n));
  CUDA_CHECK(cudaMalloc(&d_bins, kBins * sizeof(unsigned)));
  CUDA_CHECK(cudaMemcpy(d_data, data.data(), n, cudaMemcpyHostToDevice));

  // --8<-- [start:show_race]
  launch_hist(hist_racy, d_data, n, d_bins);
  CUDA_CHECK(cudaMemcpy(got.data(), d_bins, kBins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  unsigned long long counted = 0;
  for (unsigned c : got) counted += c;
  std::printf("hist_racy counted %llu of %zu bytes (%llu updates lost)\n", counted, n, n - counted);
  // --8<-- [end:show_race]
  bool ok = true;
  for (HistKernel k : {hist_atomic, hist_shared}) {
    CUDA_CHECK(cudaMemset(d_bins, 0xFF, kBins * sizeof(unsigned)));  // poison, then the launcher zeroes
    launch_hist(k, d_data, n, d_bins);
    CUDA_CHECK(cudaMemcpy(got.data(), d_bins, kBins * sizeof(unsigned), cudaMemcpyDeviceToHost));
    ok = course::check_close(k == hist_atomic ? "hist_atomic" : "hist_shared", got.data(), want.data(), kBins,
                             0.0, 0.0) && ok;
  }

  std::vector<float> x(n);
  course::fill_uniform(x, seed + 1, -100.0f, 100.0f);
  const float want_max = *std::max_element(x.begin(), x.end());
  float *d_x = nullptr, *d_max = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_max, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const float minus_inf = -INFINITY;
  CUDA_CHECK(cudaMemcpy(d_max, &minus_inf, sizeof(float), cudaMemcpyHostToDevice));
  max_kernel<<<static_cast<unsigned>(std::min<size_t>(course::ceil_div<size_t>(n, 256), 1024)), 256>>>(d_x, n, d_max);
  CUDA_CHECK_LAUNCH();
  float got_max = 0.0f;
  CUDA_CHECK(cudaMemcpy(&got_max, d_max, sizeof(float), cudaMemcpyDeviceToHost));
  ok = course::check_close("atomic_max_float_cas", &got_max, &want_max, 1, 0.0, 0.0) && ok;
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_max));
  CUDA_CHECK(cudaFree(d_data));
  CUDA_CHECK(cudaFree(d_bins));
  return ok;
}

// --8<-- [start:bench]
static void bench(size_t n) {
  unsigned char* d_data = nullptr;
  unsigned* d_bins = nullptr;
  CUDA_CHECK(cudaMalloc(&d_data, n));
  CUDA_CHECK(cudaMalloc(&d_bins, kBins * sizeof(unsigned)));
  for (bool all_equal : {false, true}) {
    const auto data = random_bytes(n, 9, all_equal);
    CUDA_CHECK(cudaMemcpy(d_data, data.data(), n, cudaMemcpyHostToDevice));
    char name[64];
    std::snprintf(name, sizeof(name), "%zu bytes, %s", n, all_equal ? "all equal" : "uniform");
    const double bytes = n + kBins * sizeof(unsigned);
    course::print_bench(name, "hist_atomic",
                        course::time_kernel_ms([&] { launch_hist(hist_atomic, d_data, n, d_bins); }), bytes, n);
    course::print_bench(name, "hist_shared",
                        course::time_kernel_ms([&] { launch_hist(hist_shared, d_data, n, d_bins); }), bytes, n);
  }
  CUDA_CHECK(cudaFree(d_data));
  CUDA_CHECK(cudaFree(d_bins));
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::SizeOptions opt(args, {1000003, 1, 1LL << 31}, {1LL << 28, 1, 1LL << 31});
  args.finish();
  if (!check(static_cast<size_t>(opt.n), opt.seed)) return course::kExitFail;
  if (opt.bench) bench(static_cast<size_t>(opt.bench_n));
  return 0;
}
