// fused_add_rmsnorm.cu: the residual add and the RMSNorm that follows it, in one pass over memory, as
// every transformer layer of a decode step runs them twice:
//   residual <- residual + x                          (bf16, in place: the stream's new state)
//   out      <- residual / sqrt(mean(residual^2) + eps) * weight    (computed in fp32, rounded once)
// One block per token reads x and residual once, keeps the sum in registers while the block reduces
// its squares, and writes residual and out: four bf16 bytes per element moved, where separate add and
// norm kernels move six or more.
//
// Taught in docs/serving/fused-small.md; its peer is fused_add_rmsnorm_torch.py (the same operation in
// PyTorch: eager, CUDA graph, every torch.compile mode).
// Build: python -m course.toolchain build-all 1 kernels/serving/fused_add_rmsnorm.cu
// Run:   ./build/serving/fused_add_rmsnorm --tokens 333 --hidden 2048    (checks against float64)
//        ./build/serving/fused_add_rmsnorm --bench                        (also times it against a copy)
//
// course: gpu
// course: run --tokens 333 --hidden 2048 --seed 61
// course: run --tokens 1 --hidden 8 --seed 62
// course: run --tokens 97 --hidden 8192 --seed 63
// course: run --tokens 1009 --hidden 1000 --seed 64
// course: run --tokens 333 --hidden 2048 --seed 65 --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <cmath>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "fused_add_rmsnorm.cuh"

using rmsnorm::fused_add_rmsnorm, rmsnorm::kMaxHidden, rmsnorm::kThreads;
constexpr float kEps = 1e-5f;

// --8<-- [start:reference]
// float64 reference for one token: the bf16 sum (the add rounds once, to bf16, as the kernel stores
// it), then the norm of that stored sum, which the kernel rounds to bf16 once at the end.
static void reference_row(const float* x, const float* res, const float* w, int hidden, float* res_out,
                          double* exact) {
  double squares = 0.0;
  for (int c = 0; c < hidden; ++c) {
    res_out[c] = static_cast<float>(course::round_bf16(static_cast<double>(x[c]) + res[c]));
    squares += static_cast<double>(res_out[c]) * res_out[c];
  }
  const double inv_rms = 1.0 / std::sqrt(squares / hidden + kEps);
  for (int c = 0; c < hidden; ++c) exact[c] = res_out[c] * inv_rms * w[c];
}
// --8<-- [end:reference]


static void launch(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* weight,
                   __nv_bfloat16* out, int tokens, int hidden) {
  fused_add_rmsnorm<<<tokens, kThreads>>>(x, residual, weight, out, hidden, kEps);
  CUDA_CHECK_LAUNCH();
}

static std::vector<float> bf16_to_float(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = __bfloat162float(v[i]);
  return f;
}

// Random x, residual and weight rounded to bf16; every third token 2^-20 times smaller (course::
// quiet_rows: eps dominates their norm, so their outputs are small), and, with more than one token,
// token 0's x the negated residual (a sum of zeros: the output must be zeros, not NaN). Outputs
// poisoned before the run.
static bool check(int tokens, int hidden, uint64_t seed, bool plant) {
  const size_t n = static_cast<size_t>(tokens) * hidden;
  std::vector<float> x(n), res(n), w(hidden);
  course::fill_uniform(x, seed, -1.0f, 1.0f);
  course::fill_uniform(res, seed + 1, -2.0f, 2.0f);
  course::fill_uniform(w, seed + 2, 0.5f, 1.5f);
  course::quiet_rows(x, tokens, hidden);
  course::quiet_rows(res, tokens, hidden);
  std::vector<__nv_bfloat16> xb, resb, wb;
  course::round_to_bf16(x, xb), course::round_to_bf16(res, resb), course::round_to_bf16(w, wb);
  if (tokens > 1)  // a single token stays random: its check is not only of zeros
    for (int c = 0; c < hidden; ++c) x[c] = -res[c], xb[c] = __float2bfloat16(x[c]);

  std::vector<float> want_res(n);
  std::vector<double> exact(n);
  for (int t = 0; t < tokens; ++t) {
    const size_t off = static_cast<size_t>(t) * hidden;
    reference_row(&x[off], &res[off], w.data(), hidden, &want_res[off], &exact[off]);
  }

  __nv_bfloat16 *d_x = course::to_device(xb), *d_res = course::to_device(resb), *d_w = course::to_device(wb);
  __nv_bfloat16* d_out = course::device_alloc<__nv_bfloat16>(n);
  course::poison(d_out, n * sizeof(__nv_bfloat16));
  launch(d_x, d_res, d_w, d_out, tokens, hidden);
  const std::vector<float> got_res = bf16_to_float(course::to_host(d_res, n));
  const std::vector<float> got = bf16_to_float(course::to_host(d_out, n));
  course::device_free({d_x, d_res, d_w, d_out});

  char name[96];
  std::snprintf(name, sizeof(name), "residual_t%d_h%d", tokens, hidden);
  bool ok = course::check_close(name, got_res.data(), want_res.data(), n, 0.0, 0.0);  // the same rounding
  // The output is rounded to bf16 once: within one bf16 unit (2^-8 relative), plus a little for the
  // fp32 arithmetic before it, of every element, however small: a zero written for a small output fails.
  std::snprintf(name, sizeof(name), "fused_add_rmsnorm_t%d_h%d", tokens, hidden);
  const std::vector<double> no_atol(n, 0.0);
  return course::check_close_each_planted(name, got.data(), exact.data(), no_atol.data(), n, 0x1.04p-8,
                                          plant ? 0x1p-7 : 0.0) && ok;
}

// --8<-- [start:bench]
// Bytes: x and residual read, residual and out written (the weight, read by every block, stays in L2
// and is counted once). The copy reference copies half of those bytes into the other half.
static void bench_case(int tokens, int hidden) {
  const size_t n = static_cast<size_t>(tokens) * hidden;
  __nv_bfloat16* buf = course::device_alloc<__nv_bfloat16>(4 * n + hidden);
  __nv_bfloat16 *x = buf, *res = buf + n, *out = buf + 2 * n, *w = buf + 4 * n;
  CUDA_CHECK(cudaMemset(buf, 0x3C, (4 * n + hidden) * sizeof(__nv_bfloat16)));  // 0x3C3C: a bf16 near 0.01
  const double bytes = (4.0 * n + hidden) * sizeof(__nv_bfloat16);
  const float ms = course::time_kernel_ms([&] { launch(x, res, w, out, tokens, hidden); });
  const float copy_ms = course::time_kernel_ms([&] {
    CUDA_CHECK(cudaMemcpy(out, x, 2 * n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice));
  });
  char case_name[48];
  std::snprintf(case_name, sizeof(case_name), "t%d h%d", tokens, hidden);
  course::print_bench(case_name, "fused add + RMSNorm (bf16)", ms, bytes, 0.0, false,
                      {{"tokens", tokens}, {"hidden", hidden}});
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 4.0 * n * sizeof(__nv_bfloat16), 0.0,
                      true, {{"tokens", tokens}, {"hidden", hidden}});
  course::device_free({buf});
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int tokens = static_cast<int>(args.get_int("--tokens", 333, 1, 1 << 20));
  const int hidden = static_cast<int>(args.get_int("--hidden", 2048, 8, kMaxHidden));
  const course::RunOptions run(args);
  args.finish();
  course::require_multiple("--hidden", hidden, 8, "whole 16-byte vectors");
  if (static_cast<double>(tokens) * hidden > (1 << 28)) {
    std::fprintf(stderr, "error: --tokens x --hidden must be at most 2^28 elements\n");
    return course::kExitFail;
  }
  const bool ok = check(tokens, hidden, run.seed, run.plant);
  if (ok && run.bench && !run.plant)
    for (const int hidden_size : {2048, 4096})
      for (const int t : {1, 64, 4096, 32768}) bench_case(t, hidden_size);
  return ok ? 0 : course::kExitFail;
}
