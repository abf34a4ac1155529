// row_max_check.cuh: the checker for the row-maximum exercise of docs/memory-model/exercises.md. It
// launches YOUR row_max kernel with 256 threads per block (8 warps, so 8 rows per block) on random
// matrices whose sizes are not multiples of 32 or 8, with every third row all negative (a maximum that
// starts from 0 fails there) and some rows all -inf, the output between guard bytes and filled with NaN
// first, and compares every row's maximum with the CPU's.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

constexpr int kRowMaxThreads = 256;  // 8 warps per block: 8 rows per block

// You write this kernel: out[r] = the largest element of row r, row r handled by warp number r
// (counted over the whole grid).
__global__ void row_max(const float* __restrict__ x, float* __restrict__ out, int rows, int cols);

static void row_max_cpu(const std::vector<float>& x, std::vector<float>& out, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = std::max(m, x[static_cast<size_t>(r) * cols + c]);
    out[r] = m;
  }
}

static bool check_row_max(int rows, int cols, uint64_t seed) {
  namespace ex = course::exercise;
  std::vector<float> x(static_cast<size_t>(rows) * cols), want(rows);
  course::fill_uniform(x, seed, -100.0f, 100.0f);
  const float shift = ex::draw_uniform(seed, 101.0f, 1000.0f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float& v = x[static_cast<size_t>(r) * cols + c];
      if (r % 3 == 1) v -= shift;       // all negative
      if (r % 11 == 7) v = -INFINITY;   // all -inf: the maximum is -inf
    }
  row_max_cpu(x, want, rows, cols);
  float* d_x = course::to_device(x);
  const ex::Guarded<float> out(rows);
  row_max<<<course::ceil_div(rows, kRowMaxThreads / 32), kRowMaxThreads>>>(d_x, out.get(), rows, cols);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaFree(d_x));
  char name[64];
  std::snprintf(name, sizeof(name), "row_max_%dx%d", rows, cols);
  // Exact: a maximum is one of the inputs, never rounded (an all -inf row's maximum is -inf).
  const bool ok = ex::compare(name, out.read().data(), want.data(), static_cast<size_t>(rows), 0.0, 0.0);
  return out.guards_intact(name) && ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long rows = args.get_int("--rows", 1009, 1, 1LL << 28), cols = args.get_int("--cols", 997, 1, 1LL << 28);
  const course::exercise::Options options{args};
  args.finish();
  if (rows * cols > (1LL << 28)) {
    std::fprintf(stderr, "error: --rows x --cols must be at most 2^28 elements (got %lld x %lld)\n", rows, cols);
    return course::kExitFail;
  }
  bool ok = check_row_max(static_cast<int>(rows), static_cast<int>(cols), options.seed);
  ok = check_row_max(1, 1, options.seed + 1) && ok;
  ok = check_row_max(3, 31, options.seed + 2) && ok;  // rows shorter than a warp
  ok = check_row_max(37, 33, options.seed + 3) && ok; // one column past a warp
  return ok ? 0 : course::kExitFail;
}
