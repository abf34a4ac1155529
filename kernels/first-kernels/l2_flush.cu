// l2_flush.cu: what the L2 flush before each timed repeat must leave behind, measured three ways.
//   no flush          each repeat finds what the previous one left in L2 (a warm cache)
//   memset flush      a buffer twice the size of L2 is written: L2 is left full of dirty lines
//   memset+read flush the same buffer is then read: L2 is left full of clean lines
// Under each flush it times a sum that only reads its N bytes (it writes one float per block) and a
// cudaMemcpy that moves N bytes (reads N/2, writes N/2), at N = 16, 32, 64 and 256 MiB.
//
// Taught in docs/first-kernels/timing.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/l2_flush kernels/first-kernels/l2_flush.cu
// Run:   ./build/first-kernels/l2_flush --n 1000003      (checks the sum and the copy)
//        ./build/first-kernels/l2_flush --bench          (also checks and times both at every size and flush)
//
// course: gpu
// course: run --n 1000003 --seed 11
// course: run --n 1 --seed 12
// course: run --n 4099 --seed 13
// course: bench --bench
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kThreads = 256;
constexpr int kRepeats = 20;

// Random nonzero integers from -8 to 8 as floats: every partial sum below is an integer smaller than 2^24
// in magnitude, which a float holds exactly, so the GPU's sums equal the float64 sums exactly in any
// order, and an element read twice or not at all changes them.
static std::vector<float> random_integers(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(1, 8);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>((rng() & 1) ? dist(rng) : -dist(rng));
  return x;
}

// --8<-- [start:sum]
// Each block sums a grid-stride share of x with 16-byte loads and writes one float: the kernel reads
// n * 4 bytes and writes a few kilobytes, so for the cache it is a read-only kernel.
__global__ void block_sums(const float* __restrict__ x, size_t n, float* __restrict__ partial) {
  const size_t n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);  // cudaMalloc memory is 256-byte aligned
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  float s = 0.0f;
  for (size_t i = first; i < n4; i += stride) {
    const float4 v = x4[i];
    s += (v.x + v.y) + (v.z + v.w);
  }
  if (first < n - 4 * n4) s += x[4 * n4 + first];  // the last n % 4 floats, in block 0
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  __shared__ float warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
  }
}
// --8<-- [end:sum]

// Eight blocks per SM, and enough blocks that none sums much more than 2^20 floats: eight times that
// stays below 2^24, so the sums of the integers above are exact.
static unsigned blocks_for(size_t n) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t wanted = std::max<size_t>(8 * static_cast<size_t>(sms), course::ceil_div<size_t>(n, 1 << 20));
  return static_cast<unsigned>(std::min(wanted, course::ceil_div<size_t>(std::max<size_t>(n / 4, 1), kThreads)));
}

static void launch_sum(const float* x, size_t n, float* partial, unsigned blocks) {
  block_sums<<<blocks, kThreads>>>(x, n, partial);
  CUDA_CHECK_LAUNCH();
}

// The float64 reference of each block's sum: float4 i belongs to block (i / kThreads) % blocks, and the
// last n % 4 floats to block 0.
static std::vector<double> block_sums_cpu(const std::vector<float>& x, unsigned blocks) {
  std::vector<double> want(blocks, 0.0);
  const size_t n4 = x.size() / 4;
  for (size_t i = 0; i < n4; ++i)
    for (size_t k = 0; k < 4; ++k) want[(i / kThreads) % blocks] += x[4 * i + k];
  for (size_t j = 4 * n4; j < x.size(); ++j) want[0] += x[j];
  return want;
}

// Sums x on the GPU (partial poisoned first, so a block that writes nothing fails) and compares every
// block's sum with the float64 reference, exactly: the sums of these integers have no rounding error.
static bool check_sum(const char* name, const float* d_x, const std::vector<float>& x, float* d_partial,
                      unsigned blocks) {
  course::poison(d_partial, blocks * sizeof(float));
  launch_sum(d_x, x.size(), d_partial, blocks);
  const std::vector<float> got = course::to_host(d_partial, blocks);
  const std::vector<double> want = block_sums_cpu(x, blocks);
  return course::check_close(name, got.data(), want.data(), blocks, 0.0, 0.0);
}

enum class Flush { kNone, kMemset, kMemsetRead };

struct FlushBuffer {
  float* data;         // twice the size of L2
  size_t floats;
  float* partial;      // where block_sums writes what it read from data
  unsigned blocks;
};

// --8<-- [start:flush]
// Run before each timed repeat. The memset evicts whatever the timed work left in L2, but leaves L2 full
// of the memset's own lines, dirty: changed in L2 and not yet in DRAM. A line can only be reused once it
// has been written back, so the timed kernel's misses would pay for writing the memset's data to DRAM.
// Reading the buffer after writing it makes those write-backs happen here, before the timer starts: the
// lines the read brings in are clean, and a clean line is dropped without writing anything.
static void flush_l2(Flush how, const FlushBuffer& buffer, int repeat) {
  if (how == Flush::kNone) return;
  CUDA_CHECK(cudaMemsetAsync(buffer.data, repeat & 0xFF, buffer.floats * sizeof(float)));
  if (how == Flush::kMemsetRead) launch_sum(buffer.data, buffer.floats, buffer.partial, buffer.blocks);
}
// --8<-- [end:flush]

// Keeps the GPU busy for `cycles` clock cycles, so that the host has queued the start event and the work
// before the GPU reaches them: the events then time the work, not the time the host takes to launch it.
__global__ void gpu_wait(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// --8<-- [start:timer]
// course::time_kernel_ms with the flush as a parameter: warm-up, then for each repeat the flush, a wait on
// the GPU, and the work alone between two events; the median.
template <typename F>
static float time_ms(F&& work, Flush how, const FlushBuffer& buffer) {
  for (int i = 0; i < 3; ++i) work();
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times(kRepeats);
  for (int i = 0; i < kRepeats; ++i) {
    flush_l2(how, buffer, i);
    gpu_wait<<<1, 1>>>(100000);  // about 50 microseconds at 2 GHz
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(start));
    work();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&times[i], start, stop));
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(times.begin(), times.begin() + kRepeats / 2, times.end());
  return times[kRepeats / 2];
}
// --8<-- [end:timer]

// Checks the sum at `mib` MiB on fresh inputs, then times it and a copy of the same bytes under each flush.
static bool bench(long long mib, uint64_t seed, const FlushBuffer& buffer) {
  const size_t bytes = static_cast<size_t>(mib) << 20, n = bytes / sizeof(float);
  const std::vector<float> x = random_integers(n, seed);
  float* d_x = course::to_device(x);
  float* d_copy = course::device_alloc<float>(n / 2);
  const unsigned blocks = blocks_for(n);
  float* d_partial = course::device_alloc<float>(blocks);
  char name[32], case_name[32];
  std::snprintf(name, sizeof(name), "sum_%lldMiB", mib);
  const bool ok = check_sum(name, d_x, x, d_partial, blocks);
  if (ok) {
    std::snprintf(case_name, sizeof(case_name), "%lld MiB", mib);
    const struct {
      Flush how;
      const char* what;
    } flushes[] = {{Flush::kNone, "no flush"}, {Flush::kMemset, "memset flush"},
                   {Flush::kMemsetRead, "memset+read flush"}};
    for (const auto& f : flushes) {
      const float read_ms = time_ms([&] { launch_sum(d_x, n, d_partial, blocks); }, f.how, buffer);
      const float copy_ms = time_ms(
          [&] { CUDA_CHECK(cudaMemcpyAsync(d_copy, d_x, bytes / 2, cudaMemcpyDeviceToDevice)); }, f.how, buffer);
      const std::string read_impl = std::string("read, ") + f.what, copy_impl = std::string("copy, ") + f.what;
      course::print_bench(case_name, read_impl.c_str(), read_ms, static_cast<double>(bytes), static_cast<double>(n),
                          false, {{"mib", mib}});
      course::print_bench(case_name, copy_impl.c_str(), copy_ms, static_cast<double>(bytes), 0.0, false,
                          {{"mib", mib}});
    }
  }
  course::device_free({d_x, d_copy, d_partial});
  return ok;
}

// The copy the benchmark times, checked bit for bit on the same inputs as the sum.
static bool check_copy(const float* d_x, size_t n) {
  float* d_copy = course::device_alloc<float>(n);
  course::poison(d_copy, n * sizeof(float));
  CUDA_CHECK(cudaMemcpyAsync(d_copy, d_x, n * sizeof(float), cudaMemcpyDeviceToDevice));
  const std::vector<float> got = course::to_host(d_copy, n), want = course::to_host(d_x, n);
  course::device_free({d_copy});
  return course::check_close("copy", got.data(), want.data(), n, 0.0, 0.0);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long n = args.get_int("--n", 1000003, 1, 1LL << 28);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  args.finish();  // a typo is an error (exit 1) before any GPU work

  const std::vector<float> x = random_integers(static_cast<size_t>(n), seed);
  float* d_x = course::to_device(x);
  const unsigned blocks = blocks_for(x.size());
  float* d_partial = course::device_alloc<float>(blocks);
  bool ok = check_sum("sum", d_x, x, d_partial, blocks);
  ok = check_copy(d_x, x.size()) && ok;
  course::device_free({d_x, d_partial});

  if (ok && run_bench) {
    int device = 0, l2_bytes = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    FlushBuffer buffer{};
    buffer.floats = 2 * static_cast<size_t>(l2_bytes) / sizeof(float);
    buffer.data = course::device_alloc<float>(buffer.floats);
    buffer.blocks = blocks_for(buffer.floats);
    buffer.partial = course::device_alloc<float>(buffer.blocks);
    for (long long mib : {16, 32, 64, 256}) ok = bench(mib, seed + static_cast<uint64_t>(mib), buffer) && ok;
    course::device_free({buffer.data, buffer.partial});
  }
  return ok ? 0 : course::kExitFail;
}
