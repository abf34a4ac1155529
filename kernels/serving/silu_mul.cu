// silu_mul.cu: the MLP's SiLU-and-multiply, as vLLM's silu_and_mul computes it. The input of each token
// is the gate and up projections side by side, [tokens][2 * inter] in bf16 (gate: the first inter
// columns, up: the last inter); the output is [tokens][inter]:
//   out[t][i] = bf16( silu(gate[t][i]) * up[t][i] ),   silu(x) = x / (1 + exp(-x)),
// computed in fp32 and rounded to bf16 once. Each element of gate and up is read once and each output
// written once: six bytes per output element, all the operation needs.
//
// Taught in docs/serving/fused-small.md; its peer is silu_mul_torch.py (F.silu(gate) * up in PyTorch:
// eager, CUDA graph, every torch.compile mode).
// Build: python -m course.toolchain build-all 1 kernels/serving/silu_mul.cu
// Run:   ./build/serving/silu_mul --tokens 3 --inter 11008     (checks against float64)
//        ./build/serving/silu_mul --bench                      (also times it against a copy)
//
// course: gpu
// course: run --tokens 3 --inter 11008 --seed 81
// course: run --tokens 1 --inter 1 --seed 82
// course: run --tokens 3 --inter 7 --seed 83
// course: run --tokens 64 --inter 4099 --seed 84
// course: run --tokens 64 --inter 8192 --seed 85
// course: run --tokens 3 --inter 14336 --seed 86
// course: run --tokens 0 --inter 8192 --seed 87
// course: run --tokens 64 --inter 8192 --seed 88 --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "bf16_checks.cuh"
#include "silu_mul.cuh"

using swiglu::kThreads, swiglu::silu_mul;
constexpr int kMaxGridRows = 65535;  // gridDim.y's limit: more tokens than this are strided over

// --8<-- [start:reference]
// float64 reference: the kernel's formula on the same bf16 inputs, not rounded (the check allows the
// kernel's one rounding to bf16). exp(-x) overflows only past x = -709 here, and x / inf is -0 as in fp32.
static double silu_reference(double x) { return x / (1.0 + std::exp(-x)); }
// --8<-- [end:reference]


// Zero tokens launch nothing: an empty grid is a launch error, not an empty launch.
static void launch(const __nv_bfloat16* in, __nv_bfloat16* out, int tokens, int inter) {
  if (tokens == 0) return;
  const bool vectors = inter % 8 == 0;
  const int units = vectors ? inter / 8 : inter;
  const dim3 grid(static_cast<unsigned>(course::ceil_div(units, kThreads)),
                  static_cast<unsigned>(std::min(tokens, kMaxGridRows)));
  if (vectors)
    silu_mul<true><<<grid, kThreads>>>(in, out, tokens, inter);
  else
    silu_mul<false><<<grid, kThreads>>>(in, out, tokens, inter);
  CUDA_CHECK_LAUNCH();
}

// Zero tokens: the launcher must return without touching the output (a sentinel pattern stays) and
// without a launch error.
static bool check_empty(int inter) {
  const size_t n = static_cast<size_t>(inter);
  __nv_bfloat16* d_in = course::device_alloc<__nv_bfloat16>(2 * n);
  __nv_bfloat16* d_out = course::device_alloc<__nv_bfloat16>(n);
  CUDA_CHECK(cudaMemset(d_in, 0x3C, 2 * n * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMemset(d_out, 0x5A, n * sizeof(__nv_bfloat16)));
  launch(d_in, d_out, 0, inter);
  CUDA_CHECK(cudaDeviceSynchronize());
  char name[64];
  std::snprintf(name, sizeof(name), "silu_mul_t0_i%d_launches_nothing", inter);
  const bool ok = check_sentinel_unchanged(name, d_out, n);
  course::device_free({d_in, d_out});
  return ok;
}

// The adversarial (gate, up) pairs written at the start of the last token's row when there are at least
// two tokens: exp overflow on both sides, the largest finite bf16 range, zeros and infinities, NaN.
struct Pair {
  float gate, up;
};
static const Pair kAdversarial[] = {
    {88.0f, 1.5f},    {-88.0f, 1.5f},  {100.0f, -0.75f}, {-100.0f, 2.0f},  {-90.0f, 100.0f},
    {-1000.0f, 1.0f}, {0.0f, 3.0f},    {-0.0f, -3.0f},    {1.0f, 0.0f},     {30000.0f, 30000.0f},
    {INFINITY, 0.5f}, {-INFINITY, 1.0f}, {NAN, 1.0f},     {1.0f, INFINITY}, {-2.0f, NAN},
};

// Random gate in [-10, 10] and up in [-4, 4] rounded to bf16, every third token 2^-20 times smaller in
// both (course::quiet_rows: its outputs are small, and must be held to their own size), the adversarial
// pairs in the last token; output poisoned with NaN before the run. Each element must lie within one
// bf16 rounding (2^-8 relative) of the float64 value, plus a little for the fp32 arithmetic, plus an
// absolute floor of 2^-120 (|up| + 1) for the values below fp32's range (silu past exp's overflow, a
// product that underflows). Where the reference is NaN the output must be NaN.
static bool check(int tokens, int inter, uint64_t seed, bool plant) {
  const size_t n = static_cast<size_t>(tokens) * inter;
  std::vector<float> gate(n), up(n);
  course::fill_uniform(gate, seed, -10.0f, 10.0f);
  course::fill_uniform(up, seed + 1, -4.0f, 4.0f);
  course::quiet_rows(gate, tokens, inter);
  course::quiet_rows(up, tokens, inter);
  if (tokens >= 2) {
    const size_t last = static_cast<size_t>(tokens - 1) * inter;
    const size_t count = std::min(std::size(kAdversarial), static_cast<size_t>(inter));
    for (size_t k = 0; k < count; ++k) gate[last + k] = kAdversarial[k].gate, up[last + k] = kAdversarial[k].up;
  }
  std::vector<__nv_bfloat16> gate_b, up_b;  // rounds gate and up to bf16 in place, too
  course::round_to_bf16(gate, gate_b);
  course::round_to_bf16(up, up_b);
  std::vector<__nv_bfloat16> in_b(2 * n);  // each token's row: its gate, then its up
  for (int t = 0; t < tokens; ++t) {
    const size_t row = static_cast<size_t>(t) * inter;
    std::copy(gate_b.begin() + row, gate_b.begin() + row + inter, in_b.begin() + 2 * row);
    std::copy(up_b.begin() + row, up_b.begin() + row + inter, in_b.begin() + 2 * row + inter);
  }

  std::vector<double> want(n), atol(n);
  for (size_t e = 0; e < n; ++e) {
    want[e] = silu_reference(gate[e]) * up[e];
    atol[e] = 0x1p-120 * (std::fabs(static_cast<double>(up[e])) + 1.0);
  }

  __nv_bfloat16* d_in = course::to_device(in_b);
  __nv_bfloat16* d_out = course::device_alloc<__nv_bfloat16>(n);
  course::poison(d_out, n * sizeof(__nv_bfloat16));
  launch(d_in, d_out, tokens, inter);
  const std::vector<__nv_bfloat16> got_b = course::to_host(d_out, n);
  course::device_free({d_in, d_out});

  char name[96];
  std::snprintf(name, sizeof(name), "silu_mul_t%d_i%d", tokens, inter);
  return check_bf16_with_nans(name, got_b, want, atol, 0x1.04p-8, plant ? 0x1p-7 : 0.0);
}

// --8<-- [start:bench]
// Bytes: gate and up read (4 inter bytes a token), out written (2 inter). The copy reference copies half of
// those bytes into the other half of the same buffer.
static void bench_case(int tokens, int inter) {
  const size_t n = static_cast<size_t>(tokens) * inter;
  __nv_bfloat16* buf = course::device_alloc<__nv_bfloat16>(3 * n);  // in: 2n, out: n
  __nv_bfloat16 *in = buf, *out = buf + 2 * n;
  CUDA_CHECK(cudaMemset(buf, 0x3C, 3 * n * sizeof(__nv_bfloat16)));  // 0x3C3C: a bf16 near 0.01
  const double bytes = 3.0 * n * sizeof(__nv_bfloat16);
  const size_t half_bytes = 3 * n;  // 3n bytes read, 3n written: the same 6n bytes
  const float ms = course::time_kernel_ms([&] { launch(in, out, tokens, inter); });
  const float copy_ms = course::time_kernel_ms([&] {
    char* base = reinterpret_cast<char*>(buf);
    CUDA_CHECK(cudaMemcpy(base + half_bytes, base, half_bytes, cudaMemcpyDeviceToDevice));
  });
  char case_name[48];
  std::snprintf(case_name, sizeof(case_name), "t%d i%d", tokens, inter);
  course::print_bench(case_name, "silu_mul (bf16)", ms, bytes, 0.0, false, {{"tokens", tokens}, {"inter", inter}});
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * half_bytes, 0.0, true,
                      {{"tokens", tokens}, {"inter", inter}});
  course::device_free({buf});
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int tokens = static_cast<int>(args.get_int("--tokens", 333, 0, 1 << 20));
  const int inter = static_cast<int>(args.get_int("--inter", 8192, 1, 1 << 20));
  const course::RunOptions run(args);
  args.finish();
  if (static_cast<double>(tokens) * inter > (1 << 28)) {
    std::fprintf(stderr, "error: --tokens x --inter must be at most 2^28 elements\n");
    return course::kExitFail;
  }
  if (tokens == 0 && run.plant) {
    std::fprintf(stderr, "error: --plant needs outputs to plant zeros in (--tokens of at least 1)\n");
    return course::kExitFail;
  }
  const bool ok = tokens == 0 ? check_empty(inter) : check(tokens, inter, run.seed, run.plant);
  if (ok && run.bench && !run.plant)
    for (const int t : {1, 64, 4096, 32768}) bench_case(t, 8192);
  return ok ? 0 : course::kExitFail;
}
