// transpose_check.cuh: the checker for the transpose exercise of docs/memory-model/exercises.md. It
// launches YOUR transpose kernel with blocks of 32 x 8 threads, one block per 32 x 32 tile, on random
// matrices whose sides are not multiples of 32, the output between guard bytes and filled with NaN
// first, and compares with the CPU's transpose. With --bench it times the kernel on 8192 x 8192 floats
// against cudaMemcpy of the same bytes, in the same run, and requires 65% of the copy's speed; the
// timed launches rotate through three copies of the buffers, and one more launch on buffers already
// timed, its output poisoned again, is checked (a kernel that skips repeated launches fails).
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

constexpr int kTransposeTile = 32;       // a block moves one 32 x 32 tile
constexpr int kTransposeBlockRows = 8;   // with 32 x 8 threads: each thread moves 4 elements
constexpr double kMinShareOfCopy = 0.65; // the speed bar
constexpr int kTimedSets = 3;            // buffer copies the timed launches rotate through

// You write this kernel: out (cols x rows) = the transpose of in (rows x cols), both row-major.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols);

static bool check_transpose(int rows, int cols, uint64_t seed, bool bench) {
  namespace ex = course::exercise;
  const size_t n = static_cast<size_t>(rows) * cols;
  std::vector<float> in(n), want(n);
  course::fill_uniform(in, seed);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
  const int sets = bench ? kTimedSets : 1;
  std::vector<float*> d_in(sets);
  std::vector<std::unique_ptr<ex::Guarded<float>>> out(sets);
  for (int s = 0; s < sets; ++s) {
    d_in[s] = course::to_device(in);
    out[s] = std::make_unique<ex::Guarded<float>>(n);
  }
  const dim3 block(kTransposeTile, kTransposeBlockRows);
  const dim3 grid(course::ceil_div(cols, kTransposeTile), course::ceil_div(rows, kTransposeTile));
  auto run = [&](int s) { transpose<<<grid, block>>>(d_in[s], out[s]->get(), rows, cols); };
  run(0);
  CUDA_CHECK_LAUNCH();
  char name[64];
  std::snprintf(name, sizeof(name), "transpose_%dx%d", rows, cols);
  // The output is cols x rows: name its rows and columns as the output's.
  auto compare_set0 = [&](const char* check_name) {
    const bool right = ex::compare(check_name, out[0]->read().data(), want.data(), n, 0.0, 0.0,
                                   static_cast<size_t>(rows));
    return out[0]->guards_intact(check_name) && right;
  };
  bool ok = compare_set0(name);
  if (ok && bench) {
    const double copy_ms = course::time_kernel_ms(
        [&] { CUDA_CHECK(cudaMemcpyAsync(out[0]->get(), d_in[0], n * sizeof(float), cudaMemcpyDeviceToDevice)); });
    const double your_ms = ex::time_rotating_ms(run, sets);
    char bench_case[64];
    std::snprintf(bench_case, sizeof(bench_case), "exercise transpose %d x %d fp32", rows, cols);
    ok = ex::speed_bar("transpose_speed", bench_case, "transpose (exercise)", your_ms,
                       "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * n * sizeof(float), 0.0, kMinShareOfCopy);
    ok = ex::recheck(name, [&] { out[0]->poison(); }, run, compare_set0) && ok;
  }
  for (float* p : d_in) CUDA_CHECK(cudaFree(p));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_transpose(1009, 997, options.seed, false);
  ok = check_transpose(1, 1, options.seed + 1, false) && ok;
  ok = check_transpose(33, 4099, options.seed + 2, false) && ok;
  ok = check_transpose(4099, 1, options.seed + 3, false) && ok;  // one column: the output is one row
  if (options.bench) ok = check_transpose(8192, 8192, options.seed + 4, true) && ok;
  return ok ? 0 : course::kExitFail;
}
