// vector_add.cu: c = a + b on float vectors. A CPU reference, then three kernels:
//   v1  one thread per element (the first kernel anyone writes)
//   v2  grid-stride loop, a grid sized to fill the GPU once
//   v3  float4: each thread moves 16 bytes per load and store
// The benchmark times them against the CPU loop and against cudaMemcpy moving the same number of
// bytes (the copy bandwidth, measured in the same run), with NVTX ranges for the profilers.
//
// Taught in docs/first-kernels/program-shape.md and docs/first-kernels/vector-add.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/vector_add kernels/first-kernels/vector_add.cu
// Run:   ./build/first-kernels/vector_add --n 1000003          (checks every version)
//        ./build/first-kernels/vector_add --bench              (also times them on 2^28 floats)
//
// course: gpu
// course: run --n 1000003 --seed 11
// course: run --n 1 --seed 12
// course: run --n 4099 --seed 13
// course: bench --bench
#include <nvtx3/nvToolsExt.h>  // NVTX ranges: header-only, free when no profiler is attached

#include <chrono>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// --8<-- [start:reference]
// CPU reference: one core, one element at a time.
static void vector_add_cpu(const float* a, const float* b, float* c, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
// --8<-- [end:reference]

// --8<-- [start:v1]
// v1: one thread per element; the grid is rounded up, so the last block checks the bound.
__global__ void add_v1(const float* a, const float* b, float* c, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
// --8<-- [end:v1]

// --8<-- [start:v2]
// v2: a grid-stride loop. The grid is sized to the GPU, not to n, and each thread handles
// several elements, a stride apart, so neighbouring threads still touch neighbouring addresses.
__global__ void add_v2(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    c[i] = a[i] + b[i];
  }
}
// --8<-- [end:v2]

// --8<-- [start:v3]
// v3: float4 loads and stores (16 bytes per thread per access, so fewer instructions per byte).
// cudaMalloc returns 256-byte aligned pointers, so a, b and c are 16-byte aligned; the n % 4
// leftover elements are done one by one by the first threads.
__global__ void add_v3(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t n4 = n / 4;
  if (i < n4) {
    const float4 x = reinterpret_cast<const float4*>(a)[i];
    const float4 y = reinterpret_cast<const float4*>(b)[i];
    reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  const size_t tail = 4 * n4 + i;
  if (tail < n) c[tail] = a[tail] + b[tail];
}
// --8<-- [end:v3]

// --8<-- [start:launchers]
constexpr int kThreads = 256;

static void launch_v1(const float* a, const float* b, float* c, size_t n) {
  const size_t blocks = course::ceil_div<size_t>(n, kThreads);
  add_v1<<<static_cast<unsigned>(blocks), kThreads>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}

static void launch_v2(const float* a, const float* b, float* c, size_t n) {
  int device = 0, sms = 0, blocks_per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // As many blocks as can be resident at once: one full "wave" over all SMs.
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, add_v2, kThreads, 0));
  const size_t wanted = course::ceil_div<size_t>(n, kThreads);
  const size_t blocks = std::min<size_t>(wanted, static_cast<size_t>(sms) * blocks_per_sm);
  add_v2<<<static_cast<unsigned>(blocks), kThreads>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}

static void launch_v3(const float* a, const float* b, float* c, size_t n) {
  // Enough threads for the float4 part, and at least enough for the 0..3 leftover elements.
  const size_t threads_needed = std::max<size_t>(n / 4, n % 4);
  const size_t blocks = course::ceil_div<size_t>(threads_needed, kThreads);
  add_v3<<<static_cast<unsigned>(blocks), kThreads>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launchers]

using Launcher = void (*)(const float*, const float*, float*, size_t);
struct Version {
  const char* name;
  Launcher launch;
};
static const Version kVersions[] = {{"add_v1", launch_v1}, {"add_v2", launch_v2}, {"add_v3", launch_v3}};

// --8<-- [start:shape]
// The shape of every CUDA program: allocate, copy in, launch, copy out, free; every call checked.
static bool check_version(const Version& v, size_t n, uint64_t seed) {
  const size_t bytes = n * sizeof(float);
  std::vector<float> a(n), b(n), c(n), want(n);
  course::fill_uniform(a, seed);
  course::fill_uniform(b, seed + 1);
  vector_add_cpu(a.data(), b.data(), want.data(), n);

  float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, bytes));                                       // 1. allocate
  CUDA_CHECK(cudaMalloc(&d_b, bytes));
  CUDA_CHECK(cudaMalloc(&d_c, bytes));
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), bytes, cudaMemcpyHostToDevice));      // 2. copy in
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), bytes, cudaMemcpyHostToDevice));
  course::poison(d_c, bytes);  // NaN: an element the kernel forgets to write fails the check
  v.launch(d_a, d_b, d_c, n);                                                // 3. launch (checked inside)
  CUDA_CHECK(cudaMemcpy(c.data(), d_c, bytes, cudaMemcpyDeviceToHost));      // 4. copy out (waits)
  CUDA_CHECK(cudaFree(d_a));                                                 // 5. free
  CUDA_CHECK(cudaFree(d_b));
  CUDA_CHECK(cudaFree(d_c));
  // The GPU adds in float like the CPU does, so the results agree exactly.
  return course::check_close(v.name, c.data(), want.data(), n, 0.0, 0.0);
}
// --8<-- [end:shape]

// --8<-- [start:bench]
static void bench(size_t n) {
  const size_t bytes = n * sizeof(float);
  const double moved = 3.0 * bytes;  // read a and b, write c
  char case_name[64];
  std::snprintf(case_name, sizeof(case_name), "vector add, %zu floats", n);

  // The CPU loop, timed with a host clock (it is synchronous): median of 5.
  std::vector<float> a(n), b(n), c(n);
  course::fill_uniform(a, 1);
  course::fill_uniform(b, 2);
  std::vector<float> cpu_ms(5);
  for (auto& t : cpu_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    vector_add_cpu(a.data(), b.data(), c.data(), n);
    t = std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(cpu_ms.begin(), cpu_ms.end());

  float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, bytes));
  CUDA_CHECK(cudaMalloc(&d_b, bytes));
  CUDA_CHECK(cudaMalloc(&d_c, bytes));
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), bytes, cudaMemcpyHostToDevice));

  // The peer: a device-to-device copy that moves as many bytes as the add (1.5 n floats read and
  // written = 3 n floats of traffic), so "% of peer" is the add's share of the copy bandwidth.
  const size_t copy_bytes = bytes / 2 * 3;
  float *d_src = nullptr, *d_dst = nullptr;
  CUDA_CHECK(cudaMalloc(&d_src, copy_bytes));
  CUDA_CHECK(cudaMalloc(&d_dst, copy_bytes));
  CUDA_CHECK(cudaMemset(d_src, 0, copy_bytes));

  nvtxRangePushA("bench cudaMemcpy");
  const float copy_ms = course::time_kernel_ms(
      [&] { CUDA_CHECK(cudaMemcpyAsync(d_dst, d_src, copy_bytes, cudaMemcpyDeviceToDevice)); });
  nvtxRangePop();
  course::print_bench(case_name, "CPU loop, one core", cpu_ms[cpu_ms.size() / 2], moved, 1.0 * n);
  course::print_bench(case_name, "cudaMemcpy D2D, same bytes", copy_ms, 2.0 * copy_bytes, 0, true);
  for (const Version& v : kVersions) {
    nvtxRangePushA(v.name);  // a named range on the profiler's timeline
    const float ms = course::time_kernel_ms([&] { v.launch(d_a, d_b, d_c, n); });
    nvtxRangePop();
    course::print_bench(case_name, v.name, ms, moved, 1.0 * n);
  }
  // --8<-- [end:bench]
  course::device_free({d_a, d_b, d_c, d_src, d_dst});
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // The grid's x dimension allows 2^31 - 1 blocks; v1 needs n / 256 of them, and memory runs out first.
  const course::SizeOptions opt(args, {1000003, 1, 1LL << 31}, {1LL << 28, 2, 1LL << 31});
  args.finish();
  if (opt.bench_n % 2) {  // the peer copies 1.5 * bench_n floats
    std::fprintf(stderr, "error: --bench-n must be even, got %lld\n", opt.bench_n);
    return course::kExitFail;
  }
  bool ok = true;
  nvtxRangePushA("check all versions");
  for (const Version& v : kVersions) ok = check_version(v, static_cast<size_t>(opt.n), opt.seed) && ok;
  nvtxRangePop();
  if (!ok) return course::kExitFail;
  if (opt.bench) bench(static_cast<size_t>(opt.bench_n));
  return 0;
}
