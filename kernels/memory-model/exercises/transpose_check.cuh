// transpose_check.cuh: the checker for the transpose exercise of docs/memory-model/exercises.md. It
// launches YOUR transpose kernel with blocks of 32 x 8 threads, one block per 32 x 32 tile, on random
// matrices whose sides are not multiples of 32, the output filled with NaN first, and compares with
// the CPU's transpose. With --bench it times the kernel on 8192 x 8192 floats against cudaMemcpy of the
// same bytes, in the same run, and requires 65% of the copy's speed.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

constexpr int kTransposeTile = 32;       // a block moves one 32 x 32 tile
constexpr int kTransposeBlockRows = 8;   // with 32 x 8 threads: each thread moves 4 elements
constexpr double kMinShareOfCopy = 0.65; // the speed bar

// You write this kernel: out (cols x rows) = the transpose of in (rows x cols), both row-major.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols);

static bool check_transpose(int rows, int cols, uint64_t seed, bool bench) {
  const size_t n = static_cast<size_t>(rows) * cols;
  std::vector<float> in(n), got(n), want(n);
  course::fill_uniform(in, seed);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  course::poison(d_out, n * sizeof(float));
  const dim3 block(kTransposeTile, kTransposeBlockRows);
  const dim3 grid(course::ceil_div(cols, kTransposeTile), course::ceil_div(rows, kTransposeTile));
  auto run = [&] { transpose<<<grid, block>>>(d_in, d_out, rows, cols); };
  run();
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  char name[64];
  std::snprintf(name, sizeof(name), "transpose_%dx%d", rows, cols);
  // got is cols x rows: name its rows and columns as the output's.
  bool ok = course::exercise::compare(name, got.data(), want.data(), n, 0.0, 0.0, static_cast<size_t>(rows));
  if (ok && bench) {
    const double copy_ms = course::time_kernel_ms(
        [&] { CUDA_CHECK(cudaMemcpyAsync(d_out, d_in, n * sizeof(float), cudaMemcpyDeviceToDevice)); });
    const double your_ms = course::time_kernel_ms(run);
    char bench_case[64];
    std::snprintf(bench_case, sizeof(bench_case), "exercise transpose %d x %d fp32", rows, cols);
    ok = course::exercise::speed_bar("transpose_speed", bench_case, "transpose (exercise)", your_ms,
                                     "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * n * sizeof(float), 0.0,
                                     kMinShareOfCopy);
  }
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_transpose(1009, 997, options.seed, false);
  ok = check_transpose(1, 1, options.seed + 1, false) && ok;
  ok = check_transpose(33, 4099, options.seed + 2, false) && ok;
  if (options.bench) ok = check_transpose(8192, 8192, options.seed + 3, true) && ok;
  return ok ? 0 : course::kExitFail;
}
