// bandwidth.cu: how fast can data move? Host<->device over PCIe (pageable and pinned memory),
// and device<->device through cudaMemcpy and through a copy kernel of our own.
//
// Taught in docs/setup/bandwidth.md. The device-to-device figure is the "copy bandwidth" that later
// chapters compare their memory-bound kernels against.
// Build: nvcc -O3 -arch=native -o build/setup/bandwidth kernels/setup/bandwidth.cu
// Run:   ./build/setup/bandwidth             (checks every copy on an odd-sized buffer)
//        ./build/setup/bandwidth --bench     (also times each copy on a 256 MiB buffer)
//
// course: gpu
// course: run --floats 1000003
// course: run --floats 1
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// --8<-- [start:copy_kernel]
// Each thread copies 16 bytes per step (a float4), and the grid strides over the array, so any
// grid size covers any n. The scalar loop at the end handles the n % 4 leftover floats.
__global__ void copy_kernel(const float* __restrict__ in, float* __restrict__ out, size_t n) {
  const size_t n4 = n / 4;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (size_t i = first; i < n4; i += stride) out4[i] = in4[i];
  for (size_t i = 4 * n4 + first; i < n; i += stride) out[i] = in[i];
}
// --8<-- [end:copy_kernel]

static void launch_copy(const float* in, float* out, size_t n) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  constexpr int kThreads = 256;
  // Enough blocks to fill every SM several times over; the grid-stride loop does the rest.
  const size_t wanted = course::ceil_div<size_t>(course::ceil_div<size_t>(n, 4), kThreads);
  const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>(wanted, 32u * sms)));
  copy_kernel<<<blocks, kThreads>>>(in, out, n);
  CUDA_CHECK_LAUNCH();
}

// Moves `floats` floats through every path once and checks that the data arrives unchanged.
static bool check_all_paths(size_t floats, uint64_t seed) {
  const size_t bytes = floats * sizeof(float);
  std::vector<float> src(floats), dst(floats);
  course::fill_uniform(src, seed);
  float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, bytes));
  CUDA_CHECK(cudaMalloc(&d_b, bytes));
  CUDA_CHECK(cudaMalloc(&d_c, bytes));
  course::poison(d_b, bytes);
  course::poison(d_c, bytes);
  CUDA_CHECK(cudaMemcpy(d_a, src.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, d_a, bytes, cudaMemcpyDeviceToDevice));
  launch_copy(d_b, d_c, floats);
  CUDA_CHECK(cudaMemcpy(dst.data(), d_c, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_a));
  CUDA_CHECK(cudaFree(d_b));
  CUDA_CHECK(cudaFree(d_c));
  return course::check_close("h2d_d2d_kernel_d2h_roundtrip", dst.data(), src.data(), floats, 0.0, 0.0);
}

// --8<-- [start:bench]
static void bench_all_paths(size_t floats, uint64_t seed) {
  const size_t bytes = floats * sizeof(float);
  const double b = static_cast<double>(bytes);
  // Two cases, so that "% of peer" compares device copies only with the device copy peer.
  char host_case[64], device_case[64];
  std::snprintf(host_case, sizeof(host_case), "host <-> device, %.0f MiB", b / 1048576.0);
  std::snprintf(device_case, sizeof(device_case), "device <-> device, %.0f MiB", b / 1048576.0);

  std::vector<float> pageable(floats);
  course::fill_uniform(pageable, seed);
  float* pinned = nullptr;  // page-locked: the copy engine can DMA straight from it
  CUDA_CHECK(cudaMallocHost(&pinned, bytes));
  std::memcpy(pinned, pageable.data(), bytes);
  float *d_a = nullptr, *d_b = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, bytes));
  CUDA_CHECK(cudaMalloc(&d_b, bytes));

  // Host<->device copies count the bytes once; device<->device copies read and write device
  // memory, so they count both (2 * bytes), the convention for comparing with memory bandwidth.
  const float h2d_pageable = course::time_kernel_ms(
      [&] { CUDA_CHECK(cudaMemcpy(d_a, pageable.data(), bytes, cudaMemcpyHostToDevice)); });
  const float h2d_pinned =
      course::time_kernel_ms([&] { CUDA_CHECK(cudaMemcpy(d_a, pinned, bytes, cudaMemcpyHostToDevice)); });
  const float d2h_pinned =
      course::time_kernel_ms([&] { CUDA_CHECK(cudaMemcpy(pinned, d_a, bytes, cudaMemcpyDeviceToHost)); });
  const float d2d_memcpy =
      course::time_kernel_ms([&] { CUDA_CHECK(cudaMemcpy(d_b, d_a, bytes, cudaMemcpyDeviceToDevice)); });
  const float d2d_kernel = course::time_kernel_ms([&] { launch_copy(d_a, d_b, floats); });

  course::print_bench(host_case, "host to device, pageable", h2d_pageable, b, 0);
  course::print_bench(host_case, "host to device, pinned", h2d_pinned, b, 0);
  course::print_bench(host_case, "device to host, pinned", d2h_pinned, b, 0);
  course::print_bench(device_case, "cudaMemcpy", d2d_memcpy, 2 * b, 0, /*peer=*/true);
  course::print_bench(device_case, "copy_kernel", d2d_kernel, 2 * b, 0);
  // --8<-- [end:bench]

  CUDA_CHECK(cudaFreeHost(pinned));
  CUDA_CHECK(cudaFree(d_a));
  CUDA_CHECK(cudaFree(d_b));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long floats = args.get_int("--floats", 1000003, 1, 1LL << 30);  // 4 GiB per buffer at most
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool bench = args.has("--bench");
  const long long bench_mib = args.get_int("--bench-mib", 256, 1, 4096);
  args.finish();
  if (!check_all_paths(static_cast<size_t>(floats), seed)) return course::kExitFail;
  if (bench) bench_all_paths(static_cast<size_t>(bench_mib) << 18, seed);
  return 0;
}
