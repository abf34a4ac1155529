// softmax.cu: row-wise softmax of a rows x cols float matrix, seven versions checked against a
// float64 CPU reference and timed against cudaMemcpy of the same number of bytes.
//
// The checked matrix mixes random rows with the rows attention produces: rows that begin with a long
// run of -inf, causal-mask rows (row r is -inf after column r), rows with a single finite score, fully
// masked rows (all -inf: the output is all zeros) and rows holding a NaN (the output row is NaN).
// The benchmark times random rows only.
//
// Taught in docs/memory-model/softmax.md (kernels in softmax.cuh; reference, inputs and checks in
// softmax_reference.cuh). Softmax must read every input once and write every output once, like a
// copy: a copy of the same buffer is its reference, the peer.
// Build: nvcc -O3 -arch=native -o build/memory-model/softmax kernels/memory-model/softmax.cu
// Run:   ./build/memory-model/softmax --rows 97 --cols 997     (checks every version that applies)
//        ./build/memory-model/softmax --bench                  (also times them on 8192 x 8192)
//
// course: gpu
// course: run --rows 1 --cols 1
// course: run --rows 97 --cols 997
// course: run --rows 37 --cols 8192
// course: run --rows 3 --cols 5000
// course: run --rows 24 --cols 20
// course: run --rows 40 --cols 33
// course: run --rows 37 --cols 8192 --plant zeros-small
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "softmax.cuh"
#include "softmax_reference.cuh"

enum class Shape { kThreadPerRow, kWarpPerRow, kBlockPerRow, kRegs, kRegsVec4 };

struct Version {
  const char* name;
  const char* check_name;
  Shape shape;
  int threads;     // per block
  int max_cols;    // the register versions hold at most this many columns
  void (*row_kernel)(const float*, float*, int, int);  // versions 1 to 4
  void (*regs_kernel)(const float*, float*, int);      // version 5
};

static const Version kVersions[] = {
    {"1 naive: thread per row, 3 passes", "softmax_naive", Shape::kThreadPerRow, 256, 0, softmax_naive, nullptr},
    {"2 online: thread per row, 2 passes", "softmax_online", Shape::kThreadPerRow, 256, 0, softmax_online, nullptr},
    {"3 warp per row, online", "softmax_warp", Shape::kWarpPerRow, 256, 0, softmax_warp, nullptr},
    {"4 block per row, online", "softmax_block", Shape::kBlockPerRow, 256, 0, softmax_block, nullptr},
    {"5 block per row, row in registers", "softmax_regs", Shape::kRegs, 256, 8192, nullptr,
     softmax_block_regs_256x32},
    {"5b registers, float4, 256 threads", "softmax_regs_v4_256", Shape::kRegsVec4, 256, 8192, nullptr,
     softmax_block_regs_v4_256x8},
    {"5c registers, float4, 512 threads", "softmax_regs_v4_512", Shape::kRegsVec4, 512, 8192, nullptr,
     softmax_block_regs_v4_512x4},
};

// --8<-- [start:launch]
static bool can_run(const Version& v, int cols) {
  if (v.shape == Shape::kRegs) return cols <= v.max_cols;
  if (v.shape == Shape::kRegsVec4) return cols <= v.max_cols && cols % 4 == 0;
  return true;
}

static void launch(const Version& v, const float* x, float* y, int rows, int cols) {
  switch (v.shape) {
    case Shape::kThreadPerRow:
      v.row_kernel<<<course::ceil_div(rows, v.threads), v.threads>>>(x, y, rows, cols);
      break;
    case Shape::kWarpPerRow:  // threads / 32 rows per block
      v.row_kernel<<<course::ceil_div(rows, v.threads / 32), v.threads>>>(x, y, rows, cols);
      break;
    case Shape::kBlockPerRow:
      v.row_kernel<<<rows, v.threads>>>(x, y, rows, cols);
      break;
    case Shape::kRegs:
    case Shape::kRegsVec4:
      v.regs_kernel<<<rows, v.threads>>>(x, y, cols);
      break;
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

static bool check_version(const Version& v, const float* d_x, float* d_y, int R, int C,
                          const std::vector<double>& want) {
  return check_softmax(v.check_name, [&](float* y) { launch(v, d_x, y, R, C); }, d_y, R, C, want);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long rows = args.get_int("--rows", bench ? 8192 : 97, 1, 1LL << 24);
  const long long cols = args.get_int("--cols", bench ? 8192 : 997, 1, 1LL << 24);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (rows * cols > (1LL << 28)) {  // 1 GiB per matrix, and the host keeps a float64 copy
    std::fprintf(stderr, "error: --rows x --cols must be at most 2^28 elements (got %lld x %lld)\n", rows, cols);
    return course::kExitFail;
  }
  const int R = static_cast<int>(rows), C = static_cast<int>(cols);
  const size_t n = static_cast<size_t>(rows) * cols, bytes = n * sizeof(float);
  SoftmaxProblem prob(R, C, seed);
  std::vector<float>& h_x = prob.h_x;
  const std::vector<double>& want = prob.want;
  float *const d_x = prob.d_x, *const d_y = prob.d_y;

  bool ok = true;
  for (const Version& v : kVersions) {
    if (!can_run(v, C)) {
      std::printf("skip %s: needs cols <= %d%s\n", v.name, v.max_cols,
                  v.shape == Shape::kRegsVec4 ? " and a multiple of 4" : "");
      continue;
    }
    ok = check_version(v, d_x, d_y, R, C, want) && ok;
  }
  if (plant) {  // the check is the same for every version: the first one is planted with the fault
    const Version& v =
        *std::find_if(std::begin(kVersions), std::end(kVersions), [&](const Version& w) { return can_run(w, C); });
    ok = check_softmax_planted([&](float* y) { launch(v, d_x, y, R, C); }, d_y, R, C, want) && ok;
  }

  if (bench && ok) {
    course::fill_uniform(h_x, seed + 1, -8.0f, 8.0f);  // timed on random rows only
    CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), bytes, cudaMemcpyHostToDevice));
    // --8<-- [start:bench]
    char case_name[64];
    std::snprintf(case_name, sizeof(case_name), "softmax %d x %d fp32", R, C);
    const float copy_ms = course::time_kernel_ms(
        [&] { CUDA_CHECK(cudaMemcpy(d_y, d_x, bytes, cudaMemcpyDeviceToDevice)); });
    course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * bytes, 0, /*peer=*/true);
    for (const Version& v : kVersions) {
      if (!can_run(v, C)) continue;
      const bool slow = v.shape == Shape::kThreadPerRow;  // tens of ms each: time them fewer times
      const float ms = course::time_kernel_ms([&] { launch(v, d_x, d_y, R, C); }, slow ? 1 : 3, slow ? 5 : 20);
      course::print_bench(case_name, v.name, ms, 2.0 * bytes, 0);
    }
    // --8<-- [end:bench]
  }
  return ok ? 0 : course::kExitFail;
}
