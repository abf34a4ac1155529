// stream_priority.cu: stream priorities. A long kernel (many short blocks) fills the GPU from a
// low-priority stream; a short kernel is queued behind it from a second stream, and its latency (from
// when its stream reaches it to when it finishes) is measured:
//   idle GPU                    the short kernel alone: the floor
//   same (low) priority         it waits until the long kernel's blocks have all been handed out
//   high priority               the block scheduler hands it the next free SM slots, ahead of the
//                               long kernel's waiting blocks (running blocks are not interrupted)
// Both kernels' results are checked against a CPU reference with the two running concurrently.
//
// Taught in docs/first-kernels/cuda-graphs.md (section "Stream priorities").
// Build: nvcc -O3 -arch=native -o build/first-kernels/stream_priority kernels/first-kernels/stream_priority.cu
// Run:   ./build/first-kernels/stream_priority --n 1000003
//        ./build/first-kernels/stream_priority --bench     (a long kernel on 2^24 floats)
//
// course: gpu
// course: run --n 1
// course: run --n 1000003
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kRounds = 16;      // work per element of the long kernel
constexpr int kShortN = 4096;    // the short kernel's elements

static float long_cpu(float x) {
  for (int r = 0; r < kRounds; ++r) x = std::sin(x) * 0.5f + 0.25f;
  return x;
}
static float short_cpu(float y) { return y * 2.0f + 1.0f; }

__global__ void long_kernel(float* x, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int r = 0; r < kRounds; ++r) v = sinf(v) * 0.5f + 0.25f;
  x[i] = v;
}

__global__ void short_kernel(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * 2.0f + 1.0f;
}

static void launch_long(float* x, size_t n, cudaStream_t s) {
  long_kernel<<<static_cast<unsigned>(course::ceil_div<size_t>(n, 256)), 256, 0, s>>>(x, n);
  CUDA_CHECK_LAUNCH();
}
static void launch_short(float* y, cudaStream_t s) {
  short_kernel<<<course::ceil_div(kShortN, 256), 256, 0, s>>>(y, kShortN);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:latency]
// Median over repeats of the short kernel's latency on stream `fast`, with (or without) the long
// kernel queued first on stream `slow`. The events are recorded in the short kernel's own stream, so
// the time starts when that stream reaches the kernel, not when the GPU is free.
static float short_latency_ms(float* x, size_t n, float* y, bool behind_long, cudaStream_t slow, cudaStream_t fast) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < 13; ++r) {
    if (behind_long) launch_long(x, n, slow);
    CUDA_CHECK(cudaEventRecord(start, fast));
    launch_short(y, fast);
    CUDA_CHECK(cudaEventRecord(stop, fast));
    CUDA_CHECK(cudaDeviceSynchronize());
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 3) times.push_back(ms);  // the first repeats are warm-up
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}
// --8<-- [end:latency]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 28));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();

  // --8<-- [start:streams]
  // Lower numbers mean higher priority: the range is [greatest, least], e.g. [-5, 0].
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t low, low2, high;
  CUDA_CHECK(cudaStreamCreateWithPriority(&low, cudaStreamNonBlocking, least));
  CUDA_CHECK(cudaStreamCreateWithPriority(&low2, cudaStreamNonBlocking, least));
  CUDA_CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, greatest));
  // --8<-- [end:streams]
  std::printf("stream priorities: least %d, greatest %d\n", least, greatest);

  std::vector<float> h_x(n), h_y(kShortN), got_x(n), got_y(kShortN), want_x(n), want_y(kShortN);
  course::fill_uniform(h_x, seed);
  course::fill_uniform(h_y, seed + 1);
  for (size_t i = 0; i < n; ++i) want_x[i] = long_cpu(h_x[i]);
  for (int i = 0; i < kShortN; ++i) want_y[i] = short_cpu(h_y[i]);
  const size_t bench_n = bench ? static_cast<size_t>(1) << 24 : 0;
  float *d_x = nullptr, *d_y = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, std::max(n, bench_n) * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_y, kShortN * sizeof(float)));

  // Both kernels concurrently, from the low and the high stream, then check both.
  course::poison(d_x, n * sizeof(float));
  course::poison(d_y, kShortN * sizeof(float));
  CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_y, h_y.data(), kShortN * sizeof(float), cudaMemcpyHostToDevice));
  launch_long(d_x, n, low);
  launch_short(d_y, high);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(got_x.data(), d_x, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_y.data(), d_y, kShortN * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = course::check_close("long_kernel_low_priority", got_x.data(), want_x.data(), n, 1e-5, 1e-5);
  ok = course::check_close("short_kernel_high_priority", got_y.data(), want_y.data(), kShortN, 0.0, 0.0) && ok;

  if (ok && bench) {
    // The values drift under repeated application, but stay finite: sin is bounded.
    std::vector<float> big(bench_n);
    course::fill_uniform(big, seed + 2);
    CUDA_CHECK(cudaMemcpy(d_x, big.data(), bench_n * sizeof(float), cudaMemcpyHostToDevice));
    char name[96];
    std::snprintf(name, sizeof(name), "short kernel (%d floats) behind a long kernel (%zu floats)", kShortN, bench_n);
    const double moved = 2.0 * kShortN * sizeof(float);
    course::print_bench(name, "idle GPU", short_latency_ms(d_x, bench_n, d_y, false, low, low2), moved, 0);
    course::print_bench(name, "same (low) priority", short_latency_ms(d_x, bench_n, d_y, true, low, low2), moved, 0);
    course::print_bench(name, "high priority", short_latency_ms(d_x, bench_n, d_y, true, low, high), moved, 0);
    // The long kernel alone, for scale: how long the same-priority kernel could have to wait.
    course::print_bench(name, "the long kernel itself", course::time_kernel_ms([&] { launch_long(d_x, bench_n, 0); }),
                        2.0 * bench_n * sizeof(float), 0);
  }

  for (cudaStream_t s : {low, low2, high}) CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_y));
  return ok ? 0 : course::kExitFail;
}
