// cluster_softmax.cu: row-wise softmax of rows of 64K to 256K floats, one thread block cluster per row.
//
// One block cannot hold such a row (256K floats are 1 MiB; a block has at most 227 KiB of shared
// memory and 64K registers), so the course's one-block kernel (softmax.cuh's softmax_block) reads
// the row twice from memory. Here a cluster of 8 or 16 blocks shares the row: each block keeps its
// slice in registers (one version keeps half of it in shared memory, so that two blocks fit per SM),
// the blocks exchange their maxima and sums through distributed shared memory (DSMEM), and every
// element is read once and written once. Each run first prints, per version, its registers and how
// many blocks and whole clusters of it fit on the GPU at once. Checked against the float64 reference
// on the adversarial rows of softmax_reference.cuh (masked, fully masked, NaN rows), timed against
// the one-block kernel and a cudaMemcpy of the same bytes in the same run; torch.softmax is timed on
// the same cases by cluster_softmax_torch.py.
//
// Taught in docs/memory-model/clusters.md. Needs compute capability 9.0 (clusters; waives on older GPUs).
// Build: nvcc -O3 -arch=native -o build/memory-model/cluster_softmax kernels/memory-model/cluster_softmax.cu
// Run:   ./build/memory-model/cluster_softmax --rows 24 --cols 65537   (checks every version that fits)
//        ./build/memory-model/cluster_softmax --bench                  (also times 64K, 128K, 256K rows)
//
// course: gpu
// course: run --rows 9 --cols 1001
// course: run --rows 24 --cols 65537
// course: run --rows 16 --cols 131072
// course: run --rows 16 --cols 262139
// course: run --rows 8 --cols 262144
// course: run --rows 24 --cols 65537 --plant zeros-small
// course: run --rows 8 --cols 262144 --plant zeros-small
// course: bench --bench
#include <cooperative_groups.h>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "softmax.cuh"            // softmax_base, softmax_inv_sum, block_allreduce, softmax_block
#include "softmax_reference.cuh"  // the float64 reference, the adversarial rows, the check

// --8<-- [start:cluster_reduce]
// Every thread gets the max (kMax) or sum over the cluster's blocks of one shared-memory float per
// block (`mine`, written by each block before a cluster.sync()). Each warp reads the value of block
// `lane` through DSMEM (map_shared_rank turns an address in this block's shared memory into the same
// variable in block `lane`'s), then a warp reduction combines them: no further barrier is needed.
#if __CUDA_ARCH__ >= 900
template <bool kMax>
__device__ inline float cluster_allreduce(const cooperative_groups::cluster_group& cluster, float* mine) {
  const int lane = threadIdx.x % 32;
  const float identity = kMax ? SOFTMAX_NEG_INF : 0.0f;
  const float v = lane < static_cast<int>(cluster.num_blocks()) ? *cluster.map_shared_rank(mine, lane) : identity;
  return kMax ? warp_max(v) : warp_add(v);
}
#endif
// --8<-- [end:cluster_reduce]

// --8<-- [start:kernel]
// Block `rank` of row blockIdx.y's cluster owns columns [begin, end), a slice of ceil(cols / blocks)
// rounded up to a multiple of 4 (so that float4 loads stay aligned when cols % 4 == 0). Thread t holds
// columns begin + t, begin + t + kThreads, ... (kRegs + kStashed of them; float4 k of thread t at
// begin / 4 + k * kThreads + t in the float4 version): the first kRegs in v[], the other kStashed in
// this block's dynamic shared memory (`stash`, element j of thread t at j * kThreads + t; only thread t
// reads it back, so no barrier guards it). Columns past `end` are -inf: they add 0.
template <int kThreads, int kRegs, int kStashed, bool kVec4>
__global__ void __launch_bounds__(kThreads) softmax_cluster(const float* __restrict__ x, float* __restrict__ y,
                                                            int cols) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  static_assert(kRegs % 4 == 0 && kStashed % 4 == 0, "the float4 version moves float4s");
  constexpr int kPerThread = kRegs + kStashed;
  extern __shared__ float4 stash4[];  // kStashed * kThreads floats (none when kStashed is 0)
  float* stash = reinterpret_cast<float*>(stash4);
  __shared__ float scratch[32];
  __shared__ float block_max, block_sum;  // this block's results, read by the whole cluster
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank()), blocks = static_cast<int>(cluster.num_blocks());
  const int t = static_cast<int>(threadIdx.x);
  const int slice = (course::ceil_div(cols, blocks) + 3) / 4 * 4;
  const int begin = min(cols, rank * slice), end = min(cols, begin + slice);
  const float* in = x + static_cast<long long>(blockIdx.y) * cols;
  float* out = y + static_cast<long long>(blockIdx.y) * cols;
  const float ninf = SOFTMAX_NEG_INF;

  // Read the slice once: into v[] and the stash, taking the maximum on the way (fmaxf skips a NaN;
  // the sum below catches it).
  float v[kRegs > 0 ? kRegs : 1];
  float m = ninf;
  if constexpr (kVec4) {
#pragma unroll
    for (int k = 0; k < kPerThread / 4; ++k) {
      const int c = begin + 4 * (k * kThreads + t);
      const float4 q = c < end ? *reinterpret_cast<const float4*>(in + c) : make_float4(ninf, ninf, ninf, ninf);
      if (k < kRegs / 4)
        v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
      else
        stash4[(k - kRegs / 4) * kThreads + t] = q;
      m = fmaxf(m, fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w)));
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = begin + k * kThreads + t;
      const float e = c < end ? in[c] : ninf;
      if (k < kRegs)
        v[k] = e;
      else
        stash[(k - kRegs) * kThreads + t] = e;
      m = fmaxf(m, e);
    }
  }

  // 1. The row's maximum: block-wide, then across the cluster through DSMEM.
  m = block_allreduce<true>(m, scratch);
  if (t == 0) block_max = m;
  cluster.sync();  // every block's block_max is written and visible to the cluster
  const float base = softmax_base(cluster_allreduce<true>(cluster, &block_max));

  // 2. The row's sum of exp(x - base), the same way (a second variable: a slower block may still be
  // reading block_max). -inf (masked or padding) gives 0; a NaN stays NaN and so does d. The stashed
  // values stay x: step 3 recomputes their exp rather than storing it back.
  float d = 0.0f;
#pragma unroll
  for (int k = 0; k < kRegs; ++k) {
    v[k] = expf(v[k] - base);
    d += v[k];
  }
#pragma unroll
  for (int j = 0; j < kStashed; ++j) d += expf(stash[j * kThreads + t] - base);
  d = block_allreduce<false>(d, scratch);
  if (t == 0) block_sum = d;
  cluster.sync();
  const float inv = softmax_inv_sum(cluster_allreduce<false>(cluster, &block_sum));

  // 3. Announce that this block is done reading the others' shared memory, write the output, and
  // only then wait: a block must not exit while another block may still read its block_sum.
  auto token = cluster.barrier_arrive();
  if constexpr (kVec4) {
#pragma unroll
    for (int k = 0; k < kPerThread / 4; ++k) {
      const int c = begin + 4 * (k * kThreads + t);
      if (c >= end) continue;
      float4 q;
      if (k < kRegs / 4) {
        q = make_float4(v[4 * k] * inv, v[4 * k + 1] * inv, v[4 * k + 2] * inv, v[4 * k + 3] * inv);
      } else {
        const float4 s = stash4[(k - kRegs / 4) * kThreads + t];
        q = make_float4(expf(s.x - base) * inv, expf(s.y - base) * inv, expf(s.z - base) * inv,
                        expf(s.w - base) * inv);
      }
      *reinterpret_cast<float4*>(out + c) = q;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = begin + k * kThreads + t;
      if (c < end) out[c] = (k < kRegs ? v[k] : expf(stash[(k - kRegs) * kThreads + t] - base)) * inv;
    }
  }
  cluster.barrier_wait(std::move(token));
#else
  (void)x, (void)y, (void)cols;  // never launched: main waives on GPUs older than 9.0
#endif
}
// --8<-- [end:kernel]

// --8<-- [start:launch]
using RowKernel = void (*)(const float*, float*, int);

struct Version {
  const char* name;
  const char* check_name;
  int cluster;      // blocks per row
  int threads;      // threads per block
  int regs;         // floats each thread holds in registers
  int stashed;      // floats each thread keeps in shared memory
  RowKernel scalar; // any cols
  RowKernel vec4;   // cols % 4 == 0
  int capacity() const { return cluster * threads * (regs + stashed); }
  size_t stash_bytes() const { return static_cast<size_t>(threads) * stashed * sizeof(float); }
};

#define CLUSTER_VERSION(name, check, blocks, threads, regs, stashed)                                     \
  Version {                                                                                              \
    name, check, blocks, threads, regs, stashed, softmax_cluster<threads, regs, stashed, false>,        \
        softmax_cluster<threads, regs, stashed, true>                                                    \
  }
static const Version kVersions[] = {
    CLUSTER_VERSION("cluster 8 x 512 threads x 16 floats", "softmax_cluster8_16", 8, 512, 16, 0),
    CLUSTER_VERSION("cluster 8 x 512 threads x 32 floats", "softmax_cluster8_32", 8, 512, 32, 0),
    CLUSTER_VERSION("cluster 16 x 512 threads x 16 floats", "softmax_cluster16_16", 16, 512, 16, 0),
    CLUSTER_VERSION("cluster 16 x 512 threads x 32 floats", "softmax_cluster16_32", 16, 512, 32, 0),
    // 256K floats in clusters of 8: twice the threads (one block per SM: 1024 x 64 registers fill
    // the register file), or 32 more floats per thread in shared memory (two blocks per SM).
    CLUSTER_VERSION("cluster 8 x 1024 threads x 32 floats", "softmax_cluster8_1024x32", 8, 1024, 32, 0),
    CLUSTER_VERSION("cluster 8 x 512 threads x 32 floats + 32 in shared memory", "softmax_cluster8_32_smem32", 8,
                    512, 32, 32),
};
#undef CLUSTER_VERSION

// The launch: a grid of (cluster, rows) blocks, grouped into clusters of (cluster, 1, 1) by a launch
// attribute. Clusters of more than 8 blocks are "non-portable": the kernel must opt in, as it must
// for more than 48 KiB of dynamic shared memory.
static cudaLaunchConfig_t cluster_config(const Version& v, int rows, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(v.cluster), static_cast<unsigned>(rows));
  config.blockDim = dim3(static_cast<unsigned>(v.threads));
  config.dynamicSmemBytes = v.stash_bytes();
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(v.cluster);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return config;
}

static RowKernel kernel_for(const Version& v, int cols) { return cols % 4 == 0 ? v.vec4 : v.scalar; }

// How many clusters of this shape fit on the GPU at once (0: the shape cannot run here).
static int active_clusters(const Version& v, int rows, int cols) {
  const RowKernel kernel = kernel_for(v, cols);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(v.stash_bytes())));
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t config = cluster_config(v, rows, &attr);
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  return clusters;
}

static void launch_cluster(const Version& v, const float* x, float* y, int rows, int cols) {
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t config = cluster_config(v, rows, &attr);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel_for(v, cols), x, y, cols));
}

// The course's one-block kernel (softmax.cuh, version 4): one block of 256 threads per row, two passes.
static void launch_one_block(const float* x, float* y, int rows, int cols) {
  softmax_block<<<rows, 256>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

// --8<-- [start:occupancy]
// What limits each version: blocks of its kernel that fit on one SM (registers, shared memory,
// threads), and how many whole clusters the GPU can run at once. A cluster's blocks must all be
// resident on the SMs of one GPC, so clusters * blocks can fall short of SMs * blocks per SM.
static void print_occupancy(int cols) {
  cudaDeviceProp prop{};
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("occupancy on %s, %d SMs (%s kernels):\n", prop.name, prop.multiProcessorCount,
              cols % 4 == 0 ? "float4" : "scalar");
  for (const Version& v : kVersions) {
    const int clusters = active_clusters(v, 1, cols);  // sets the kernel's attributes as well
    cudaFuncAttributes attrs{};
    CUDA_CHECK(cudaFuncGetAttributes(&attrs, kernel_for(v, cols)));
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(v, cols), v.threads,
                                                             v.stash_bytes()));
    std::printf("  %s: %d registers/thread, %zu bytes local (spills), %zu KiB stash/block; %d blocks/SM "
                "(%d on the GPU); %d clusters of %d at once = %d blocks\n",
                v.name, attrs.numRegs, attrs.localSizeBytes, v.stash_bytes() / 1024, per_sm,
                per_sm * prop.multiProcessorCount, clusters, v.cluster, clusters * v.cluster);
  }
}
// --8<-- [end:occupancy]

// The versions that can run this shape: the row fits in the cluster's registers, and the GPU can
// schedule the cluster (a 16-block cluster needs 16 SMs of one GPC free at once).
static std::vector<Version> runnable(int rows, int cols) {
  std::vector<Version> out;
  for (const Version& v : kVersions) {
    if (cols > v.capacity()) {
      std::printf("skip %s: holds at most %d columns\n", v.name, v.capacity());
    } else if (active_clusters(v, rows, cols) == 0) {
      std::printf("skip %s: this GPU cannot schedule the cluster\n", v.name);
    } else {
      out.push_back(v);
    }
  }
  return out;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long rows = args.get_int("--rows", 24, 1, 65535);  // gridDim.y is at most 65535
  int max_cols = 0;  // the longest row a version holds
  for (const Version& v : kVersions) max_cols = std::max(max_cols, v.capacity());
  const long long cols = args.get_int("--cols", 65537, 1, max_cols);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (rows * cols > (1LL << 26)) {  // the host keeps a float64 reference of the checked matrix
    std::fprintf(stderr, "error: --rows x --cols must be at most 2^26 elements (got %lld x %lld)\n", rows, cols);
    return course::kExitFail;
  }
  course::require_compute_capability(9, 0, "thread block clusters and distributed shared memory");
  print_occupancy(static_cast<int>(cols));

  // Checked run: every version that fits, and the one-block kernel, on the adversarial rows.
  const int R = static_cast<int>(rows), C = static_cast<int>(cols);
  bool ok = true;
  {  // the checked matrix is freed here, before the benchmark allocates its own
    const SoftmaxProblem prob(R, C, seed);
    const std::vector<double>& want = prob.want;
    float *const d_x = prob.d_x, *const d_y = prob.d_y;
    ok = check_softmax("softmax_one_block", [&](float* y) { launch_one_block(d_x, y, R, C); }, d_y, R, C, want);
    for (const Version& v : runnable(R, C))
      ok = check_softmax(v.check_name, [&](float* y) { launch_cluster(v, d_x, y, R, C); }, d_y, R, C, want) && ok;
    if (plant)  // the check is the same for every version: the one-block kernel is planted with the fault
      ok = check_softmax_planted([&](float* y) { launch_one_block(d_x, y, R, C); }, d_y, R, C, want) && ok;
  }

  if (bench && ok) {
    // --8<-- [start:bench]
    // 256 MiB in and out per case: random rows; each version's output is checked on its first
    // kSampleRows rows against the float64 reference before it is timed.
    constexpr int kSampleRows = 4;
    const int shapes[][2] = {{1024, 65536}, {512, 131072}, {256, 262144}};
    for (const auto& shape : shapes) {
      const int BR = shape[0], BC = shape[1];
      const size_t bn = static_cast<size_t>(BR) * BC, bbytes = bn * sizeof(float);
      std::vector<float> bx(bn), sample(static_cast<size_t>(kSampleRows) * BC);
      std::vector<double> bwant(static_cast<size_t>(kSampleRows) * BC);
      course::fill_uniform(bx, seed + 1, -8.0f, 8.0f);
      softmax_cpu(std::vector<float>(bx.begin(), bx.begin() + kSampleRows * static_cast<size_t>(BC)), bwant,
                  kSampleRows, BC);
      float *bx_d = nullptr, *by_d = nullptr;
      CUDA_CHECK(cudaMalloc(&bx_d, bbytes));
      CUDA_CHECK(cudaMalloc(&by_d, bbytes));
      CUDA_CHECK(cudaMemcpy(bx_d, bx.data(), bbytes, cudaMemcpyHostToDevice));
      char case_name[64];
      std::snprintf(case_name, sizeof(case_name), "softmax %d x %d fp32", BR, BC);
      auto time_and_check = [&](const char* impl, const char* check_name, auto&& launch) {
        course::poison(by_d, bbytes);
        launch();
        CUDA_CHECK(cudaMemcpy(sample.data(), by_d, sample.size() * sizeof(float), cudaMemcpyDeviceToHost));
        char name[96];
        std::snprintf(name, sizeof(name), "%s_bench_%dx%d_sample", check_name, BR, BC);
        ok = course::check_close(name, sample.data(), bwant.data(), sample.size(), kSoftmaxRtol, kSoftmaxAtol) && ok;
        course::print_bench(case_name, impl, course::time_kernel_ms(launch), 2.0 * bbytes, 0);
      };
      const float copy_ms = course::time_kernel_ms(
          [&] { CUDA_CHECK(cudaMemcpy(by_d, bx_d, bbytes, cudaMemcpyDeviceToDevice)); });
      course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * bbytes, 0, /*peer=*/true);
      time_and_check("4 block per row, online (softmax.cuh), fp32", "softmax_one_block",
                     [&] { launch_one_block(bx_d, by_d, BR, BC); });
      for (const Version& v : runnable(BR, BC)) {
        char impl[96];
        std::snprintf(impl, sizeof(impl), "%s, fp32", v.name);
        time_and_check(impl, v.check_name, [&] { launch_cluster(v, bx_d, by_d, BR, BC); });
      }
      CUDA_CHECK(cudaFree(bx_d));
      CUDA_CHECK(cudaFree(by_d));
    }
    // --8<-- [end:bench]
  }
  return ok ? 0 : course::kExitFail;
}
