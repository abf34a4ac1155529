// async_copy.cu: a 5 x 5 box blur of an H x W float image (zero outside the image), one kernel family
// whose tiles are staged through shared memory in four ways:
//   direct     no shared memory: every thread reads its 25 inputs from global memory (through L1)
//   sync       the block loads a tile (plus its 2-pixel halo) into shared memory, waits, computes
//   cp.async   the same tiles, copied asynchronously by cuda::memcpy_async into a 2- or 4-stage
//              cuda::pipeline, so the next tiles' loads are in flight while this one is computed
//   TMA        one thread per block asks the Tensor Memory Accelerator for a whole tile (a tensor map
//              made by cuTensorMapEncodeTiled); an mbarrier counts its bytes in (2 or 4 stages). The
//              box starts 4 columns left of the tile, not 2: its innermost coordinate must be a
//              multiple of 16 bytes (an unaligned one is an illegal instruction on the H100)
// Every version is a persistent grid: a fixed number of blocks walks over the tiles in the same order.
//
// Taught in docs/memory-model/async-copies.md. Checked against a float64 CPU blur on sizes that are
// not multiples of the tile, with the output poisoned; timed against each other and a cudaMemcpy of
// the same bytes. cp.async needs compute capability 8.0 (the program waives below it); TMA needs 9.0
// (skipped below it) and a row pitch that is a multiple of 16 bytes: an image whose width is not a
// multiple of 4 floats is given to TMA as a pitched copy (cudaMallocPitch), made outside the timing.
// Build: nvcc -O3 -arch=native -o build/memory-model/async_copy kernels/memory-model/async_copy.cu
// Run:   ./build/memory-model/async_copy --height 999 --width 1000
//        ./build/memory-model/async_copy --bench
//
// course: gpu
// course: run --height 37 --width 132
// course: run --height 999 --width 1000
// course: run --height 517 --width 1001
// course: run --height 1 --width 4
// course: bench --bench

#include <cuda/pipeline>
#include <cuda/ptx>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/hopper.cuh"  // get_encode: cuTensorMapEncodeTiled from the driver
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kRadius = 2;                     // 5 x 5 box
constexpr int kTileW = 64, kTileH = 16;        // outputs per tile
constexpr int kInW = kTileW + 2 * kRadius;     // 68 floats
constexpr int kInH = kTileH + 2 * kRadius;     // 20 rows
constexpr int kThreads = 256;                  // 64 columns x 4 row groups
constexpr int kTileFloats = kInH * kInW;
constexpr int kTileBytes = kTileFloats * static_cast<int>(sizeof(float));
constexpr int kStageFloats = (kTileBytes + 127) / 128 * 128 / static_cast<int>(sizeof(float));  // 128-B aligned
// TMA's box: its first column must sit on a 16-byte boundary, so it starts kTmaShift = 4 columns left
// of the tile (x0 is a multiple of 64) and spans 72 columns (70 needed, rounded up to 16 bytes).
constexpr int kTmaShift = 4;
constexpr int kTmaInW = (kTmaShift + kTileW + kRadius + 3) / 4 * 4;  // 72 floats: 288 bytes
constexpr int kTmaTileBytes = kInH * kTmaInW * static_cast<int>(sizeof(float));  // 5760: the whole box
constexpr int kTmaStageFloats = (kTmaTileBytes + 127) / 128 * 128 / static_cast<int>(sizeof(float));
static_assert(kTileW % 4 == 0 && kTmaShift % 4 == 0, "the box's first column must be 16-byte aligned");
static_assert(kTmaStageFloats * sizeof(float) % 128 == 0, "every stage's box lands 128-byte aligned");

// --8<-- [start:reference]
static void blur_cpu(const std::vector<float>& in, std::vector<double>& out, int H, int W) {
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      double acc = 0.0;
      for (int dy = -kRadius; dy <= kRadius; ++dy)
        for (int dx = -kRadius; dx <= kRadius; ++dx) {
          const int yy = y + dy, xx = x + dx;
          if (yy >= 0 && yy < H && xx >= 0 && xx < W) acc += in[(size_t)yy * W + xx];
        }
      out[(size_t)y * W + x] = acc / 25.0;
    }
}
// --8<-- [end:reference]

// --8<-- [start:common]
struct Tile {
  int y0, x0;  // the first output pixel of the tile
};
__device__ inline Tile tile_at(int t, int W) {
  const int tiles_x = (W + kTileW - 1) / kTileW;
  return {t / tiles_x * kTileH, t % tiles_x * kTileW};
}

// The blur of one tile from its staged input, kInH rows of kPitch floats, whose element (0, 0) is
// pixel (y0 - 2, x0 - 2). Thread (tx, ty) computes column tx of rows ty, ty + 4, ty + 8, ty + 12: a
// warp reads 32 consecutive floats of one shared-memory row, no bank conflicts.
template <int kPitch = kInW>
__device__ inline void blur_tile(const float* s, float* __restrict__ out, int H, int W, Tile tile) {
  const int tx = threadIdx.x % kTileW;
  for (int r = threadIdx.x / kTileW; r < kTileH; r += kThreads / kTileW) {
    const int y = tile.y0 + r, x = tile.x0 + tx;
    if (y >= H || x >= W) continue;
    float acc = 0.0f;
#pragma unroll
    for (int dy = 0; dy <= 2 * kRadius; ++dy)
#pragma unroll
      for (int dx = 0; dx <= 2 * kRadius; ++dx) acc += s[(r + dy) * kPitch + tx + dx];
    out[(size_t)y * W + x] = acc * (1.0f / 25.0f);
  }
}

// Calls copy(shared_index, global_index) for each in-image element of the tile's input and
// zero(shared_index) for each element outside the image (the blur's zero padding).
template <typename Copy, typename Zero>
__device__ inline void for_each_input(Tile tile, int H, int W, Copy&& copy, Zero&& zero) {
  for (int i = threadIdx.x; i < kTileFloats; i += kThreads) {
    const int y = tile.y0 - kRadius + i / kInW, x = tile.x0 - kRadius + i % kInW;
    if (y >= 0 && y < H && x >= 0 && x < W) copy(i, (size_t)y * W + x);
    else zero(i);
  }
}
// --8<-- [end:common]

// --8<-- [start:direct]
__global__ void __launch_bounds__(kThreads) blur_direct(const float* __restrict__ in, float* __restrict__ out, int H,
                                                        int W, int tiles) {
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const Tile tile = tile_at(t, W);
    const int tx = threadIdx.x % kTileW;
    for (int r = threadIdx.x / kTileW; r < kTileH; r += kThreads / kTileW) {
      const int y = tile.y0 + r, x = tile.x0 + tx;
      if (y >= H || x >= W) continue;
      float acc = 0.0f;
      for (int dy = -kRadius; dy <= kRadius; ++dy)
        for (int dx = -kRadius; dx <= kRadius; ++dx) {
          const int yy = y + dy, xx = x + dx;
          if (yy >= 0 && yy < H && xx >= 0 && xx < W) acc += in[(size_t)yy * W + xx];
        }
      out[(size_t)y * W + x] = acc * (1.0f / 25.0f);
    }
  }
}
// --8<-- [end:direct]

// --8<-- [start:sync]
// Load, wait, compute, wait: while the block waits for its loads it computes nothing; only the other
// blocks on the SM keep it busy.
__global__ void __launch_bounds__(kThreads) blur_sync(const float* __restrict__ in, float* __restrict__ out, int H,
                                                      int W, int tiles) {
  __shared__ float s[kTileFloats];
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const Tile tile = tile_at(t, W);
    for_each_input(tile, H, W, [&](int i, size_t g) { s[i] = in[g]; }, [&](int i) { s[i] = 0.0f; });
    __syncthreads();  // the whole tile is in shared memory
    blur_tile(s, out, H, W, tile);
    __syncthreads();  // everyone is done with s before the next tile overwrites it
  }
}
// --8<-- [end:sync]

// --8<-- [start:cp_async]
// kStages buffers. Before computing tile i, the loads of tiles i + 1 ... i + kStages - 1 are already
// issued: each thread's copies go into one pipeline stage (a cp.async group) per tile, and
// pipeline_consumer_wait_prior<kStages - 1> waits until only the kStages - 1 newest stages are still
// in flight, that is until this thread's copies of tile i have landed. The barrier after it makes
// every thread's copies visible to the whole block. A thread commits a stage every iteration, empty
// or not, so that "the kStages - 1 newest" always means the same tiles.
template <int kStages>
__global__ void __launch_bounds__(kThreads) blur_cp_async(const float* __restrict__ in, float* __restrict__ out,
                                                          int H, int W, int tiles) {
  __shared__ float s[kStages][kStageFloats];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  auto issue = [&](int t, int stage) {  // the copies of tile t into s[stage], as one pipeline stage
    pipe.producer_acquire();
    if (t < tiles)
      for_each_input(
          tile_at(t, W), H, W,
          [&](int i, size_t g) {
            cuda::memcpy_async(&s[stage][i], &in[g], cuda::aligned_size_t<4>(sizeof(float)), pipe);
          },
          [&](int i) { s[stage][i] = 0.0f; });  // padding: a plain store, visible after the barrier below
    pipe.producer_commit();
  };
  const int first = blockIdx.x, step = gridDim.x;
  for (int k = 0; k < kStages - 1; ++k) issue(first + k * step, k);
  for (int i = 0, t = first; t < tiles; ++i, t += step) {
    issue(t + (kStages - 1) * step, (i + kStages - 1) % kStages);  // refills the buffer tile i - 1 used
    cuda::pipeline_consumer_wait_prior<kStages - 1>(pipe);         // this thread's copies of tile i are in
    __syncthreads();                                               // and so are everyone's
    blur_tile(s[i % kStages], out, H, W, tile_at(t, W));
    __syncthreads();  // everyone is done with s[i % kStages]: the next iteration refills it
  }
  pipe.quit();  // let go of the stages still committed (empty ones, past the last tile)
}
// --8<-- [end:cp_async]

// --8<-- [start:tma]
// Thread 0 is the producer: for each tile it tells the stage's mbarrier how many bytes to expect
// (arrive.expect_tx) and starts one TMA copy of the whole 72 x 20 box, which counts its bytes in as they
// land, out-of-bounds ones included. Elements outside the image arrive as zeros: the tensor map's
// out-of-bounds fill is the blur's padding, so no thread tests an index. Everyone waits on the stage's
// mbarrier (try_wait.parity: the n-th use of a stage completes phase n, of parity n % 2).
// One tile's TMA copy, issued by one thread: forced inline, so that the tensor map is read straight
// from the kernel's parameter (a __grid_constant__ parameter, as TMA requires: a copy of the map in a
// thread's local memory makes cp.async.bulk.tensor an illegal instruction).
__device__ __forceinline__ void tma_issue(const CUtensorMap* map, float* dst, uint64_t* bar, Tile tile) {
#if __CUDA_ARCH__ >= 900
  // Innermost first; either may be negative. The innermost is a multiple of 4 floats (16 bytes).
  const int32_t coords[2] = {tile.x0 - kTmaShift, tile.y0 - kRadius};
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       kTmaTileBytes);
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
#else
  (void)map, (void)dst, (void)bar, (void)tile;
#endif
}

template <int kStages>
__global__ void __launch_bounds__(kThreads) blur_tma(const __grid_constant__ CUtensorMap map, float* __restrict__ out,
                                                     int H, int W, int tiles) {
#if __CUDA_ARCH__ >= 900
  __shared__ alignas(128) float s[kStages][kTmaStageFloats];  // TMA writes 128-byte-aligned boxes
  __shared__ uint64_t full[kStages];
  if (threadIdx.x == 0) {
    for (int k = 0; k < kStages; ++k) cuda::ptx::mbarrier_init(&full[k], 1);  // one arrival: the producer's
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the initialised barriers, visible to TMA
  }
  __syncthreads();
  const int first = blockIdx.x, step = gridDim.x;
  if (threadIdx.x == 0)
    for (int k = 0; k < kStages - 1 && first + k * step < tiles; ++k)
      tma_issue(&map, s[k], &full[k], tile_at(first + k * step, W));
  for (int i = 0, t = first; t < tiles; ++i, t += step) {
    const int next = t + (kStages - 1) * step, next_stage = (i + kStages - 1) % kStages;
    if (threadIdx.x == 0 && next < tiles) tma_issue(&map, s[next_stage], &full[next_stage], tile_at(next, W));
    const int stage = i % kStages;
    while (!cuda::ptx::mbarrier_try_wait_parity(&full[stage], static_cast<uint32_t>((i / kStages) % 2))) {
    }
    // The box starts kTmaShift columns left of the tile: skip the first kTmaShift - kRadius of them.
    blur_tile<kTmaInW>(s[stage] + (kTmaShift - kRadius), out, H, W, tile_at(t, W));
    __syncthreads();  // everyone is done with s[stage] before thread 0 refills it
  }
#else
  (void)map, (void)out, (void)H, (void)W, (void)tiles;  // never launched below 9.0: main skips it
#endif
}
// --8<-- [end:tma]

// --8<-- [start:tensor_map]
// The driver's cuTensorMapEncodeTiled (hopper.cuh's get_encode): a description of the image
// (sizes, row pitch in bytes: a multiple of 16) and of the box one copy moves (72 x 20 floats: 288 bytes
// a row, a multiple of 16 as well).
static CUtensorMap make_tensor_map(const float* image, int H, int W, size_t pitch_bytes) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(W), static_cast<cuuint64_t>(H)};  // innermost first
  const cuuint64_t pitch[1] = {static_cast<cuuint64_t>(pitch_bytes)};
  const cuuint32_t box[2] = {kTmaInW, kInH};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = course::hopper::get_encode()(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(image), dims, pitch, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // FILL_NONE: out-of-bounds elements read as zero
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "error: cuTensorMapEncodeTiled failed (CUresult %d)\n", static_cast<int>(r));
    std::exit(course::kExitFail);
  }
  return map;
}
// --8<-- [end:tensor_map]

// --8<-- [start:launch]
enum class Kind { kDirect, kSync, kCpAsync2, kCpAsync4, kTma2, kTma4 };
struct Version {
  const char* name;
  const char* check_name;
  Kind kind;
};
static const Version kVersions[] = {
    {"direct: global loads through L1", "blur_direct", Kind::kDirect},
    {"sync: tile in shared memory", "blur_sync", Kind::kSync},
    {"cp.async: cuda::memcpy_async, 2 stages", "blur_cp_async2", Kind::kCpAsync2},
    {"cp.async: cuda::memcpy_async, 4 stages", "blur_cp_async4", Kind::kCpAsync4},
    {"TMA: tensor map + mbarrier, 2 stages", "blur_tma2", Kind::kTma2},
    {"TMA: tensor map + mbarrier, 4 stages", "blur_tma4", Kind::kTma4},
};

struct Problem {
  const float* in;
  float* out;
  int H, W, tiles, blocks;
  CUtensorMap map;  // TMA's view of the input (or of its pitched copy); valid when tma_ok
  bool tma_ok;
};

static void launch(const Version& v, const Problem& p) {
  switch (v.kind) {
    case Kind::kDirect: blur_direct<<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kSync: blur_sync<<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kCpAsync2: blur_cp_async<2><<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kCpAsync4: blur_cp_async<4><<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kTma2: blur_tma<2><<<p.blocks, kThreads>>>(p.map, p.out, p.H, p.W, p.tiles); break;
    case Kind::kTma4: blur_tma<4><<<p.blocks, kThreads>>>(p.map, p.out, p.H, p.W, p.tiles); break;
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

static bool is_tma(const Version& v) { return v.kind == Kind::kTma2 || v.kind == Kind::kTma4; }

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long height = args.get_int("--height", 999, 1, 1 << 15);
  const long long width = args.get_int("--width", 1000, 1, 1 << 15);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  course::require_compute_capability(8, 0, "cp.async (cuda::memcpy_async into shared memory)");
  int device = 0, major = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));

  // Checked on --height x --width; the benchmark adds an 8192 x 8192 image (checked too).
  std::vector<std::pair<int, int>> shapes{{static_cast<int>(height), static_cast<int>(width)}};
  if (bench) shapes.push_back({8192, 8192});
  bool ok = true;
  for (size_t k = 0; k < shapes.size() && ok; ++k) {
    const int H = shapes[k].first, W = shapes[k].second;
    const size_t n = static_cast<size_t>(H) * W, bytes = n * sizeof(float);
    std::vector<float> h_in(n), got(n);
    std::vector<double> want(n);
    course::fill_uniform(h_in, seed + k);
    blur_cpu(h_in, want, H, W);
    Problem p{};
    CUDA_CHECK(cudaMalloc(const_cast<float**>(&p.in), bytes));
    CUDA_CHECK(cudaMalloc(&p.out, bytes));
    CUDA_CHECK(cudaMemcpy(const_cast<float*>(p.in), h_in.data(), bytes, cudaMemcpyHostToDevice));
    p.H = H, p.W = W;
    p.tiles = course::ceil_div(H, kTileH) * course::ceil_div(W, kTileW);
    p.blocks = std::min(p.tiles, 4 * sms);  // a persistent grid: four blocks per SM, the same for every version
    // TMA needs a row pitch that is a multiple of 16 bytes. A width of 4k floats has one; any other
    // width is given to TMA as a pitched copy (cudaMallocPitch pads each row), as an image meant for
    // TMA would be stored. The tensor map's width stays W: the padding is never read.
    p.tma_ok = major >= 9;
    float* pitched = nullptr;
    if (p.tma_ok) {
      size_t pitch = static_cast<size_t>(W) * sizeof(float);
      const float* tma_in = p.in;
      if (pitch % 16 != 0) {
        const size_t row_bytes = pitch;
        CUDA_CHECK(cudaMallocPitch(&pitched, &pitch, row_bytes, static_cast<size_t>(H)));
        CUDA_CHECK(cudaMemcpy2D(pitched, pitch, p.in, row_bytes, row_bytes, static_cast<size_t>(H),
                                cudaMemcpyDeviceToDevice));
        tma_in = pitched;
        std::printf("TMA reads a pitched copy of the %d x %d image: row pitch %zu bytes\n", H, W, pitch);
      }
      p.map = make_tensor_map(tma_in, H, W, pitch);
    }
    char case_name[64];
    std::snprintf(case_name, sizeof(case_name), "blur 5x5 %d x %d fp32", H, W);
    if (bench && k > 0) {
      const float copy_ms = course::time_kernel_ms(
          [&] { CUDA_CHECK(cudaMemcpy(p.out, p.in, bytes, cudaMemcpyDeviceToDevice)); });
      course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * bytes, 0, /*peer=*/true);
    }
    for (const Version& v : kVersions) {
      if (is_tma(v) && !p.tma_ok) {
        std::printf("skip %s: needs compute capability 9.0\n", v.name);
        continue;
      }
      course::poison(p.out, bytes);
      launch(v, p);
      CUDA_CHECK(cudaMemcpy(got.data(), p.out, bytes, cudaMemcpyDeviceToHost));
      char name[96];
      std::snprintf(name, sizeof(name), "%s_%dx%d", v.check_name, H, W);
      // 25 float additions of values in [-1, 1]: a few ulp of 25.
      ok = course::check_close(name, got.data(), want.data(), n, 1e-5, 1e-5) && ok;
      if (bench && k > 0 && ok)
        course::print_bench(case_name, (std::string(v.name) + ", fp32").c_str(),
                            course::time_kernel_ms([&] { launch(v, p); }), 2.0 * bytes, 25.0 * n);
    }
    CUDA_CHECK(cudaFree(const_cast<float*>(p.in)));
    CUDA_CHECK(cudaFree(p.out));
    CUDA_CHECK(cudaFree(pitched));  // nullptr when no pitched copy was needed
  }
  return ok ? 0 : course::kExitFail;
}
