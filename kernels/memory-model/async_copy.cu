// async_copy.cu: a 5 x 5 box blur of an H x W float image (zero outside the image), one kernel family
// whose tiles are staged through shared memory in three ways:
//   direct     no shared memory: every thread reads its 25 inputs from global memory (through L1)
//   sync       the block loads a tile (plus its 2-pixel halo) into shared memory, waits, computes
//   cp.async   the same tiles, copied asynchronously by cuda::memcpy_async into a 2- or 4-stage
//              cuda::pipeline, so the next tiles' loads are in flight while this one is computed
// Every version is a persistent grid: a fixed number of blocks walks over the tiles in the same order.
//
// Taught in docs/memory-model/async-copies.md. Checked against a float64 CPU blur on sizes that are
// not multiples of the tile, with the output poisoned; timed against each other and a cudaMemcpy of
// the same bytes. cp.async needs compute capability 8.0 (the program waives below it). TMA is taught
// with the Hopper GEMMs (kernels/matmul/gemm_wgmma.cu, gemm_hopper.cu), where it runs and is measured.
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

#include "../common/course.cuh"

constexpr int kRadius = 2;                     // 5 x 5 box
constexpr int kTileW = 64, kTileH = 16;        // outputs per tile
constexpr int kInW = kTileW + 2 * kRadius;     // 68 floats
constexpr int kInH = kTileH + 2 * kRadius;     // 20 rows
constexpr int kThreads = 256;                  // 64 columns x 4 row groups
constexpr int kTileFloats = kInH * kInW;
constexpr int kTileBytes = kTileFloats * static_cast<int>(sizeof(float));
constexpr int kStageFloats = (kTileBytes + 127) / 128 * 128 / static_cast<int>(sizeof(float));  // stages 128-byte aligned

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

// The blur of one tile from its staged input, s[kInH][kInW], whose element (0, 0) is pixel
// (y0 - 2, x0 - 2). Thread (tx, ty) computes column tx of rows ty, ty + 4, ty + 8, ty + 12: a warp
// reads 32 consecutive floats of one shared-memory row, no bank conflicts.
__device__ inline void blur_tile(const float* s, float* __restrict__ out, int H, int W, Tile tile) {
  const int tx = threadIdx.x % kTileW;
  for (int r = threadIdx.x / kTileW; r < kTileH; r += kThreads / kTileW) {
    const int y = tile.y0 + r, x = tile.x0 + tx;
    if (y >= H || x >= W) continue;
    float acc = 0.0f;
#pragma unroll
    for (int dy = 0; dy <= 2 * kRadius; ++dy)
#pragma unroll
      for (int dx = 0; dx <= 2 * kRadius; ++dx) acc += s[(r + dy) * kInW + tx + dx];
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
          [&](int i, size_t g) { cuda::memcpy_async(&s[stage][i], &in[g], cuda::aligned_size_t<4>(sizeof(float)), pipe); },
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

// --8<-- [start:launch]
enum class Kind { kDirect, kSync, kCpAsync2, kCpAsync4 };
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
};

struct Problem {
  const float* in;
  float* out;
  int H, W, tiles, blocks;
};

static void launch(const Version& v, const Problem& p) {
  switch (v.kind) {
    case Kind::kDirect: blur_direct<<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kSync: blur_sync<<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kCpAsync2: blur_cp_async<2><<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
    case Kind::kCpAsync4: blur_cp_async<4><<<p.blocks, kThreads>>>(p.in, p.out, p.H, p.W, p.tiles); break;
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long height = args.get_int("--height", 999, 1, 1 << 15);
  const long long width = args.get_int("--width", 1000, 1, 1 << 15);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  course::require_compute_capability(8, 0, "cp.async (cuda::memcpy_async into shared memory)");
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
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
    char case_name[64];
    std::snprintf(case_name, sizeof(case_name), "blur 5x5 %d x %d fp32", H, W);
    if (bench && k > 0) {
      const float copy_ms = course::time_kernel_ms(
          [&] { CUDA_CHECK(cudaMemcpy(p.out, p.in, bytes, cudaMemcpyDeviceToDevice)); });
      course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * bytes, 0, /*peer=*/true);
    }
    for (const Version& v : kVersions) {
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
  }
  return ok ? 0 : course::kExitFail;
}
