// add_rmsnorm_check.cuh: the checker for the add + RMSNorm exercise of docs/serving/exercises.md.
// It launches YOUR add_rmsnorm kernel with one block of 256 threads per row on random bf16 inputs,
// its outputs (the residual, updated in place, and out) in guarded buffers, out poisoned with NaN first,
// and compares them with a float64 reference: the residual must equal the bf16-rounded sum x + r exactly,
// and each output element must lie within one bf16 unit of its float64 value, relative to that element.
// The rows hold every edge the operation meets: hidden sizes that are not multiples of 256 (1, 5, 1000,
// 4099), every third row 2^-20 times smaller (eps then dominates its norm and its outputs are small, so a
// kernel that writes zeros there fails), and a row whose x is minus its residual (a sum of zeros: the
// output must be zeros, not NaN).
//
// course: header
#pragma once
#include <cuda_bf16.h>

#include "../../common/bf16.cuh"
#include "../../common/exercise.cuh"

constexpr int kAddNormThreads = 256;  // 8 warps per block, one block per row
constexpr float kAddNormEps = 1e-5f;

// You write this kernel: for row `blockIdx.x`, residual <- bf16(x + residual) in place, then
// out = bf16(residual / sqrt(mean(residual^2) + eps) * weight), the norm taken of the stored bf16 values.
// Layouts, row-major: x, residual and out [rows][hidden]; weight [hidden].
__global__ void add_rmsnorm(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ residual,
                            const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out, int hidden,
                            float eps);

static std::vector<float> to_float(const std::vector<__nv_bfloat16>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = __bfloat162float(b[i]);
  return v;
}

static bool check_add_rmsnorm(int rows, int hidden, uint64_t seed) {
  namespace ex = course::exercise;
  const size_t n = static_cast<size_t>(rows) * hidden;
  std::vector<float> x(n), res(n), w(hidden);
  course::fill_uniform(x, seed, -1.0f, 1.0f);
  course::fill_uniform(res, seed + 1, -2.0f, 2.0f);
  course::fill_uniform(w, seed + 2, -1.5f, 1.5f);  // signed: outputs of both signs
  course::quiet_rows(x, rows, hidden);              // rows 1, 4, 7, ...: eps dominates their norm
  course::quiet_rows(res, rows, hidden);
  const size_t zero_row = 2 * static_cast<size_t>(hidden);  // row 2: x = -residual, a sum of zeros
  if (rows > 2)
    for (int c = 0; c < hidden; ++c) x[zero_row + c] = -res[zero_row + c];
  std::vector<__nv_bfloat16> xb, resb, wb;  // x, res and w rounded in place, and their bf16 copies
  course::round_to_bf16(x, xb), course::round_to_bf16(res, resb), course::round_to_bf16(w, wb);

  // The reference: the sum rounded to bf16 once (as stored), the norm of the stored values in float64.
  std::vector<float> want_res(n);
  std::vector<double> want(n);
  for (int r = 0; r < rows; ++r) {
    const size_t off = static_cast<size_t>(r) * hidden;
    double squares = 0.0;
    for (int c = 0; c < hidden; ++c) {
      want_res[off + c] = __bfloat162float(__float2bfloat16(x[off + c] + res[off + c]));
      squares += static_cast<double>(want_res[off + c]) * want_res[off + c];
    }
    const double inv_rms = 1.0 / std::sqrt(squares / hidden + kAddNormEps);
    for (int c = 0; c < hidden; ++c) want[off + c] = want_res[off + c] * inv_rms * w[c];
  }

  __nv_bfloat16* d_x = course::to_device(xb);
  __nv_bfloat16* d_w = course::to_device(wb);
  const ex::Guarded<__nv_bfloat16> d_res(n), d_out(n);  // poisoned, guards included
  CUDA_CHECK(cudaMemcpy(d_res.get(), resb.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  add_rmsnorm<<<rows, kAddNormThreads>>>(d_x, d_res.get(), d_w, d_out.get(), hidden, kAddNormEps);
  CUDA_CHECK_LAUNCH();
  course::device_free({d_x, d_w});
  const std::vector<float> got_res = to_float(d_res.read()), got = to_float(d_out.read());

  char name[64];
  std::snprintf(name, sizeof(name), "residual_%dx%d", rows, hidden);
  bool ok = ex::compare(name, got_res.data(), want_res.data(), n, 0.0, 0.0, hidden);  // the same rounding
  ok = d_res.guards_intact(name) && ok;
  // One rounding to bf16 (half a unit: at most 2^-8 of the value), plus a little for the fp32
  // arithmetic before it, relative to each element however small; the zero row must give exact zeros.
  std::snprintf(name, sizeof(name), "add_rmsnorm_%dx%d", rows, hidden);
  ok = ex::compare(name, got.data(), want.data(), n, 0x1.04p-8, 0.0, hidden) && ok;
  return d_out.guards_intact(name) && ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_add_rmsnorm(333, 2048, options.seed);
  ok = check_add_rmsnorm(1, 1, options.seed + 1) && ok;      // one element
  ok = check_add_rmsnorm(4, 5, options.seed + 2) && ok;      // a row shorter than a warp
  ok = check_add_rmsnorm(1009, 1000, options.seed + 3) && ok; // not a multiple of the block
  ok = check_add_rmsnorm(7, 4099, options.seed + 4) && ok;    // 16 elements and 3 more per thread
  return ok ? 0 : course::kExitFail;
}
