// coalescing.cu: how the distance between the addresses of neighbouring threads sets bandwidth.
// Thread i copies one float: out[i] = in[i * stride] (strided reads) or out[i * stride] = in[i]
// (strided writes), for stride = 1, 2, 4, ..., 64, timed against cudaMemcpy of the useful bytes.
//
// Taught in docs/memory-model/coalescing.md. Bandwidth counts useful bytes only (n floats read and
// n floats written), so the sweep shows what fraction of each memory transaction a warp uses.
// Build: nvcc -O3 -arch=native -o build/memory-model/coalescing kernels/memory-model/coalescing.cu
// Run:   ./build/memory-model/coalescing --n 100003    (checks both kernels at every stride)
//        ./build/memory-model/coalescing --bench       (also times them on n = 2^26 floats)
//
// course: gpu
// course: run --n 1
// course: run --n 100003
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// --8<-- [start:kernels]
// A warp's 32 loads of 4 bytes are merged into as few 32-byte sectors as their addresses allow:
// stride 1 needs 4 sectors (128 bytes, all used); stride 2 needs 8 (half of each used); from
// stride 8 on, every float sits in a sector of its own and 28 of every 32 bytes fetched are wasted.
__global__ void read_strided(const float* __restrict__ in, float* __restrict__ out, long long n, int stride) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i * stride];
}

__global__ void write_strided(const float* __restrict__ in, float* __restrict__ out, long long n, int stride) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i * stride] = in[i];
}
// --8<-- [end:kernels]

constexpr int kThreads = 256;
constexpr int kMaxStride = 64;

static void launch(bool strided_read, const float* in, float* out, long long n, int stride) {
  const unsigned blocks = static_cast<unsigned>(course::ceil_div<long long>(n, kThreads));
  if (strided_read) {
    read_strided<<<blocks, kThreads>>>(in, out, n, stride);
  } else {
    write_strided<<<blocks, kThreads>>>(in, out, n, stride);
  }
  CUDA_CHECK_LAUNCH();
}

// Checks both kernels at every stride on n random floats.
static bool check_all(long long n, uint64_t seed) {
  const size_t small = static_cast<size_t>(n) * sizeof(float), big = small * kMaxStride;
  std::vector<float> h_small(static_cast<size_t>(n)), h_big(big / sizeof(float)), got(h_big.size());
  course::fill_uniform(h_small, seed);
  course::fill_uniform(h_big, seed + 1);
  float *d_small = nullptr, *d_small_out = nullptr, *d_big = nullptr;
  CUDA_CHECK(cudaMalloc(&d_small, small));
  CUDA_CHECK(cudaMalloc(&d_small_out, small));
  CUDA_CHECK(cudaMalloc(&d_big, big));
  CUDA_CHECK(cudaMemcpy(d_small, h_small.data(), small, cudaMemcpyHostToDevice));
  bool ok = true;
  std::vector<float> want(static_cast<size_t>(n));
  for (int stride = 1; stride <= kMaxStride; stride *= 2) {
    char name[64];
    // Strided read: out[i] = big[i * stride].
    CUDA_CHECK(cudaMemcpy(d_big, h_big.data(), big, cudaMemcpyHostToDevice));
    for (long long i = 0; i < n; ++i) want[i] = h_big[i * stride];
    course::poison(d_small_out, small);
    launch(true, d_big, d_small_out, n, stride);
    CUDA_CHECK(cudaMemcpy(got.data(), d_small_out, small, cudaMemcpyDeviceToHost));
    std::snprintf(name, sizeof(name), "read_stride_%d", stride);
    ok = course::check_close(name, got.data(), want.data(), static_cast<size_t>(n), 0.0, 0.0) && ok;
    // Strided write: big[i * stride] = small[i]; gather every stride-th float back and compare.
    course::poison(d_big, big);
    launch(false, d_small, d_big, n, stride);
    CUDA_CHECK(cudaMemcpy(got.data(), d_big, big, cudaMemcpyDeviceToHost));
    for (long long i = 0; i < n; ++i) want[i] = got[i * stride];
    std::snprintf(name, sizeof(name), "write_stride_%d", stride);
    ok = course::check_close(name, want.data(), h_small.data(), static_cast<size_t>(n), 0.0, 0.0) && ok;
  }
  CUDA_CHECK(cudaFree(d_small));
  CUDA_CHECK(cudaFree(d_small_out));
  CUDA_CHECK(cudaFree(d_big));
  return ok;
}

// Fills n floats of device memory with random values: one random piece of at most 2^24 floats is
// uploaded, then copied on the device over the rest (the strided buffer is 16 GiB: too much to draw).
static void fill_device_random(float* d, size_t n, uint64_t seed) {
  std::vector<float> piece(std::min<size_t>(n, size_t{1} << 24));
  course::fill_uniform(piece, seed);
  CUDA_CHECK(cudaMemcpy(d, piece.data(), piece.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (size_t done = piece.size(); done < n; done += piece.size()) {
    const size_t count = std::min(piece.size(), n - done);
    CUDA_CHECK(cudaMemcpy(d + done, d, count * sizeof(float), cudaMemcpyDeviceToDevice));
  }
}

static void bench_all(long long n, uint64_t seed) {
  const size_t small = static_cast<size_t>(n) * sizeof(float), big = small * kMaxStride;
  float *d_small = nullptr, *d_small_out = nullptr, *d_big = nullptr;
  CUDA_CHECK(cudaMalloc(&d_small, small));
  CUDA_CHECK(cudaMalloc(&d_small_out, small));
  CUDA_CHECK(cudaMalloc(&d_big, big));
  fill_device_random(d_small, static_cast<size_t>(n), seed);
  fill_device_random(d_big, big / sizeof(float), seed + 1);
  // --8<-- [start:bench]
  char case_name[64];
  std::snprintf(case_name, sizeof(case_name), "%lld floats read and written", n);
  const double useful = 2.0 * small;  // n floats read + n floats written, whatever the stride
  const float copy_ms = course::time_kernel_ms(
      [&] { CUDA_CHECK(cudaMemcpy(d_small_out, d_small, small, cudaMemcpyDeviceToDevice)); });
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, useful, 0, /*peer=*/true);
  for (int stride = 1; stride <= kMaxStride; stride *= 2) {
    const float read_ms = course::time_kernel_ms([&] { launch(true, d_big, d_small_out, n, stride); });
    const float write_ms = course::time_kernel_ms([&] { launch(false, d_small, d_big, n, stride); });
    // The stride, an extra field of the BENCH line, is the plot's x axis.
    course::print_bench(case_name, "strided read", read_ms, useful, 0, false, {{"stride", stride}});
    course::print_bench(case_name, "strided write", write_ms, useful, 0, false, {{"stride", stride}});
  }
  // --8<-- [end:bench]
  course::device_free({d_small, d_small_out, d_big});
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // The strided buffer holds 64 floats per element: keep it under 1 GiB for checks, 16 GiB to time.
  const course::SizeOptions opt(args, {100003, 1, 1LL << 22}, {1LL << 26, 1, 1LL << 26});
  args.finish();
  if (!check_all(opt.n, opt.seed)) return course::kExitFail;
  if (opt.bench) bench_all(opt.bench_n, opt.seed);
  return 0;
}
