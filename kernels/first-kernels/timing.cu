// timing.cu: four ways to time the same kernel, and why three of them mislead.
//   host clock, no sync      measures only the launch call: the kernel has not run yet
//   host clock + sync, cold  the first launch: lazy module loading and warm-up included
//   host clock + sync, warm  launch overhead and synchronisation on top of the kernel
//   CUDA events, median      events on the GPU's own timeline, warm-up first, median of 20
//
// Taught in docs/first-kernels/timing.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/timing kernels/first-kernels/timing.cu
// Run:   ./build/first-kernels/timing --n 1000003
//        ./build/first-kernels/timing --bench        (times saxpy on 2^26 floats all four ways)
//
// course: gpu
// course: run --n 1000003
// course: run --n 1
// course: bench --bench
#include <chrono>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

__global__ void saxpy(float alpha, const float* __restrict__ x, float* __restrict__ y, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}

static void launch_saxpy(float alpha, const float* x, float* y, size_t n) {
  saxpy<<<static_cast<unsigned>(course::ceil_div<size_t>(n, 256)), 256>>>(alpha, x, y, n);
  CUDA_CHECK_LAUNCH();
}

using Clock = std::chrono::steady_clock;
static double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// --8<-- [start:ways]
static void bench(size_t n) {
  float *x = nullptr, *y = nullptr;
  CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, n * sizeof(float)));
  std::vector<float> host(n);  // random inputs, never constants
  course::fill_uniform(host, 7);
  CUDA_CHECK(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(y, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());

  // 1. The very first launch in this process, host clock + synchronise: pays for loading the module.
  auto t0 = Clock::now();
  launch_saxpy(2.0f, x, y, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  const double cold = ms_since(t0);

  // 2. Host clock around the launch alone. The launch only queues the kernel and returns.
  t0 = Clock::now();
  launch_saxpy(2.0f, x, y, n);
  const double no_sync = ms_since(t0);
  CUDA_CHECK(cudaDeviceSynchronize());

  // 3. Host clock + synchronise, warm: the kernel, plus launch and wake-up latency. Median of 20.
  std::vector<double> synced(20);
  for (auto& t : synced) {
    t0 = Clock::now();
    launch_saxpy(2.0f, x, y, n);
    CUDA_CHECK(cudaDeviceSynchronize());
    t = ms_since(t0);
  }
  std::sort(synced.begin(), synced.end());

  // 4. CUDA events around the launch, after warm-up, median of 20 (course::time_kernel_ms).
  const float events = course::time_kernel_ms([&] { launch_saxpy(2.0f, x, y, n); });

  char name[64];
  std::snprintf(name, sizeof(name), "saxpy, %zu floats", n);
  const double bytes = 3.0 * n * sizeof(float), flops = 2.0 * n;
  course::print_bench(name, "host clock, no sync (wrong)", no_sync, bytes, flops);
  course::print_bench(name, "host clock + sync, first call (cold)", cold, bytes, flops);
  course::print_bench(name, "host clock + sync, warm, median", synced[synced.size() / 2], bytes, flops);
  course::print_bench(name, "CUDA events, warm, median", events, bytes, flops, true);
  // --8<-- [end:ways]
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
}

static bool check(size_t n, uint64_t seed) {
  std::vector<float> x(n), y(n), got(n), want(n);
  course::fill_uniform(x, seed);
  course::fill_uniform(y, seed + 1);
  for (size_t i = 0; i < n; ++i) want[i] = 3.0f * x[i] + y[i];
  float *dx = nullptr, *dy = nullptr;
  CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  launch_saxpy(3.0f, dx, dy, n);
  CUDA_CHECK(cudaMemcpy(got.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));
  // The GPU may fuse a * x + y into one FMA (one rounding) where the CPU rounds twice.
  return course::check_close("saxpy", got.data(), want.data(), n, 1e-6, 1e-6);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::SizeOptions opt(args, {1000003, 1, 1LL << 30}, {1LL << 26, 1, 1LL << 30});
  args.finish();
  // Benchmark first, so that its "first call" really is the first launch of the process.
  if (opt.bench) bench(static_cast<size_t>(opt.bench_n));
  return check(static_cast<size_t>(opt.n), opt.seed) ? 0 : course::kExitFail;
}
