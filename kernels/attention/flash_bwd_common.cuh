// flash_bwd_common.cuh: what the chapter's two backward programs share: the parameters, the delta
// kernel that runs first, the dQ conversion that runs last, and the float64 reference gradients with the
// check that holds a gradient to them.
//
// Taught in docs/attention/backward.md; included by kernels/attention/flash_bwd.cu (versions 1 and 2,
// mma.sync) and kernels/attention/flash_hopper_bwd.cu (version 3, wgmma).
//   BwdParams          the inputs, the forward's O and logsumexp, delta, every version's outputs
//   bwd_delta          delta_i = rowsum(dO_i o O_i), one warp per row
//   bwd_dq_convert     dQ = scale * (the fp32 sum of every key tile's part), rounded to bf16
//   reference_gradients, check_gradient   the float64 reference and the data-scaled criterion
//
// course: header
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/cpu_threads.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "attention_common.cuh"
#include "flash_fwd.cuh"  // the forward that gives O and the logsumexp; warp_add

struct BwdParams {
  const __nv_bfloat16 *q, *k, *v, *o, *d_out;
  const float* lse;  // from the forward, natural log, +inf for a fully masked row
  const int* key_len;
  float* delta;                                // rowsum(dO o O), from bwd_delta
  float *dq, *dk, *dv;                         // version 1's outputs (fp32)
  __nv_bfloat16 *dq_bf16, *dk_bf16, *dv_bf16;  // versions 2 and 3's outputs (bf16, as PyTorch's)
  float* dq_accum;                             // versions 2 and 3's fp32 sum of dQ over key tiles
  int heads, seq;
  float scale;
  bool causal;
};

constexpr int kDeltaWarps = 8;  // rows per block of bwd_delta

// --8<-- [start:delta]
template <int D>
__global__ void __launch_bounds__(kDeltaWarps * 32) bwd_delta(BwdParams p, long long rows) {
  const long long r = blockIdx.x * 1LL * kDeltaWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  float x = 0.0f;
  for (int c = lane; c < D; c += 32)
    x += __bfloat162float(p.d_out[r * D + c]) * __bfloat162float(p.o[r * D + c]);
  x = warp_add(x);
  if (lane == 0) p.delta[r] = x;
}
// --8<-- [end:delta]

// dQ = scale * (the fp32 sum of every key tile's part), rounded to bf16.
__global__ void bwd_dq_convert(const float* __restrict__ dq_accum, __nv_bfloat16* __restrict__ dq, float scale,
                               long long n) {
  for (long long e = blockIdx.x * 1LL * blockDim.x + threadIdx.x; e < n; e += 1LL * gridDim.x * blockDim.x)
    dq[e] = __float2bfloat16(dq_accum[e] * scale);
}

// The float64 reference gradients of the (batch, head)s to check, computed once per shape on every
// CPU core: every (batch, head) where the budget allows (query rows x keys x dim, about 4 times the
// forward reference's work per unit), otherwise evenly spaced ones, the first and last included: 9
// of the 64 at the benchmark's size without the mask, 18 with it (a benchmark's repeat timing
// process checks the first and last: course::is_timing_repeat). Each comes exact, and rounded as
// version 1 and as versions 2 and 3 compute (attention_common.cuh's reference_dq and reference_dkdv).
struct ReferenceGradients {
  std::vector<long long> heads;
  std::vector<double> exact[3], fp32[3], bf16[3];  // dQ, dK, dV of the checked heads, one after the other
};

inline ReferenceGradients reference_gradients(const attn::Shape& s, const attn::Inputs& in,
                                              const std::vector<float>& d_out, double budget = 2e10) {
  ReferenceGradients ref;
  if (course::is_timing_repeat()) budget /= 16;
  const long long bh_count = 1LL * s.batch * s.heads, per_head = 1LL * s.seq * s.dim;
  const double head_cost = 1.0 * s.seq * s.seq * s.dim * (s.causal ? 0.5 : 1.0);
  const long long count = std::min(bh_count, std::max(2LL, static_cast<long long>(budget / head_cost)));
  for (long long t = 0; t < count; ++t) ref.heads.push_back(count == 1 ? 0 : t * (bh_count - 1) / (count - 1));
  ref.heads.erase(std::unique(ref.heads.begin(), ref.heads.end()), ref.heads.end());
  const size_t total = ref.heads.size() * per_head;
  for (int g = 0; g < 3; ++g) ref.exact[g].resize(total), ref.fp32[g].resize(total), ref.bf16[g].resize(total);
  auto gradients = [&](std::vector<double>* x, long long h) {
    return attn::Gradients{&x[0][h * per_head], &x[1][h * per_head], &x[2][h * per_head]};
  };
  // Each head's rows (and keys) in `parts` slices, one task each, so that every core is busy even when
  // few heads are checked: first the rows' logsumexp and delta, then dQ by rows and dK, dV by keys.
  const long long cores = static_cast<long long>(course::cpu_threads()), heads = ref.heads.size();
  const int parts = static_cast<int>(std::min<long long>(s.seq, std::max(1LL, (4 * cores + heads - 1) / heads)));
  auto slice = [&](long long task, int& from, int& to) {
    const int part = static_cast<int>(task % parts);
    from = static_cast<int>(1LL * s.seq * part / parts), to = static_cast<int>(1LL * s.seq * (part + 1) / parts);
  };
  std::vector<attn::RowStats> rows(heads * s.seq);
  attn::parallel_for(heads * parts, [&](long long task) {
    int from, to;
    slice(task, from, to);
    for (int i = from; i < to; ++i)
      rows[task / parts * s.seq + i] = attn::reference_row_stats(s, in.q.data(), in.k.data(), in.v.data(),
                                                                 d_out.data(), ref.heads[task / parts], i);
  });
  attn::parallel_for(2 * heads * parts, [&](long long task) {
    const long long h = task / 2 / parts;
    int from, to;
    slice(task / 2, from, to);
    const attn::Gradients exact = gradients(ref.exact, h), fp32 = gradients(ref.fp32, h);
    const attn::Gradients bf16 = gradients(ref.bf16, h);
    const auto pass = task % 2 ? attn::reference_dkdv : attn::reference_dq;  // keys [from, to) or rows
    pass(s, in.q.data(), in.k.data(), in.v.data(), d_out.data(), ref.heads[h], &rows[h * s.seq], exact, &fp32, &bf16,
         from, to);
  });
  attn::parallel_for(heads, [&](long long h) {
    const attn::Gradients exact = gradients(ref.exact, h), fp32 = gradients(ref.fp32, h);
    const attn::Gradients bf16 = gradients(ref.bf16, h);
    attn::round_gradients(per_head, exact, &fp32, &bf16);
  });
  return ref;
}

// One gradient (0 dQ, 1 dK, 2 dV) of the checked heads against the reference: version 1's fp32 or
// version 2 or 3's bf16 output. With a plant, only the planted verdict is printed.
template <typename T>
bool check_gradient(int which, const std::string& prefix, const std::string& name, const attn::Shape& s,
                    const ReferenceGradients& ref, const T* device, attn::Plant plant) {
  static const char* kNames[] = {"dQ", "dK", "dV"};
  const std::vector<T> got_all = attn::to_host(device, s.elements());
  const long long per_head = 1LL * s.seq * s.dim;
  std::vector<float> got;
  for (long long bh : ref.heads)
    for (long long e = bh * per_head; e < (bh + 1) * per_head; ++e) got.push_back(static_cast<float>(got_all[e]));
  const std::vector<double>& exact = ref.exact[which];
  const std::vector<double>& rounded = std::is_same<T, float>::value ? ref.fp32[which] : ref.bf16[which];
  if (plant != attn::Plant::kNone)
    return attn::report_planted(plant, std::string("_") + kNames[which], got, exact.data(), rounded.data(), s.dim,
                                attn::kOldAtolGrad);
  const attn::Verdict v = attn::compare_scaled(got.data(), exact.data(), rounded.data(), got.size(),
                                               attn::kGroupRows * s.dim);
  return attn::report(prefix + kNames[which] + " " + name, v);
}
