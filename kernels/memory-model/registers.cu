// registers.cu: a kernel that needs many registers, compiled with and without a register cap, to
// show spills (registers moved to local memory) and what registers do to occupancy.
//
// Taught in docs/memory-model/registers.md. Each thread reads kK = 48 values x[k], keeps them all
// in registers, and computes the quadratic form sum_j x[j] * sum_k W[j][k] x[k], with the circulant
// weights W[j][k] = w[(j + k) mod kK] in constant memory (all threads read the same weight at the
// same time: constant memory's broadcast case).
// Build: nvcc -O3 -arch=native -o build/memory-model/registers kernels/memory-model/registers.cu
// See spills: nvcc -O3 -arch=sm_90 -c -Xptxas -v -o /dev/null kernels/memory-model/registers.cu
// Run:   ./build/memory-model/registers --n 100003    (checks both kernels, prints their occupancy)
//        ./build/memory-model/registers --bench       (also times them)
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

constexpr int kK = 48;          // values per thread, all live at once
constexpr int kThreads = 256;

// --8<-- [start:kernel]
__constant__ float c_weights[kK];  // 64 KiB of constant memory in all; cached, broadcast to a warp

template <int K>
__device__ float quadratic_form(const float* __restrict__ x, long long n, long long i) {
  float v[K];
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = x[k * n + i];  // coalesced: thread i reads column i
  float result = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    float row = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) row += c_weights[(j + k) % K] * v[k];  // needs all K values
    result += v[j] * row;
  }
  return result;
}

// As many registers as the compiler wants (up to 255 per thread).
__global__ void quadratic(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = quadratic_form<kK>(x, n, i);
}

// Ask for 8 resident blocks of 256 threads per SM: 65536 registers / 2048 threads = 32 per thread.
// 48 live values do not fit in 32 registers, so the compiler spills some to local memory. The request
// must fit the SM (ptxas rejects more): 2,048 threads on compute capability 8.0, 9.0 and 10.x, 1,536
// on 8.6, 8.7, 8.9, 11.0 and 12.x, 1,024 on 7.5, where fewer blocks leave more registers each.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 900 || \
    __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1100
constexpr int kCappedBlocks = 8;
#elif __CUDA_ARCH__ < 800
constexpr int kCappedBlocks = 4;
#else
constexpr int kCappedBlocks = 6;
#endif
__global__ void __launch_bounds__(kThreads, kCappedBlocks) quadratic_capped(const float* __restrict__ x,
                                                                float* __restrict__ out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = quadratic_form<kK>(x, n, i);
}
// --8<-- [end:kernel]

static double quadratic_cpu(const std::vector<float>& x, const std::vector<float>& w, long long n, long long i) {
  double result = 0.0;
  for (int j = 0; j < kK; ++j) {
    double row = 0.0;
    for (int k = 0; k < kK; ++k) row += (double)w[(j + k) % kK] * x[k * n + i];
    result += (double)x[j * n + i] * row;
  }
  return result;
}

using Kernel = void (*)(const float*, float*, long long);

// --8<-- [start:occupancy]
// What the compiler decided (registers, local memory) and what that allows per SM.
static void report_occupancy(const char* name, Kernel kernel, size_t dynamic_smem) {
  int device = 0, max_threads_per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int blocks_per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, kThreads, dynamic_smem));
  std::printf("%-40s %3d registers/thread, %4zu bytes local/thread, %2d blocks of %d per SM = %3.0f%% occupancy\n",
              name, attr.numRegs, attr.localSizeBytes, blocks_per_sm, kThreads,
              100.0 * blocks_per_sm * kThreads / max_threads_per_sm);
}
// --8<-- [end:occupancy]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long n = args.get_int("--n", bench ? (1LL << 20) : 100003, 1, 1LL << 24);  // 48 floats each
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  report_occupancy("quadratic", quadratic, 0);
  report_occupancy("quadratic_capped (launch bounds)", quadratic_capped, 0);
  // Above 48 KiB of dynamic shared memory a kernel must opt in, once, before it is launched.
  CUDA_CHECK(cudaFuncSetAttribute(quadratic, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
  report_occupancy("quadratic + 100 KiB dynamic shared memory", quadratic, 100 * 1024);

  std::vector<float> h_x(static_cast<size_t>(kK * n)), h_w(kK), got(static_cast<size_t>(n));
  course::fill_uniform(h_x, seed);
  course::fill_uniform(h_w, seed + 1);
  std::vector<double> want(static_cast<size_t>(n));
  for (long long i = 0; i < n; ++i) want[i] = quadratic_cpu(h_x, h_w, n, i);
  float *d_x = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, h_x.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), h_x.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpyToSymbol(c_weights, h_w.data(), kK * sizeof(float)));

  const unsigned blocks = static_cast<unsigned>(course::ceil_div<long long>(n, kThreads));
  bool ok = true;
  const Kernel kernels[] = {quadratic, quadratic_capped};
  const char* names[] = {"quadratic", "quadratic_capped"};
  for (int v = 0; v < 2; ++v) {
    course::poison(d_out, n * sizeof(float));
    kernels[v]<<<blocks, kThreads>>>(d_x, d_out, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    ok = course::check_close(names[v], got.data(), want.data(), static_cast<size_t>(n), 1e-4, 1e-3) && ok;
  }

  if (bench && ok) {
    char case_name[64];
    std::snprintf(case_name, sizeof(case_name), "quadratic form, %d values per thread, n = %lld", kK, n);
    const double bytes = (kK + 1.0) * n * sizeof(float), flops = (2.0 * kK * kK + 2.0 * kK) * n;
    for (int v = 0; v < 2; ++v) {
      const float ms = course::time_kernel_ms([&] {
        kernels[v]<<<blocks, kThreads>>>(d_x, d_out, n);
        CUDA_CHECK_LAUNCH();
      });
      course::print_bench(case_name, names[v], ms, bytes, flops);
    }
  }
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
