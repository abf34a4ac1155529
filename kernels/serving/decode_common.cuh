// decode_common.cuh: the pieces of split-KV decode attention that a contiguous and a paged KV cache
// share: the problem, the float64 reference, the lane layout, the log-sum-exp merge, the split and merge
// kernels and their plan. The split kernel reads keys through a cache policy (`Cache`) that maps a
// (sequence, KV head, token) to a row of the K and V buffers: ContiguousCache below for
// decode_attention.cu, PagedCache in paged_decode_attention.cu. Taught in docs/serving/decode-attention.md
// and docs/serving/paged-kv-cache.md.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/cpu_threads.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../attention/attention_common.cuh"
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
// lengths[b] tokens of KV head h / group; zeros for an empty cache. row_of(b, kv_head, j) says which row
// of k and v holds token j (the contiguous layout below; a paged cache walks its block table).
template <typename RowOf>
std::vector<double> reference(const Problem& p, const float* q, const float* k, const float* v, RowOf row_of) {
  std::vector<double> out(p.q_elements(), 0.0);
  course::parallel_for(static_cast<long long>(p.batch) * p.heads, [&](long long row) {
    const int b = static_cast<int>(row / p.heads), h = static_cast<int>(row % p.heads), len = p.lengths[b];
    const float* qr = q + row * p.dim;
    std::vector<double> score(len);
    double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (int j = 0; j < len; ++j) {
      const float* kr = k + row_of(b, h / p.group(), j) * p.dim;
      double dot = 0.0;
      for (int c = 0; c < p.dim; ++c) dot += static_cast<double>(qr[c]) * kr[c];
      score[j] = dot * p.scale();
      m = std::max(m, score[j]);
    }
    double* o = out.data() + row * p.dim;
    for (int j = 0; j < len; ++j) {
      const double w = std::exp(score[j] - m);
      const float* vr = v + row_of(b, h / p.group(), j) * p.dim;
      sum += w;
      for (int c = 0; c < p.dim; ++c) o[c] += w * vr[c];
    }
    for (int c = 0; c < p.dim && len > 0; ++c) o[c] /= sum;
  });
  return out;
}

// The contiguous layout [batch][kv_heads][capacity][dim]: token j of (b, kv_head) is one row.
inline auto contiguous_rows(const Problem& p) {
  return [&p](int b, int kv_head, int j) { return (static_cast<size_t>(b) * p.kv_heads + kv_head) * p.capacity + j; };
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
// The cache policy says where token `key` of (b, kv_head) lives, as a row of kDim values. It may keep
// a table for a tile of the chunk in shared memory (`table`, Cache::kTableInts ints), refreshed by
// load_tile once per tile; the contiguous cache needs none and takes the whole chunk as one tile.
template <int kDim, int kGroup, typename Cache>
__global__ void __launch_bounds__(kThreads)
    decode_split(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
                 const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ lengths, int kv_heads,
                 Cache cache, int chunk, float scale_log2, float* __restrict__ part_acc,
                 float2* __restrict__ part_ml) {
  using L = Layout<kDim>;
  const int split = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane / L::kLanesPerKey, part = lane % L::kLanesPerKey;  // which row of the warp's, which 8 dims
  const int heads = kv_heads * kGroup;
  const int len = min(lengths[b], cache.capacity());
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

  const uint4* k_rows = reinterpret_cast<const uint4*>(k_cache) + part;  // this lane's 16 bytes of row 0
  const uint4* v_rows = reinterpret_cast<const uint4*>(v_cache) + part;
  __shared__ int table[Cache::kTableInts];

  for (int tile = begin; tile < end; tile += cache.tile_keys(chunk)) {
    const int tile_end = min(tile + cache.tile_keys(chunk), end);
    cache.load_tile(table, b, tile, tile_end);
    for (int base = tile; base < tile_end; base += L::kKeysPerStep) {
      // Issue every load of the step first: 2 x kUnroll independent 16-byte loads per lane in flight.
      uint4 kr[kUnroll], vr[kUnroll];
      bool valid[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int key = base + (u * kWarps + warp) * L::kKeysPerWarp + sub;
        valid[u] = key < tile_end;
        kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
        if (valid[u]) {
          const size_t row = cache.row(table, b, kv_head, kv_heads, key, tile);
          kr[u] = k_rows[row * L::kLanesPerKey];
          vr[u] = v_rows[row * L::kLanesPerKey];
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

// --8<-- [start:contiguous]
// The contiguous cache [batch][kv_heads][capacity][dim]: token key of (b, kv_head) is row
// (b * kv_heads + kv_head) * capacity + key; no table, the whole chunk is one tile.
struct ContiguousCache {
  int slots;  // capacity: cache slots per sequence
  static constexpr int kTableInts = 1;
  __device__ int capacity() const { return slots; }
  __device__ int tile_keys(int chunk) const { return chunk; }
  __device__ void load_tile(int*, int, int, int) const {}
  __device__ size_t row(const int*, int b, int kv_head, int kv_heads, int key, int) const {
    return (static_cast<size_t>(b) * kv_heads + kv_head) * slots + key;
  }
};
// --8<-- [end:contiguous]

// --8<-- [start:plan]
// How many chunks per sequence: enough blocks to give every SM several (a batch-1 decode has only
// kv_heads blocks without splitting), in chunks of at least kChunkMultiple keys.
struct Plan {
  int splits = 1, chunk = kChunkMultiple;
};
// A paged cache asks for chunks of whole pages: `multiple` a multiple of kChunkMultiple.
inline Plan plan(const Problem& p, int sm_count, int forced_splits = 0, int multiple = kChunkMultiple) {
  const int max_len = *std::max_element(p.lengths.begin(), p.lengths.end());
  const int wanted = forced_splits > 0 ? forced_splits : course::ceil_div(4 * sm_count, p.batch * p.kv_heads);
  const int splits = std::clamp(wanted, 1, std::max(1, course::ceil_div(max_len, multiple)));
  Plan pl;
  pl.chunk = course::ceil_div(course::ceil_div(std::max(max_len, 1), splits), multiple) * multiple;
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

template <int kDim, int kGroup, typename Cache>
void launch_typed(const Problem& p, const Plan& pl, const Buffers& d, const Cache& cache) {
  const float scale_log2 = static_cast<float>(p.scale()) * kLog2e;
  decode_split<kDim, kGroup><<<dim3(pl.splits, p.kv_heads, p.batch), kThreads>>>(
      d.q, d.k, d.v, d.lengths, p.kv_heads, cache, pl.chunk, scale_log2, d.part_acc, d.part_ml);
  CUDA_CHECK_LAUNCH();
  decode_merge<kDim><<<p.batch * p.heads, kDim>>>(d.part_acc, d.part_ml, pl.splits, d.out);
  CUDA_CHECK_LAUNCH();
}

template <int kDim, typename Cache>
void launch_dim(const Problem& p, const Plan& pl, const Buffers& d, const Cache& cache) {
  switch (p.group()) {
    case 1: return launch_typed<kDim, 1>(p, pl, d, cache);
    case 2: return launch_typed<kDim, 2>(p, pl, d, cache);
    case 4: return launch_typed<kDim, 4>(p, pl, d, cache);
    default: return launch_typed<kDim, 8>(p, pl, d, cache);  // supported() admits 1, 2, 4, 8 only
  }
}

inline bool supported(const Problem& p) {
  const int g = p.kv_heads > 0 && p.heads % p.kv_heads == 0 ? p.group() : 0;
  if ((p.dim == 64 || p.dim == 128) && (g == 1 || g == 2 || g == 4 || g == 8)) return true;
  std::fprintf(stderr, "error: needs --dim 64 or 128 and --heads a multiple of --kv-heads by 1, 2, 4 or 8 "
                       "(got dim %d, heads %d, kv-heads %d)\n", p.dim, p.heads, p.kv_heads);
  return false;
}

// The contiguous cache by default; paged_decode_attention.cu passes its PagedCache.
template <typename Cache = ContiguousCache>
void launch(const Problem& p, const Plan& pl, const Buffers& d, const Cache& cache) {
  if (p.dim == 64) launch_dim<64>(p, pl, d, cache);
  else launch_dim<128>(p, pl, d, cache);
}
inline void launch(const Problem& p, const Plan& pl, const Buffers& d) {
  launch(p, pl, d, ContiguousCache{p.capacity});
}

// The bandwidth reference of the benchmarks: a device-to-device copy of n bf16 values (half of the bytes
// read, half written).
inline float time_copy_ms(__nv_bfloat16* dst, const __nv_bfloat16* src, size_t n) {
  return course::time_kernel_ms(
      [&] { CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice)); });
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

// The benchmark's buffers for one problem: q, K and V filled on the device with the checks' ranges (q
// and K in [-2, 2), V in [-1, 1)), the lengths copied, the output allocated; partials follow the plan.
inline Buffers random_device_buffers(const Problem& p, uint64_t seed) {
  Buffers d;
  d.q = course::device_alloc<__nv_bfloat16>(p.q_elements());
  d.k = course::device_alloc<__nv_bfloat16>(p.cache_elements());
  d.v = course::device_alloc<__nv_bfloat16>(p.cache_elements());
  d.out = course::device_alloc<__nv_bfloat16>(p.q_elements());
  d.lengths = course::to_device(p.lengths);
  fill_random<<<1024, 256>>>(d.q, p.q_elements(), seed, -2.0f, 2.0f);
  fill_random<<<4096, 256>>>(d.k, p.cache_elements(), seed + 1, -2.0f, 2.0f);
  fill_random<<<4096, 256>>>(d.v, p.cache_elements(), seed + 2, -1.0f, 1.0f);
  CUDA_CHECK_LAUNCH();
  return d;
}

// The checks' inputs: random q (q_elements values) and K, V (cache_elements each), and their bf16
// roundings, which the kernels read (the float64 reference reads the unrounded values).
struct HostInputs {
  std::vector<float> q, k, v;
  std::vector<__nv_bfloat16> qb, kb, vb;
};
inline HostInputs random_host_inputs(size_t q_elements, size_t cache_elements, uint64_t seed) {
  HostInputs in{std::vector<float>(q_elements), std::vector<float>(cache_elements),
                std::vector<float>(cache_elements), {}, {}, {}};
  course::fill_uniform(in.q, seed, -2.0f, 2.0f);
  course::fill_uniform(in.k, seed + 1, -2.0f, 2.0f);
  course::fill_uniform(in.v, seed + 2, -1.0f, 1.0f);
  course::round_to_bf16(in.q, in.qb), course::round_to_bf16(in.k, in.kb), course::round_to_bf16(in.v, in.vb);
  return in;
}

// The reference as the kernel's only rounding leaves it: the output to bf16.
inline std::vector<double> rounded_output(const std::vector<double>& exact) {
  std::vector<double> rounded(exact.size());
  for (size_t e = 0; e < exact.size(); ++e) rounded[e] = course::round_bf16(exact[e]);
  return rounded;
}

// One run's verdict on the output copied back: against float64 with the chapter's data-scaled
// tolerance (printed as `name`), or with a plant, whether the planted fault is caught.
inline bool report_output(const char* name, const std::vector<__nv_bfloat16>& out, const std::vector<double>& exact,
                          const std::vector<double>& rounded, int dim, attn::Plant plant) {
  std::vector<float> got(out.size());
  for (size_t e = 0; e < got.size(); ++e) got[e] = __bfloat162float(out[e]);
  if (plant != attn::Plant::kNone)
    return attn::report_planted(plant, "", got, exact.data(), rounded.data(), dim, attn::kOldAtolOut);
  return attn::report(name, attn::compare_scaled(got.data(), exact.data(), rounded.data(), got.size(),
                                                 attn::kGroupRows * dim));
}

// The options both programs take; each reads its own cache shape before calling args.finish().
// capacity and lengths are left to the program.
struct Options {
  Problem p;
  int context = 0;
  uint64_t seed = 0;
  bool bench = false;
  std::string plant;
};
inline Options read_options(const course::Args& args) {
  Options o;
  o.p.batch = static_cast<int>(args.get_int("--batch", 5, 1, 64));
  o.p.heads = static_cast<int>(args.get_int("--heads", 32, 1, 128));
  o.p.kv_heads = static_cast<int>(args.get_int("--kv-heads", 8, 1, 128));
  o.p.dim = static_cast<int>(args.get_int("--dim", 64, 64, 128));
  o.context = static_cast<int>(args.get_int("--context", 4999, 0, 1 << 17));
  o.seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  o.bench = args.has("--bench");
  o.plant = args.get_str("--plant", "none");
  return o;
}

// Lengths that exercise every edge: sequence 0 the full context, 1 about two thirds (odd), 2 an empty
// cache, 3 a single token, then again.
inline std::vector<int> edge_lengths(int batch, int context) {
  std::vector<int> len(batch);
  for (int b = 0; b < batch; ++b)
    len[b] = b % 4 == 0 ? context : b % 4 == 1 ? std::min(context, (2 * context / 3) | 1) : b % 4 == 2 ? 0 : 1;
  if (batch == 1) len[0] = context;
  return len;
}

inline int sm_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace decode
