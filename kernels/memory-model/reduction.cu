// reduction.cu: the sum of n floats, seven versions checked against a float64 CPU sum and timed
// against CUB (cub::DeviceReduce::Sum) and against a copy that moves the same number of bytes.
//
// Taught in docs/memory-model/reduction.md (kernels in reduction.cuh); the --plant-race run in
// docs/memory-model/synchronisation.md. A sum reads n * 4 bytes and writes nothing worth counting,
// so the device's read bandwidth bounds it. The peer is cudaMemcpy of n * 2 bytes: it reads
// n * 2 and writes n * 2, the same n * 4 bytes moved, so "% of peer" is "% of copy bandwidth".
// Build: nvcc -O3 -arch=native -o build/memory-model/reduction kernels/memory-model/reduction.cu
// Run:   ./build/memory-model/reduction --n 1000003               (checks every version and CUB)
//        ./build/memory-model/reduction --bench                   (also times them on 2^28 floats)
//        ./build/memory-model/reduction --n 4099 --plant-race     (version 2 without its barrier)
//        ./build/memory-model/reduction --plant dropped-block     (evidence the check sees a lost block)
//
// course: gpu
// course: run --n 1
// course: run --n 4099
// course: run --n 1000003
// course: run --n 1000003 --plant dropped-block
// course: bench --bench
#include <cub/cub.cuh>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "reduction.cuh"
#include "reduction_check.cuh"

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

enum class Kind { kAtomic, kGrid, kFused, kCub };

struct Version {
  const char* name;
  const char* check_name;
  void (*kernel)(const float*, float*, long long);
  Kind kind;
};

static const Version kVersions[] = {
    {"1 atomic per element", "sum_atomic", reduce_atomic, Kind::kAtomic},
    {"2 shared-memory tree", "sum_shared", reduce_shared, Kind::kAtomic},
    {"3 warp shuffles", "sum_warp", reduce_warp, Kind::kAtomic},
    {"4 float4, grid-stride", "sum_vec4", reduce_vec4, Kind::kGrid},
    {"5 float4 x4, grid-stride", "sum_vec4_x4", reduce_vec4_x4, Kind::kGrid},
    {"6 contiguous chunks, 4 loads", "sum_chunks_x4", reduce_chunks_x4, Kind::kGrid},
    {"6b contiguous chunks, 8 loads", "sum_chunks_x8", reduce_chunks_x8, Kind::kGrid},
    {"7 chunks, 4 loads, one launch", "sum_chunks_x4_fused", nullptr, Kind::kFused},
    {"CUB DeviceReduce::Sum", "sum_cub", nullptr, Kind::kCub},
};
static const Version kRacy = {"2 shared-memory tree, barrier removed", "sum_shared_racy", reduce_shared_racy,
                              Kind::kAtomic};

// Scratch the launchers need, allocated once outside the timed region.
struct Workspace {
  float* partials = nullptr;  // one float per block of versions 4 to 7
  int max_blocks = 0;
  unsigned int* blocks_done = nullptr;  // version 7's counter: zero between launches
  void* cub_temp = nullptr;
  size_t cub_bytes = 0;
};

// --8<-- [start:launch]
static int grid_blocks(long long n, int max_blocks) {
  const long long wanted = course::ceil_div<long long>(course::ceil_div<long long>(n, 4), kGridThreads);
  return static_cast<int>(std::max<long long>(1, std::min<long long>(wanted, max_blocks)));
}

static void launch(const Version& v, const float* in, float* out, long long n, Workspace& ws) {
  switch (v.kind) {
    case Kind::kAtomic:  // one thread per element; the result accumulates into *out, so zero it first
      CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float)));
      v.kernel<<<static_cast<unsigned>(course::ceil_div<long long>(n, kReduceThreads)), kReduceThreads>>>(in, out, n);
      break;
    case Kind::kGrid: {  // a fixed grid (4 blocks of 512 threads per SM), then one block for the partials
      const int blocks = grid_blocks(n, ws.max_blocks);
      v.kernel<<<blocks, kGridThreads>>>(in, ws.partials, n);
      CUDA_CHECK_LAUNCH();
      reduce_partials<<<1, kGridThreads>>>(ws.partials, out, blocks);
      break;
    }
    case Kind::kFused:
      reduce_chunks_x4_fused<<<grid_blocks(n, ws.max_blocks), kGridThreads>>>(in, ws.partials, ws.blocks_done, out,
                                                                              n);
      break;
    case Kind::kCub:
      CUDA_CHECK(cub::DeviceReduce::Sum(ws.cub_temp, ws.cub_bytes, in, out, static_cast<int64_t>(n)));
      break;
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

// The longest chain of additions version v puts an element through (reduction_check.cuh).
static long long chain(const Version& v, long long n, const Workspace& ws) {
  if (v.kind == Kind::kGrid || v.kind == Kind::kFused) return chain_grid(n, grid_blocks(n, ws.max_blocks));
  if (v.kind == Kind::kAtomic && v.kernel != reduce_atomic) return chain_block_atomics(n);
  return chain_any_order(n);  // version 1, CUB
}

// Runs version v into a poisoned output and checks its sum (tolerance: reduction_check.cuh); *got_out
// receives the result.
static bool check(const Version& v, const float* d_in, float* d_out, long long n, Workspace& ws,
                  const SumReference& ref, float* got_out = nullptr) {
  course::poison(d_out, sizeof(float));
  launch(v, d_in, d_out, n, ws);
  float got = 0.0f;
  CUDA_CHECK(cudaMemcpy(&got, d_out, sizeof(float), cudaMemcpyDeviceToHost));
  if (got_out) *got_out = got;
  return check_sum(v.check_name, got, ref, chain(v, n, ws));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench"), plant_race = args.has("--plant-race");
  const bool plant_drop = plant_dropped_block_requested(args);
  const long long n = args.get_int("--n", bench ? (1LL << 28) : 1000003, 1, 1LL << 31);  // 8 GiB at most
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::vector<float> h_in(static_cast<size_t>(n));
  course::fill_uniform(h_in, seed);
  double want = 0.0, abs_sum = 0.0;
  sum_cpu(h_in, &want, &abs_sum);
  const SumReference ref{want, abs_sum, running_sums_norm(h_in)};

  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, bytes));
  CUDA_CHECK(cudaMalloc(&d_out, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));
  Workspace ws;
  ws.max_blocks = 4 * sms;
  CUDA_CHECK(cudaMalloc(&ws.partials, ws.max_blocks * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&ws.blocks_done, sizeof(unsigned int)));
  CUDA_CHECK(cudaMemset(ws.blocks_done, 0, sizeof(unsigned int)));
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, ws.cub_bytes, d_in, d_out, static_cast<int64_t>(n)));
  CUDA_CHECK(cudaMalloc(&ws.cub_temp, ws.cub_bytes));

  bool ok = true;
  if (plant_race) {
    ok = check(kRacy, d_in, d_out, n, ws, ref);  // may pass or fail: a race is not reliable
  } else {
    float got[std::size(kVersions)] = {};
    for (size_t i = 0; i < std::size(kVersions); ++i)
      ok = check(kVersions[i], d_in, d_out, n, ws, ref, &got[i]) && ok;
    if (plant_drop) {  // on version 6, whose blocks' chunks check_dropped_block models
      const Version& v6 = kVersions[5];
      ok = check_dropped_block(v6.check_name, got[5], ref, chain(v6, n, ws), h_in,
                               grid_blocks(n, ws.max_blocks)) && ok;
    }
  }

  if (bench && !plant_race && ok) {
    // --8<-- [start:bench]
    char case_name[64];
    std::snprintf(case_name, sizeof(case_name), "sum of %lld fp32 (%.0f MiB)", n, bytes / 1048576.0);
    float* scratch = nullptr;  // the copy peer: n * 2 bytes read and n * 2 written
    CUDA_CHECK(cudaMalloc(&scratch, bytes / 2));
    const float copy_ms = course::time_kernel_ms(
        [&] { CUDA_CHECK(cudaMemcpy(scratch, d_in, bytes / 2, cudaMemcpyDeviceToDevice)); });
    course::print_bench(case_name, "cudaMemcpy (copy, same bytes moved)", copy_ms, static_cast<double>(bytes), 0,
                        /*peer=*/true);
    for (const Version& v : kVersions) {
      // Version 1 runs n atomics one after another on one address: time it fewer times.
      const bool slow = v.kernel == reduce_atomic;
      const float ms = course::time_kernel_ms([&] { launch(v, d_in, d_out, n, ws); }, slow ? 1 : 3, slow ? 5 : 20);
      course::print_bench(case_name, v.name, ms, static_cast<double>(bytes), static_cast<double>(n));
    }
    CUDA_CHECK(cudaFree(scratch));
    // --8<-- [end:bench]
  }
  CUDA_CHECK(cudaFree(ws.cub_temp));
  CUDA_CHECK(cudaFree(ws.partials));
  CUDA_CHECK(cudaFree(ws.blocks_done));
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
