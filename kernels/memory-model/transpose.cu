// transpose.cu: out = in^T for a rows x cols float matrix, seven versions checked against a CPU
// reference and timed against cudaMemcpy of the same number of bytes.
//
// Taught in docs/memory-model/transpose.md (kernels in transpose.cuh). A transpose reads and writes
// every element once, exactly like a copy, so a copy of the same bytes is its reference: the peer.
// Build: nvcc -O3 -arch=native -o build/memory-model/transpose kernels/memory-model/transpose.cu
// Run:   ./build/memory-model/transpose --rows 1009 --cols 997     (checks every version)
//        ./build/memory-model/transpose --bench                    (also times them on 8192 x 8192)
//
// course: gpu
// course: run --rows 1 --cols 1
// course: run --rows 1009 --cols 997
// course: run --rows 1004 --cols 100
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "transpose.cuh"

// --8<-- [start:reference]
static void transpose_cpu(const std::vector<float>& in, std::vector<float>& out, int rows, int cols) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
// --8<-- [end:reference]

using TransposeKernel = void (*)(const float*, float*, int, int);

struct Version {
  const char* name;
  const char* check_name;  // no spaces: the harness reads "CHECK PASS <name> n=..."
  TransposeKernel kernel;
  int vec4_threads;  // 0, or the block size of a float4 version (needs rows % 4 == cols % 4 == 0)
  int tile;          // the block's tile is tile x tile elements
};

static const Version kVersions[] = {
    {"1 naive", "transpose_naive", transpose_naive, 0, kTile},
    {"2 tiled (bank conflicts)", "transpose_tiled", transpose_tiled, 0, kTile},
    {"3 tiled, padded", "transpose_padded", transpose_padded, 0, kTile},
    {"4 tiled, swizzled", "transpose_swizzled", transpose_swizzled, 0, kTile},
    {"5 padded, float4", "transpose_padded_vec4", transpose_padded_vec4, 256, kTile},
    {"6 padded, 4 float4 per thread", "transpose_padded_vec4_x4", transpose_padded_vec4_x4, 64, kTile},
    {"7 64x64 tile, 4 float4 per thread", "transpose_tile64_vec4", transpose_tile64_vec4, 256, kTile64},
};

// --8<-- [start:launch]
static bool can_run(const Version& v, int rows, int cols) {
  return v.vec4_threads == 0 || (rows % 4 == 0 && cols % 4 == 0);
}

static void launch(const Version& v, const float* in, float* out, int rows, int cols) {
  const dim3 grid(course::ceil_div(cols, v.tile), course::ceil_div(rows, v.tile));
  const dim3 block = v.vec4_threads ? dim3(v.vec4_threads) : dim3(kTile, kBlockRows);
  v.kernel<<<grid, block>>>(in, out, rows, cols);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  // Grid y is limited to 65535 blocks of kTile rows; the matrix to 2^31 elements (8 GiB).
  const long long rows = args.get_int("--rows", bench ? 8192 : 1009, 1, 65535LL * kTile);
  const long long cols = args.get_int("--cols", bench ? 8192 : 997, 1, 1LL << 30);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  if (rows * cols > (1LL << 31)) {
    std::fprintf(stderr, "error: --rows x --cols must be at most 2^31 elements (got %lld x %lld)\n", rows, cols);
    return course::kExitFail;
  }
  const int R = static_cast<int>(rows), C = static_cast<int>(cols);
  const size_t n = static_cast<size_t>(rows) * cols, bytes = n * sizeof(float);

  std::vector<float> h_in(n), h_out(n), want(n);
  course::fill_uniform(h_in, seed);
  transpose_cpu(h_in, want, R, C);
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, bytes));
  CUDA_CHECK(cudaMalloc(&d_out, bytes));
  CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));

  bool ok = true;
  for (const Version& v : kVersions) {
    if (!can_run(v, R, C)) {
      std::printf("skip %s: rows and cols must be multiples of 4\n", v.name);
      continue;
    }
    course::poison(d_out, bytes);
    launch(v, d_in, d_out, R, C);
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
    ok = course::check_close(v.check_name, h_out.data(), want.data(), n, 0.0, 0.0) && ok;  // a transpose is exact
  }

  if (bench && ok) {
    // --8<-- [start:bench]
    char case_name[64];
    std::snprintf(case_name, sizeof(case_name), "transpose %d x %d fp32", R, C);
    // The peer: cudaMemcpy of the same buffer reads and writes the same 2 * bytes.
    const float copy_ms = course::time_kernel_ms(
        [&] { CUDA_CHECK(cudaMemcpy(d_out, d_in, bytes, cudaMemcpyDeviceToDevice)); });
    course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * bytes, 0, /*peer=*/true);
    for (const Version& v : kVersions) {
      if (!can_run(v, R, C)) continue;
      const float ms = course::time_kernel_ms([&] { launch(v, d_in, d_out, R, C); });
      course::print_bench(case_name, v.name, ms, 2.0 * bytes, 0);
    }
    // --8<-- [end:bench]
  }
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
