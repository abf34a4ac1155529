// coop_reduction.cu: the sum of n floats, the chapter's chunked reduction rewritten with cooperative
// groups: warp tiles (thread_block_tile<32> and cg::reduce) instead of hand-written shuffles, and a
// grid-wide barrier (grid.sync(), legal only in a cooperative launch) instead of a second launch.
//
// Taught in docs/memory-model/cooperative-groups.md; the kernels it is measured against are in
// reduction.cuh (docs/memory-model/reduction.md). Checked against a float64 CPU sum; timed against the
// two-pass version 6, the one-launch version 7 (last block adds the partials), CUB and a copy of the
// same bytes, on a large array (bandwidth-bound) and a small one (where a launch's cost shows).
// Build: nvcc -O3 -arch=native -o build/memory-model/coop_reduction kernels/memory-model/coop_reduction.cu
// Run:   ./build/memory-model/coop_reduction --n 1000003
//        ./build/memory-model/coop_reduction --bench
//        ./build/memory-model/coop_reduction --n 1000003 --plant dropped-block   (the check sees a lost block)
//
// course: gpu
// course: run --n 1
// course: run --n 4099
// course: run --n 1000003
// course: run --n 10000019
// course: run --n 1000003 --plant dropped-block
// course: bench --bench
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <cub/cub.cuh>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "reduction.cuh"  // versions 6 and 7 and reduce_partials, the kernels this one is measured against
#include "reduction_check.cuh"  // the tolerance and the planted lost block

namespace cg = cooperative_groups;

// --8<-- [start:reference]
// The sum in float64, and the sum of magnitudes that bounds how much float rounding can move it.
static void sum_cpu(const std::vector<float>& x, double* sum, double* abs_sum) {
  double s = 0.0, a = 0.0;
  for (float v : x) {
    s += v;
    a += std::fabs(v);
  }
  *sum = s;
  *abs_sum = a;
}
// --8<-- [end:reference]

// --8<-- [start:block_sum]
// block_sum of reduction.cuh, said with groups: the block splits into warp tiles, each tile reduces
// with cg::reduce (shuffles underneath), tile leaders meet in shared memory, and tile 0 reduces those.
// meta_group_rank() is the tile's index in the block, meta_group_size() the number of tiles.
__device__ inline float cg_block_sum(const cg::thread_block& block, float v) {
  __shared__ float tile_sums[32];
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  v = cg::reduce(warp, v, cg::plus<float>());
  if (warp.thread_rank() == 0) tile_sums[warp.meta_group_rank()] = v;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    v = warp.thread_rank() < warp.meta_group_size() ? tile_sums[warp.thread_rank()] : 0.0f;
    v = cg::reduce(warp, v, cg::plus<float>());
  }
  return v;  // valid in thread 0
}
// --8<-- [end:block_sum]

// --8<-- [start:kernel]
// Version 6's chunks (block b sums one contiguous chunk, four float4 loads in flight per thread),
// then grid.sync(): every block's partial is written and visible to every thread of the grid, and
// block 0 adds them in block order (the same result on every run). One launch, no counter, no fence
// to get right; the price is the cooperative launch's limit: every block must be resident at once.
__global__ void reduce_grid_sync(const float* __restrict__ in, float* partials, float* out, long long n) {
  const cg::grid_group grid = cg::this_grid();
  const cg::thread_block block = cg::this_thread_block();
  constexpr int kUnroll = 4;
  const long long n4 = n / 4, threads = block.size(), blocks = grid.num_blocks();
  const long long b = block.group_index().x, t = block.thread_rank();
  const long long per_block = (n4 + blocks - 1) / blocks;
  const long long chunk = (per_block + threads - 1) / threads * threads;
  const long long begin = b * chunk, end = begin + chunk < n4 ? begin + chunk : n4;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float v[kUnroll] = {};
  long long i = begin + t;
  for (; i + (kUnroll - 1) * threads < end; i += kUnroll * threads) {
    float4 q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) q[u] = in4[i + u * threads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] += (q[u].x + q[u].y) + (q[u].z + q[u].w);
  }
  for (; i < end; i += threads) {
    const float4 q = in4[i];
    v[0] += (q.x + q.y) + (q.z + q.w);
  }
  for (long long j = 4 * n4 + b * threads + t; j < n; j += blocks * threads) v[0] += in[j];  // n % 4 leftovers
  const float total = cg_block_sum(block, (v[0] + v[1]) + (v[2] + v[3]));
  if (t == 0) partials[b] = total;

  grid.sync();  // all partials written; after it, every block sees them
  if (b != 0) return;
  float s = 0.0f;
  for (long long k = t; k < blocks; k += threads) s += partials[k];
  s = cg_block_sum(block, s);
  if (t == 0) *out = s;
}
// --8<-- [end:kernel]

// --8<-- [start:launch]
// The cooperative launch refuses a grid larger than what fits on the GPU at once
// (cudaErrorCooperativeLaunchTooLarge): ask the occupancy calculator how many blocks of this kernel
// fit on one SM, times the SMs.
static int max_coresident_blocks(int threads) {
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reduce_grid_sync, threads, 0));
  return per_sm * sms;
}

static void launch_grid_sync(const float* in, float* partials, float* out, long long n, int blocks) {
  void* args[] = {const_cast<float**>(&in), &partials, &out, &n};
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(reduce_grid_sync), dim3(blocks), dim3(kGridThreads),
                                         args, 0, nullptr));
}
// --8<-- [end:launch]

// The same grid as reduction.cu's versions 6 and 7 (at most four blocks of 512 threads per SM, no
// more than the array needs), capped by what a cooperative launch allows.
static int grid_blocks(long long n, int max_blocks) {
  const long long wanted = course::ceil_div<long long>(course::ceil_div<long long>(n, 4), kGridThreads);
  return static_cast<int>(std::max<long long>(1, std::min<long long>(wanted, max_blocks)));
}

enum class Kind { kTwoPass, kFused, kGridSync, kCub };
struct Version {
  const char* name;
  const char* check_name;
  Kind kind;
};
static const Version kVersions[] = {
    {"6 chunks, two launches (reduction.cuh)", "sum_two_pass", Kind::kTwoPass},
    {"7 chunks, one launch, last block adds (reduction.cuh)", "sum_last_block", Kind::kFused},
    {"cooperative groups, one launch, grid.sync()", "sum_grid_sync", Kind::kGridSync},
    {"CUB DeviceReduce::Sum", "sum_cub", Kind::kCub},
};

struct Workspace {
  float* partials = nullptr;
  unsigned int* blocks_done = nullptr;  // version 7's counter, zero between launches
  int blocks = 0, coop_blocks = 0;
  void* cub_temp = nullptr;
  size_t cub_bytes = 0;
};

static void launch(const Version& v, const float* in, float* out, long long n, Workspace& ws) {
  switch (v.kind) {
    case Kind::kTwoPass:
      reduce_chunks_x4<<<ws.blocks, kGridThreads>>>(in, ws.partials, n);
      CUDA_CHECK_LAUNCH();
      reduce_partials<<<1, kGridThreads>>>(ws.partials, out, ws.blocks);
      break;
    case Kind::kFused:
      reduce_chunks_x4_fused<<<ws.blocks, kGridThreads>>>(in, ws.partials, ws.blocks_done, out, n);
      break;
    case Kind::kGridSync:
      launch_grid_sync(in, ws.partials, out, n, ws.coop_blocks);
      break;
    case Kind::kCub:
      CUDA_CHECK(cub::DeviceReduce::Sum(ws.cub_temp, ws.cub_bytes, in, out, static_cast<int64_t>(n)));
      break;
  }
  CUDA_CHECK_LAUNCH();
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long n_arg = args.get_int("--n", 1000003, 1, 1LL << 30);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool plant_drop = plant_dropped_block_requested(args);
  args.finish();
  int device = 0, cooperative = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (!cooperative) {
    std::printf("WAIVED this GPU does not support cooperative launches (cudaDevAttrCooperativeLaunch is 0)\n");
    return course::kExitWaived;
  }
  const int coop_max = max_coresident_blocks(kGridThreads);
  std::printf("a cooperative launch of reduce_grid_sync may have at most %d blocks of %d threads here\n", coop_max,
              kGridThreads);

  // Checked on --n, and in the benchmark on each timed size as well.
  const long long bench_sizes[] = {1LL << 20, 1LL << 28};
  std::vector<long long> sizes{n_arg};
  if (bench) sizes.insert(sizes.end(), std::begin(bench_sizes), std::end(bench_sizes));
  Workspace ws;
  const int max_blocks = 4 * sms;
  CUDA_CHECK(cudaMalloc(&ws.partials, static_cast<size_t>(std::max(max_blocks, coop_max)) * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&ws.blocks_done, sizeof(unsigned int)));
  CUDA_CHECK(cudaMemset(ws.blocks_done, 0, sizeof(unsigned int)));
  bool ok = true;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const long long n = sizes[s];
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::vector<float> h_in(static_cast<size_t>(n));
    course::fill_uniform(h_in, seed + s);
    double want = 0.0, abs_sum = 0.0;
    sum_cpu(h_in, &want, &abs_sum);
    const SumReference ref{want, abs_sum, running_sums_norm(h_in)};
    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));
    ws.blocks = grid_blocks(n, max_blocks);
    ws.coop_blocks = grid_blocks(n, std::min(max_blocks, coop_max));
    ws.cub_bytes = 0;
    CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, ws.cub_bytes, d_in, d_out, static_cast<int64_t>(n)));
    CUDA_CHECK(cudaMalloc(&ws.cub_temp, ws.cub_bytes));
    for (const Version& v : kVersions) {
      course::poison(d_out, sizeof(float));
      launch(v, d_in, d_out, n, ws);
      float got = 0.0f;
      CUDA_CHECK(cudaMemcpy(&got, d_out, sizeof(float), cudaMemcpyDeviceToHost));
      char name[96];
      std::snprintf(name, sizeof(name), "%s_n%lld", v.check_name, n);
      // The tolerance of reduction_check.cuh, from the longest chain of additions of this version.
      const long long chain = v.kind == Kind::kCub        ? chain_any_order(n)
                              : v.kind == Kind::kGridSync ? chain_grid(n, ws.coop_blocks)
                                                          : chain_grid(n, ws.blocks);
      ok = check_sum(name, got, ref, chain) && ok;
      if (plant_drop && s == 0 && v.kind == Kind::kGridSync)  // its blocks read reduce_chunks_body's chunks
        ok = check_dropped_block(name, got, ref, chain, h_in, ws.coop_blocks) && ok;
    }
    if (bench && s > 0 && ok) {
      // --8<-- [start:bench]
      char case_name[64];
      std::snprintf(case_name, sizeof(case_name), "sum of %lld fp32 (%.0f MiB)", n, bytes / 1048576.0);
      float* scratch = nullptr;  // the copy peer: n * 2 bytes read and n * 2 written, as reduction.cu
      CUDA_CHECK(cudaMalloc(&scratch, bytes / 2));
      const float copy_ms = course::time_kernel_ms(
          [&] { CUDA_CHECK(cudaMemcpy(scratch, d_in, bytes / 2, cudaMemcpyDeviceToDevice)); });
      course::print_bench(case_name, "cudaMemcpy (copy, same bytes moved)", copy_ms, static_cast<double>(bytes), 0,
                          /*peer=*/true);
      for (const Version& v : kVersions) {
        const float ms = course::time_kernel_ms([&] { launch(v, d_in, d_out, n, ws); });
        course::print_bench(case_name, v.name, ms, static_cast<double>(bytes), static_cast<double>(n));
      }
      CUDA_CHECK(cudaFree(scratch));
      // --8<-- [end:bench]
    }
    CUDA_CHECK(cudaFree(ws.cub_temp));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
  }
  CUDA_CHECK(cudaFree(ws.partials));
  CUDA_CHECK(cudaFree(ws.blocks_done));
  return ok ? 0 : course::kExitFail;
}
