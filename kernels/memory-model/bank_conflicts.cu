// bank_conflicts.cu: shared-memory bandwidth when the 32 lanes of a warp read addresses `stride`
// words apart, for stride = 1 .. 33. Shared memory has 32 banks, each 4 bytes wide; lane i reads
// word i * stride, which lies in bank (i * stride) mod 32, so gcd(stride, 32) lanes share a bank
// and their reads are served one after another.
//
// Taught in docs/memory-model/shared-memory.md.
// Build: nvcc -O3 -arch=native -o build/memory-model/bank_conflicts kernels/memory-model/bank_conflicts.cu
// Run:   ./build/memory-model/bank_conflicts            (checks the kernel at every stride)
//        ./build/memory-model/bank_conflicts --bench    (also times every stride)
//
// course: gpu
// course: run
// course: run --blocks 1 --iters 1
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kWords = 4096;   // 16 KiB of shared memory per block (a power of two)
constexpr int kThreads = 256;
constexpr int kMaxStride = 33;

// --8<-- [start:kernel]
// Every iteration, each lane reads one float at word (lane * stride + it) mod kWords. Adding `it`
// moves all lanes by the same amount, which keeps the pattern of banks, but stops the compiler
// from loading once and reusing the value.
__global__ void shared_stride(float* __restrict__ out, int stride, int iters) {
  __shared__ float buf[kWords];
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) buf[i] = static_cast<float>(i & 7);
  __syncthreads();
  const int base = (threadIdx.x % 32) * stride;
  float acc = 0.0f;
#pragma unroll 8
  for (int it = 0; it < iters; ++it) acc += buf[(base + it) & (kWords - 1)];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// --8<-- [end:kernel]

// What every thread of the kernel must return (small integers: the float sums are exact).
static float expected(int lane, int stride, int iters) {
  float acc = 0.0f;
  for (int it = 0; it < iters; ++it) acc += static_cast<float>(((lane * stride + it) & (kWords - 1)) & 7);
  return acc;
}

static void launch(float* out, int blocks, int stride, int iters) {
  shared_stride<<<blocks, kThreads>>>(out, stride, iters);
  CUDA_CHECK_LAUNCH();
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long blocks = args.get_int("--blocks", 3, 1, 65535), iters = args.get_int("--iters", 1000, 1, 1 << 20);
  args.finish();
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int bench_blocks = 8 * sms, bench_iters = 4096;  // 8 blocks of 256 threads fill an SM
  const size_t out_count = static_cast<size_t>(std::max<long long>(blocks, bench_blocks)) * kThreads;
  float* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_out, out_count * sizeof(float)));
  std::vector<float> got(out_count), want(out_count);

  bool ok = true;
  for (int stride = 1; stride <= kMaxStride; ++stride) {
    const size_t n = static_cast<size_t>(blocks) * kThreads;
    for (size_t t = 0; t < n; ++t) want[t] = expected(static_cast<int>(t % 32), stride, static_cast<int>(iters));
    course::poison(d_out, n * sizeof(float));
    launch(d_out, static_cast<int>(blocks), stride, static_cast<int>(iters));
    CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    char name[48];
    std::snprintf(name, sizeof(name), "shared_stride_%d", stride);
    ok = course::check_close(name, got.data(), want.data(), n, 0.0, 0.0) && ok;
  }

  if (bench && ok) {
    // --8<-- [start:bench]
    const double bytes = 4.0 * bench_blocks * kThreads * bench_iters;  // shared-memory bytes read
    for (int stride = 1; stride <= kMaxStride; ++stride) {
      // No L2 flush: the kernel never touches global memory except to write its result.
      const float ms =
          course::time_kernel_ms([&] { launch(d_out, bench_blocks, stride, bench_iters); }, 3, 20, false);
      course::print_bench("shared-memory reads, lanes stride words apart", "shared_stride", ms, bytes, 0, false,
                          {{"stride", stride}});  // the plot's x axis
    }
    // --8<-- [end:bench]
  }
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
