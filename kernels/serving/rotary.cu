// rotary.cu: the rotary position embedding (RoPE) of a step's new query and key vectors, in place, in
// the rotate-half layout of Hugging Face's Llama: for each head and each i < dim / 2, the pair
// (x[i], x[i + dim/2]) is rotated by the angle pos * theta^(-2i/dim):
//   x[i]         <- x[i] cos - x[i + dim/2] sin
//   x[i + dim/2] <- x[i + dim/2] cos + x[i] sin
// with cos and sin read from a table [max_position][dim / 2] in fp32, as serving engines keep it.
// One block per token rotates all its query and key heads: each thread handles 8 pairs with two
// 16-byte loads and stores, so the kernel reads and writes each element once.
//
// Taught in docs/serving/fused-small.md; its peer is rotary_torch.py (eager, CUDA graph, every
// torch.compile mode).
// Build: python -m course.toolchain build-all 1 kernels/serving/rotary.cu
// Run:   ./build/serving/rotary --tokens 333           (checks against float64)
//        ./build/serving/rotary --bench                (also times it against a copy)
//
// course: gpu
// course: run --tokens 333 --heads 32 --kv-heads 8 --dim 64 --seed 71
// course: run --tokens 1 --heads 1 --kv-heads 1 --dim 16 --seed 72
// course: run --tokens 97 --heads 12 --kv-heads 4 --dim 128 --seed 73
// course: run --tokens 333 --heads 32 --kv-heads 8 --dim 64 --seed 74 --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <cmath>
#include <vector>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "rotary.cuh"

using rope::kThreads, rope::rotary;
constexpr int kMaxPosition = 1 << 17;
constexpr double kTheta = 500000.0;  // Llama 3's base

// The cos and sin table, [position][dim / 2], computed in float64 and stored in fp32.
static void rotary_table(int positions, int dim, std::vector<float>& cos_t, std::vector<float>& sin_t) {
  const int half = dim / 2;
  cos_t.resize(static_cast<size_t>(positions) * half), sin_t.resize(cos_t.size());
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(kTheta, -2.0 * i / dim);
  for (int p = 0; p < positions; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * inv_freq[i];
      cos_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
}


static void launch(__nv_bfloat16* x, const int* positions, const float* cos_t, const float* sin_t, int tokens,
                   int heads, int dim) {
  rotary<<<tokens, kThreads>>>(x, positions, cos_t, sin_t, heads, dim, static_cast<size_t>(heads) * dim);
  CUDA_CHECK_LAUNCH();
}

// Random q and k heads in [-2, 2] rounded to bf16 (every third token 2^-20 times smaller), random
// positions below kMaxPosition with position 0 (the identity) and the largest one included; the
// float64 rotation of the same bf16 inputs with the same fp32 table. A pair whose terms cancel has a
// small result: each element's tolerance is one bf16 unit of it, plus the fp32 rounding of its terms.
static bool check(int tokens, int heads, int dim, uint64_t seed, bool plant) {
  const size_t n = static_cast<size_t>(tokens) * heads * dim;
  std::vector<float> x(n);
  course::fill_uniform(x, seed, -2.0f, 2.0f);
  course::quiet_rows(x, tokens, static_cast<size_t>(heads) * dim);
  std::vector<__nv_bfloat16> xb;
  course::round_to_bf16(x, xb);
  std::vector<int> positions(tokens);
  std::mt19937_64 rng(seed + 1);
  for (int& p : positions) p = static_cast<int>(rng() % kMaxPosition);
  positions[0] = 0;
  if (tokens > 1) positions[tokens - 1] = kMaxPosition - 1;
  std::vector<float> cos_t, sin_t;
  rotary_table(kMaxPosition, dim, cos_t, sin_t);

  const int half = dim / 2;
  std::vector<double> want(n), atol(n);
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const size_t lo = (static_cast<size_t>(t) * heads + h) * dim + i, hi = lo + half;
        const double c = cos_t[static_cast<size_t>(positions[t]) * half + i];
        const double s = sin_t[static_cast<size_t>(positions[t]) * half + i];
        want[lo] = x[lo] * c - x[hi] * s;
        want[hi] = x[hi] * c + x[lo] * s;
        atol[lo] = 0x1p-21 * (std::fabs(x[lo] * c) + std::fabs(x[hi] * s));
        atol[hi] = 0x1p-21 * (std::fabs(x[hi] * c) + std::fabs(x[lo] * s));
      }

  __nv_bfloat16* d_x = course::to_device(xb);
  int* d_pos = course::to_device(positions);
  float *d_cos = course::to_device(cos_t), *d_sin = course::to_device(sin_t);
  launch(d_x, d_pos, d_cos, d_sin, tokens, heads, dim);
  const std::vector<__nv_bfloat16> got_b = course::to_host(d_x, n);
  course::device_free({d_x, d_pos, d_cos, d_sin});
  std::vector<float> got(n);
  for (size_t e = 0; e < n; ++e) got[e] = __bfloat162float(got_b[e]);

  char name[96];
  std::snprintf(name, sizeof(name), "rotary_t%d_h%d_d%d", tokens, heads, dim);
  return course::check_close_each_planted(name, got.data(), want.data(), atol.data(), n, 0x1.04p-8,
                                          plant ? 0x1p-7 : 0.0);
}

// --8<-- [start:bench]
// Llama-3.2-1B's heads (32 query and 8 key heads of 64) at 1 to 32,768 tokens. Bytes: every element
// read and written once, and each token's cos and sin row. The copy reference copies the same bytes.
static void bench_case(int tokens) {
  const int heads = 40, dim = 64;
  const size_t n = static_cast<size_t>(tokens) * heads * dim;
  __nv_bfloat16* x = course::device_alloc<__nv_bfloat16>(2 * n);  // the second half: the copy's target
  CUDA_CHECK(cudaMemset(x, 0x3C, 2 * n * sizeof(__nv_bfloat16)));
  std::vector<int> positions(tokens);
  for (int t = 0; t < tokens; ++t) positions[t] = t;
  std::vector<float> cos_t, sin_t;
  rotary_table(tokens, dim, cos_t, sin_t);
  int* d_pos = course::to_device(positions);
  float *d_cos = course::to_device(cos_t), *d_sin = course::to_device(sin_t);
  const double bytes = 2.0 * n * sizeof(__nv_bfloat16) + 2.0 * tokens * (dim / 2) * sizeof(float);
  const float ms = course::time_kernel_ms([&] { launch(x, d_pos, d_cos, d_sin, tokens, heads, dim); });
  const float copy_ms = course::time_kernel_ms([&] {
    CUDA_CHECK(cudaMemcpy(x + n, x, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice));
  });
  char case_name[32];
  std::snprintf(case_name, sizeof(case_name), "t%d", tokens);
  course::print_bench(case_name, "rotary (bf16, in place)", ms, bytes, 0.0, false, {{"tokens", tokens}});
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * n * sizeof(__nv_bfloat16), 0.0,
                      true, {{"tokens", tokens}});
  course::device_free({x, d_pos, d_cos, d_sin});
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int tokens = static_cast<int>(args.get_int("--tokens", 333, 1, 1 << 16));
  const int heads = static_cast<int>(args.get_int("--heads", 32, 1, 128));
  const int kv_heads = static_cast<int>(args.get_int("--kv-heads", 8, 1, 128));
  const int dim = static_cast<int>(args.get_int("--dim", 64, 16, 256));
  const course::RunOptions run(args);
  args.finish();
  course::require_multiple("--dim", dim, 16, "8 pairs per thread");
  const bool ok = check(tokens, heads + kv_heads, dim, run.seed, run.plant);
  if (ok && run.bench && !run.plant)
    for (const int t : {1, 64, 4096, 32768}) bench_case(t);
  return ok ? 0 : course::kExitFail;
}
