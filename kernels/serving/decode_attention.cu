// decode_attention.cu: attention of one new query token per sequence against a long bf16 KV cache,
// with grouped-query attention (several query heads share one KV head) and split-KV (flash-decoding):
//   decode_split  one block per (chunk of the cache, KV head, sequence) reads its chunk of K and V once
//                 for every query head of the group and writes a partial result: the running maximum,
//                 the sum of exponentials and the unnormalised output, in fp32;
//   decode_merge  one block per (sequence, query head) merges the chunks' partials with the
//                 log-sum-exp rule and writes the output in bf16.
//
// Taught in docs/serving/decode-attention.md; its peer is decode_attention_sdpa.py (every PyTorch SDPA
// backend at the same shapes). Layouts: q and the output [batch][heads][dim], the caches
// [batch][kv_heads][capacity][dim], lengths[batch] in [0, capacity]; query head h reads KV head
// h / (heads / kv_heads), as PyTorch's enable_gqa does. A sequence with an empty cache gets zeros.
// Build: python -m course.toolchain build kernels/serving/decode_attention.cu
// Run:   ./build/serving/decode_attention --batch 5 --context 4999 --cache 5003   (checks against float64)
//        ./build/serving/decode_attention --bench          (also contexts 1k to 128k, batch 1 to 64)
//
// course: gpu
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 4999 --cache 5003 --seed 31
// course: run --batch 4 --heads 12 --kv-heads 12 --dim 128 --context 777 --seed 32
// course: run --batch 4 --heads 16 --kv-heads 2 --dim 64 --context 70001 --seed 33
// course: run --batch 1 --heads 32 --kv-heads 8 --dim 64 --context 1 --seed 34
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 1999 --seed 35 --plant tile
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 1999 --seed 36 --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <cmath>
#include <string>
#include <vector>

#include "../attention/attention_common.cuh"
#include "../common/course.cuh"
#include "bf16_vectors.cuh"

namespace decode {

struct Problem {
  int batch = 1, heads = 32, kv_heads = 8, dim = 64, capacity = 1;  // capacity: cache slots per sequence
  std::vector<int> lengths;                                          // cached tokens per sequence
  int group() const { return heads / kv_heads; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(dim)); }
  size_t q_elements() const { return static_cast<size_t>(batch) * heads * dim; }
  size_t cache_elements() const { return static_cast<size_t>(batch) * kv_heads * capacity * dim; }
};

// A context longer than the cache would read past the sequence's slots: refused before any launch.
inline bool lengths_fit(const Problem& p, bool quiet = false) {
  for (int b = 0; b < p.batch; ++b)
    if (p.lengths[b] < 0 || p.lengths[b] > p.capacity) {
      if (!quiet)
        std::fprintf(stderr, "error: sequence %d has a context of %d tokens but its cache holds %d slots\n", b,
                     p.lengths[b], p.capacity);
      return false;
    }
  return true;
}

// --8<-- [start:reference]
// float64 reference for every (sequence, query head): softmax(q K^T / sqrt(dim)) V over the first
// lengths[b] cache slots of KV head h / group; zeros for an empty cache.
inline std::vector<double> reference(const Problem& p, const float* q, const float* k, const float* v) {
  std::vector<double> out(p.q_elements(), 0.0);
  attn::parallel_for(static_cast<long long>(p.batch) * p.heads, [&](long long row) {
    const int b = static_cast<int>(row / p.heads), h = static_cast<int>(row % p.heads), len = p.lengths[b];
    const size_t head = (static_cast<size_t>(b) * p.kv_heads + h / p.group()) * p.capacity;
    const float* qr = q + row * p.dim;
    std::vector<double> score(len);
    double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (int j = 0; j < len; ++j) {
      double dot = 0.0;
      for (int c = 0; c < p.dim; ++c) dot += static_cast<double>(qr[c]) * k[(head + j) * p.dim + c];
      score[j] = dot * p.scale();
      m = std::max(m, score[j]);
    }
    double* o = out.data() + row * p.dim;
    for (int j = 0; j < len; ++j) {
      const double w = std::exp(score[j] - m);
      sum += w;
      for (int c = 0; c < p.dim; ++c) o[c] += w * v[(head + j) * p.dim + c];
    }
    for (int c = 0; c < p.dim && len > 0; ++c) o[c] /= sum;
  });
  return out;
}
// --8<-- [end:reference]

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kUnroll = 4;        // keys per lane group per step: 2 x kUnroll 16-byte loads in flight
constexpr int kChunkMultiple = 64;  // a chunk is whole steps of every layout below
constexpr float kLog2e = 1.4426950408889634f;

// --8<-- [start:layout]
// Each lane reads 8 bf16 (16 bytes) of a key row: a row of dim values is read by dim / 8 adjacent
// lanes (a "lane group"), so a warp reads 32 / (dim / 8) consecutive rows with one coalesced load.
template <int kDim>
struct Layout {
  static constexpr int kLanesPerKey = kDim / 8;
  static constexpr int kKeysPerWarp = 32 / kLanesPerKey;
  static constexpr int kKeysPerStep = kWarps * kKeysPerWarp * kUnroll;  // 64 for dim 64, 32 for dim 128
  static_assert(kChunkMultiple % kKeysPerStep == 0, "a chunk must be whole steps");
};
// --8<-- [end:layout]

// --8<-- [start:merge_rule]
// The log-sum-exp merge of two partial results (m, l, acc) over disjoint sets of keys, m in log2
// units: rescale both to the larger maximum and add. A side with no keys has m = -inf and l = acc = 0;
// if both are empty the maximum stays -inf and exp2 is taken against 0 instead, giving 0, not NaN.
struct Rescale {
  float a, b, m;
};
__device__ __forceinline__ Rescale merge_factors(float m_a, float m_b) {
  const float m = fmaxf(m_a, m_b);
  const float base = m == -INFINITY ? 0.0f : m;
  return {exp2f(m_a - base), exp2f(m_b - base), m};
}
// --8<-- [end:merge_rule]

// --8<-- [start:split]
template <int kDim, int kGroup>
__global__ void __launch_bounds__(kThreads)
    decode_split(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
                 const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ lengths, int kv_heads,
                 int capacity, int chunk, float scale_log2, float* __restrict__ part_acc,
                 float2* __restrict__ part_ml) {
  using L = Layout<kDim>;
  const int split = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane / L::kLanesPerKey, part = lane % L::kLanesPerKey;  // which row of the warp's, which 8 dims
  const int heads = kv_heads * kGroup;
  const int len = min(lengths[b], capacity);
  const int begin = split * chunk, end = min(begin + chunk, len);

  // The group's query heads, 8 dims per lane, scaled so that scores come out in log2 units.
  float qf[kGroup][8];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const size_t row = static_cast<size_t>(b) * heads + kv_head * kGroup + g;
    unpack8(*reinterpret_cast<const uint4*>(q + row * kDim + part * 8), qf[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i) qf[g][i] *= scale_log2;
  }
  float m[kGroup], l[kGroup], acc[kGroup][8];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }

  const size_t head = (static_cast<size_t>(b) * kv_heads + kv_head) * capacity;  // this head's first slot
  const uint4* k_rows = reinterpret_cast<const uint4*>(k_cache + head * kDim) + part;
  const uint4* v_rows = reinterpret_cast<const uint4*>(v_cache + head * kDim) + part;

  for (int base = begin; base < end; base += L::kKeysPerStep) {
    // Issue every load of the step first: 2 x kUnroll independent 16-byte loads per lane in flight.
    uint4 kr[kUnroll], vr[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int key = base + (u * kWarps + warp) * L::kKeysPerWarp + sub;
      valid[u] = key < end;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (valid[u]) {
        kr[u] = k_rows[static_cast<size_t>(key) * L::kLanesPerKey];
        vr[u] = v_rows[static_cast<size_t>(key) * L::kLanesPerKey];
      }
    }
    // Scores: each lane's 8-term partial dot product, summed over the lane group by shuffles (every
    // lane of the warp takes part; a key past the end gets -inf after the sum).
    float s[kUnroll][kGroup];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8];
      unpack8(kr[u], kf);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(qf[g][i], kf[i], dot);
#pragma unroll
        for (int offset = L::kLanesPerKey / 2; offset > 0; offset /= 2)
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[u][g] = valid[u] ? dot : -INFINITY;
      }
    }
    // Online softmax over the step's keys, then P V for this lane's 8 dims.
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float m_step = s[0][g];
#pragma unroll
      for (int u = 1; u < kUnroll; ++u) m_step = fmaxf(m_step, s[u][g]);
      const Rescale r = merge_factors(m[g], m_step);
      const float base_m = r.m == -INFINITY ? 0.0f : r.m;
      l[g] *= r.a;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] *= r.a;
      m[g] = r.m;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float w = exp2f(s[u][g] - base_m);  // 0 for a key past the end
        float vf[8];
        unpack8(vr[u], vf);
        l[g] += w;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(w, vf[i], acc[g][i]);
      }
    }
  }

  // Merge the warp's lane groups (they saw different keys), then the warps through shared memory.
#pragma unroll
  for (int offset = L::kLanesPerKey; offset < 32; offset *= 2) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const float m_other = __shfl_xor_sync(0xffffffffu, m[g], offset);
      const float l_other = __shfl_xor_sync(0xffffffffu, l[g], offset);
      const Rescale r = merge_factors(m[g], m_other);
      l[g] = l[g] * r.a + l_other * r.b;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * r.a + __shfl_xor_sync(0xffffffffu, acc[g][i], offset) * r.b;
      m[g] = r.m;
    }
  }
  __shared__ float warp_acc[kWarps][kGroup][kDim];
  __shared__ float warp_m[kWarps][kGroup], warp_l[kWarps][kGroup];
  if (sub == 0) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
#pragma unroll
      for (int i = 0; i < 8; ++i) warp_acc[warp][g][part * 8 + i] = acc[g][i];
      if (part == 0) warp_m[warp][g] = m[g], warp_l[warp][g] = l[g];
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < kGroup * kDim; t += kThreads) {
    const int g = t / kDim, d = t % kDim;
    float m_all = -INFINITY, l_all = 0.0f, acc_all = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const Rescale r = merge_factors(m_all, warp_m[w][g]);
      l_all = l_all * r.a + warp_l[w][g] * r.b;
      acc_all = acc_all * r.a + warp_acc[w][g][d] * r.b;
      m_all = r.m;
    }
    const size_t row = (static_cast<size_t>(b) * heads + kv_head * kGroup + g) * splits + split;
    part_acc[row * kDim + d] = acc_all;
    if (d == 0) part_ml[row] = make_float2(m_all, l_all);
  }
}
// --8<-- [end:split]

// --8<-- [start:merge]
// One block per (sequence, query head), one thread per dim: the chunks' partials merged in order.
template <int kDim>
__global__ void __launch_bounds__(kDim)
    decode_merge(const float* __restrict__ part_acc, const float2* __restrict__ part_ml, int splits,
                 __nv_bfloat16* __restrict__ out) {
  const size_t row = blockIdx.x;
  const int d = threadIdx.x;
  float m = -INFINITY, l = 0.0f, acc = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float2 ml = part_ml[row * splits + s];
    const Rescale r = merge_factors(m, ml.x);
    l = l * r.a + ml.y * r.b;
    acc = acc * r.a + part_acc[(row * splits + s) * kDim + d] * r.b;
    m = r.m;
  }
  out[row * kDim + d] = __float2bfloat16(m == -INFINITY ? 0.0f : acc / l);  // empty cache: zeros
}
// --8<-- [end:merge]

// --8<-- [start:plan]
// How many chunks per sequence: enough blocks to give every SM several (a batch-1 decode has only
// kv_heads blocks without splitting), in chunks of at least kChunkMultiple keys.
struct Plan {
  int splits = 1, chunk = kChunkMultiple;
};
inline Plan plan(const Problem& p, int sm_count, int forced_splits = 0) {
  const int max_len = *std::max_element(p.lengths.begin(), p.lengths.end());
  const int wanted = forced_splits > 0 ? forced_splits : course::ceil_div(4 * sm_count, p.batch * p.kv_heads);
  const int splits = std::clamp(wanted, 1, std::max(1, course::ceil_div(max_len, kChunkMultiple)));
  Plan pl;
  pl.chunk = course::ceil_div(course::ceil_div(std::max(max_len, 1), splits), kChunkMultiple) * kChunkMultiple;
  pl.splits = std::max(1, course::ceil_div(max_len, pl.chunk));  // no chunk wholly past every sequence
  return pl;
}
// --8<-- [end:plan]

// The device buffers of one problem: inputs, the partials for `splits` chunks, the output.
struct Buffers {
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  int* lengths = nullptr;
  float* part_acc = nullptr;
  float2* part_ml = nullptr;
  void release() const { course::device_free({q, k, v, out, lengths, part_acc, part_ml}); }
};

inline void allocate_partials(const Problem& p, const Plan& pl, Buffers& d) {
  const size_t rows = p.q_elements() / p.dim * pl.splits;
  course::device_free({d.part_acc, d.part_ml});
  d.part_acc = course::device_alloc<float>(rows * p.dim);
  d.part_ml = course::device_alloc<float2>(rows);
  course::poison(d.part_acc, rows * p.dim * sizeof(float));  // a partial never written poisons the output
  course::poison(d.part_ml, rows * sizeof(float2));
}

template <int kDim, int kGroup>
void launch_typed(const Problem& p, const Plan& pl, const Buffers& d) {
  const float scale_log2 = static_cast<float>(p.scale()) * kLog2e;
  decode_split<kDim, kGroup><<<dim3(pl.splits, p.kv_heads, p.batch), kThreads>>>(
      d.q, d.k, d.v, d.lengths, p.kv_heads, p.capacity, pl.chunk, scale_log2, d.part_acc, d.part_ml);
  CUDA_CHECK_LAUNCH();
  decode_merge<kDim><<<p.batch * p.heads, kDim>>>(d.part_acc, d.part_ml, pl.splits, d.out);
  CUDA_CHECK_LAUNCH();
}

template <int kDim>
void launch_dim(const Problem& p, const Plan& pl, const Buffers& d) {
  switch (p.group()) {
    case 1: return launch_typed<kDim, 1>(p, pl, d);
    case 2: return launch_typed<kDim, 2>(p, pl, d);
    case 4: return launch_typed<kDim, 4>(p, pl, d);
    default: return launch_typed<kDim, 8>(p, pl, d);  // supported() admits 1, 2, 4, 8 only
  }
}

inline bool supported(const Problem& p) {
  const int g = p.kv_heads > 0 && p.heads % p.kv_heads == 0 ? p.group() : 0;
  if ((p.dim == 64 || p.dim == 128) && (g == 1 || g == 2 || g == 4 || g == 8)) return true;
  std::fprintf(stderr, "error: needs --dim 64 or 128 and --heads a multiple of --kv-heads by 1, 2, 4 or 8 "
                       "(got dim %d, heads %d, kv-heads %d)\n", p.dim, p.heads, p.kv_heads);
  return false;
}

inline void launch(const Problem& p, const Plan& pl, const Buffers& d) {
  if (p.dim == 64) launch_dim<64>(p, pl, d);
  else launch_dim<128>(p, pl, d);
}

// Device-side random bf16 values in [lo, hi) for the benchmark caches (gigabytes: too slow on the host).
__global__ void fill_random(__nv_bfloat16* x, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t h = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31, h *= 0x94D049BB133111EBull, h ^= h >> 29;
    x[i] = __float2bfloat16(lo + (hi - lo) * static_cast<float>(h >> 40) * 0x1p-24f);
  }
}

}  // namespace decode

// Lengths that exercise every edge: sequence 0 the full context, 1 about two thirds (odd), 2 an empty
// cache, 3 a single token, then again.
static std::vector<int> edge_lengths(int batch, int context) {
  std::vector<int> len(batch);
  for (int b = 0; b < batch; ++b)
    len[b] = b % 4 == 0 ? context : b % 4 == 1 ? std::min(context, (2 * context / 3) | 1) : b % 4 == 2 ? 0 : 1;
  if (batch == 1) len[0] = context;
  return len;
}

static int sm_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// Checks the kernels on one problem: random q, K, V rounded to bf16, NaN in every cache slot past a
// sequence's length (a read past it poisons the output), the output poisoned; split as planned and
// in one chunk; each against float64 with the chapter's data-scaled tolerance.
static bool check(const decode::Problem& p, uint64_t seed, attn::Plant plant) {
  std::vector<float> q(p.q_elements()), k(p.cache_elements()), v(p.cache_elements());
  course::fill_uniform(q, seed, -2.0f, 2.0f);
  course::fill_uniform(k, seed + 1, -2.0f, 2.0f);
  course::fill_uniform(v, seed + 2, -1.0f, 1.0f);
  std::vector<__nv_bfloat16> qb, kb, vb;
  attn::round_to_bf16(q, qb), attn::round_to_bf16(k, kb), attn::round_to_bf16(v, vb);
  const __nv_bfloat16 nan = __float2bfloat16(NAN);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.kv_heads; ++h)
      for (size_t j = p.lengths[b]; j < static_cast<size_t>(p.capacity); ++j)
        for (int c = 0; c < p.dim; ++c) {
          const size_t e = ((static_cast<size_t>(b) * p.kv_heads + h) * p.capacity + j) * p.dim + c;
          kb[e] = vb[e] = nan;
        }
  const std::vector<double> exact = decode::reference(p, q.data(), k.data(), v.data());
  std::vector<double> rounded(exact.size());  // the kernel's only rounding: the output to bf16
  for (size_t e = 0; e < exact.size(); ++e) rounded[e] = attn::round_bf16(exact[e]);

  decode::Buffers d;
  d.q = course::to_device(qb), d.k = course::to_device(kb), d.v = course::to_device(vb);
  d.lengths = course::to_device(p.lengths);
  d.out = course::device_alloc<__nv_bfloat16>(p.q_elements());
  bool ok = true;
  for (const int forced : {0, 1}) {
    const decode::Plan pl = decode::plan(p, sm_count(), forced);
    decode::allocate_partials(p, pl, d);
    course::poison(d.out, p.q_elements() * sizeof(__nv_bfloat16));
    decode::launch(p, pl, d);
    const std::vector<__nv_bfloat16> out_b = course::to_host(d.out, p.q_elements());
    std::vector<float> got(out_b.size());
    for (size_t e = 0; e < got.size(); ++e) got[e] = __bfloat162float(out_b[e]);
    if (plant != attn::Plant::kNone) {
      ok = attn::report_planted(plant, "", got, exact.data(), rounded.data(), p.dim, attn::kOldAtolOut) && ok;
      break;
    }
    char name[160];
    std::snprintf(name, sizeof(name), "decode b%d hq%d hkv%d d%d ctx%d cache%d splits%d", p.batch, p.heads,
                  p.kv_heads, p.dim, p.lengths[0], p.capacity, pl.splits);
    ok = attn::report(name, attn::compare_scaled(got.data(), exact.data(), rounded.data(), got.size(),
                                                 attn::kGroupRows * p.dim)) && ok;
  }
  d.release();
  // The guard itself: a length past the cache is refused (quietly here; main prints the error).
  decode::Problem longer = p;
  longer.lengths[0] = p.capacity + 1;
  ok = course::check_true("rejects_context_longer_than_cache", !decode::lengths_fit(longer, true), 1) && ok;
  return ok;
}

// --8<-- [start:bench]
// The benchmark: Llama-3.2-1B's attention (32 query heads, 8 KV heads, dim 64), every sequence at the
// same context; bytes are the K and V cache read (q and the output are under 0.1% of it). The ceiling
// is a device-to-device copy moving the same bytes (half read, half written).
static void bench_case(int batch, int context, uint64_t seed) {
  decode::Problem p{batch, 32, 8, 64, context, std::vector<int>(batch, context)};
  const double cache_bytes = 2.0 * p.cache_elements() * sizeof(__nv_bfloat16);
  decode::Buffers d;
  d.q = course::device_alloc<__nv_bfloat16>(p.q_elements());
  d.k = course::device_alloc<__nv_bfloat16>(p.cache_elements());
  d.v = course::device_alloc<__nv_bfloat16>(p.cache_elements());
  d.out = course::device_alloc<__nv_bfloat16>(p.q_elements());
  d.lengths = course::to_device(p.lengths);
  decode::fill_random<<<1024, 256>>>(d.q, p.q_elements(), seed, -2.0f, 2.0f);
  decode::fill_random<<<4096, 256>>>(d.k, p.cache_elements(), seed + 1, -2.0f, 2.0f);
  decode::fill_random<<<4096, 256>>>(d.v, p.cache_elements(), seed + 2, -1.0f, 1.0f);
  CUDA_CHECK_LAUNCH();
  const decode::Plan pl = decode::plan(p, sm_count());
  decode::allocate_partials(p, pl, d);
  const float ms = course::time_kernel_ms([&] { decode::launch(p, pl, d); });
  const float copy_ms = course::time_kernel_ms([&] {
    CUDA_CHECK(cudaMemcpy(d.v, d.k, p.cache_elements() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice));
  });
  char case_name[48];
  std::snprintf(case_name, sizeof(case_name), "b%d ctx%d", batch, context);
  const double flops = 4.0 * p.batch * p.heads * static_cast<double>(context) * p.dim;
  course::print_bench(case_name, "split-KV decode (bf16)", ms, cache_bytes, flops, false,
                      {{"batch", batch}, {"context", context}, {"chunks", pl.splits}});
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, cache_bytes, 0.0, true,
                      {{"batch", batch}, {"context", context}});
  d.release();
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  decode::Problem p;
  p.batch = static_cast<int>(args.get_int("--batch", 5, 1, 64));
  p.heads = static_cast<int>(args.get_int("--heads", 32, 1, 128));
  p.kv_heads = static_cast<int>(args.get_int("--kv-heads", 8, 1, 128));
  p.dim = static_cast<int>(args.get_int("--dim", 64, 64, 128));
  const int context = static_cast<int>(args.get_int("--context", 4999, 0, 1 << 17));
  const int cache = static_cast<int>(args.get_int("--cache", 0, 0, 1 << 17));  // 0: as long as the context
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool bench = args.has("--bench");
  const std::string plant = args.get_str("--plant", "none");
  args.finish();
  if (plant != "none" && plant != "zeros-small" && plant != "tile") {
    std::fprintf(stderr, "error: --plant expects none, zeros-small or tile, got '%s'\n", plant.c_str());
    return course::kExitFail;
  }
  p.capacity = std::max(1, cache > 0 ? cache : context);
  p.lengths = edge_lengths(p.batch, context);
  if (!decode::supported(p) || !decode::lengths_fit(p)) return course::kExitFail;

  const attn::Plant fault = plant == "tile" ? attn::Plant::kTile
                            : plant == "zeros-small" ? attn::Plant::kZerosSmall
                                                     : attn::Plant::kNone;
  const bool ok = check(p, seed, fault);
  if (ok && bench && fault == attn::Plant::kNone)
    for (const int batch : {1, 8, 64})
      for (const int ctx : {1024, 8192, 32768, 131072}) bench_case(batch, ctx, seed);
  return ok ? 0 : course::kExitFail;
}
