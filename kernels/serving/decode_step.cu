// decode_step.cu: one whole decode step of a Llama-3.2-1B-shaped model (hidden 2048, 16 layers, 32 query
// heads, 8 KV heads, head dimension 64, MLP 8192, vocabulary 128,256, tied embeddings) from the chapter's
// kernels and cuBLAS, captured once in a CUDA graph and replayed. Per layer: add+RMSNorm, QKV projection,
// rotary embedding (the new K and V appended to the cache), split-KV decode attention over the cache and
// the new token, output projection, add+RMSNorm, gate/up projection, SiLU-and-multiply, down projection;
// then the final add+RMSNorm and the logits against the tied embedding. --step fused runs the fused step
// instead: weights stored output-major and decode_gemv.cuh's GEMV (batch 1 to 8) with the norms and
// SiLU-and-multiply fused into it, 7 launches a layer, chained by Programmatic Dependent Launch on sm_90+.
//
// Taught in docs/serving/decode-step.md; its peer is decode_step_torch.py (the same step in PyTorch).
// Checks (a small model of the same structure, head dimension 64 as the attention kernel requires):
// the logits against a float64 host reference that rounds where the kernels round, then greedy
// generation token for token against the reference's.
// Build: python -m course.toolchain build-all 1 kernels/serving/decode_step.cu
// Run:   ./build/serving/decode_step                (checks)
//        ./build/serving/decode_step --step fused   (checks the fused step: decode_gemv.cuh's GEMVs)
//        ./build/serving/decode_step --bench        (also times both steps, real shapes, batch 1, 8, 64)
//
// course: gpu
// course: libs cublas
// course: run --seed 81 --step fused
// course: run --seed 71
// course: run --seed 72 --batch 1 --context 1
// course: run --seed 74 --batch 64 --context 0
// course: run --seed 73 --plant skip-residual
// course: run --seed 82 --step fused --batch 1 --context 1
// course: run --seed 83 --step fused --batch 8 --context 0
// course: run --seed 84 --step fused --batch 64 --context 0
// course: run --seed 85 --step fused --plant skip-residual
// course: run --seed 86 --step fused --pdl off
// course: bench --bench
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../attention/attention_common.cuh"
#include "../common/check_cublas.cuh"
#include "../common/course.cuh"
#include "decode_common.cuh"
#include "decode_gemv.cuh"
#include "fused_add_rmsnorm.cuh"
#include "rotary.cuh"
#include "silu_mul.cuh"

using bf16 = __nv_bfloat16;

// --8<-- [start:config]
struct Config {
  int hidden = 2048, layers = 16, heads = 32, kv_heads = 8, head_dim = 64, mlp = 8192, vocab = 128256;
  double rope_theta = 500000.0;
  float eps = 1e-5f;
  int qkv_out() const { return (heads + 2 * kv_heads) * head_dim; }
  size_t layer_elements() const {  // as decode_step_torch.py's Config.weight_elements counts them
    return static_cast<size_t>(hidden) * qkv_out() + static_cast<size_t>(heads) * head_dim * hidden +
           3ull * hidden * mlp + 2ull * hidden;
  }
  size_t weight_elements() const { return layers * layer_elements() + hidden + static_cast<size_t>(vocab) * hidden; }
  size_t cache_elements(int context) const { return 2ull * layers * kv_heads * context * head_dim; }
  double step_bytes(int batch, int context) const {
    return 2.0 * (weight_elements() + static_cast<double>(batch) * (cache_elements(context) + hidden));
  }
};
const Config kLlama1B{};
// The checks' model: decode_step_torch.py's TINY with head dimension 64, the smallest the attention kernel takes.
const Config kTiny{128, 2, 4, 2, 64, 128, 97};
// --8<-- [end:config]

// The weights of one model, as offsets into one bf16 buffer laid out as decode_step_torch.py's parameters:
// embed (vocab, hidden); per layer attn_norm (hidden), qkv (hidden, qkv_out), o (heads*dim, hidden),
// mlp_norm (hidden), gate_up (hidden, 2*mlp), down (mlp, hidden); final_norm (hidden). Row-major. The fused
// step stores the four projections output-major, each matrix transposed in place: qkv (qkv_out, hidden) etc.
struct Layout {
  size_t embed, final_norm, total;
  std::vector<size_t> attn_norm, qkv, o, mlp_norm, gate_up, down;
  explicit Layout(const Config& c) {
    size_t at = 0;
    auto take = [&](size_t n) { const size_t here = at; at += n; return here; };
    embed = take(static_cast<size_t>(c.vocab) * c.hidden);
    for (int l = 0; l < c.layers; ++l) {
      attn_norm.push_back(take(c.hidden));
      qkv.push_back(take(static_cast<size_t>(c.hidden) * c.qkv_out()));
      o.push_back(take(static_cast<size_t>(c.heads) * c.head_dim * c.hidden));
      mlp_norm.push_back(take(c.hidden));
      gate_up.push_back(take(2ull * c.hidden * c.mlp));
      down.push_back(take(static_cast<size_t>(c.mlp) * c.hidden));
    }
    final_norm = take(c.hidden);
    total = at;
  }
};

// Uniform ranges with decode_step_torch.py's standard deviations (a uniform on [-a, a] has std a / sqrt 3).
struct Range {
  size_t offset, count;
  float lo, hi;
};
static std::vector<Range> weight_ranges(const Config& c, const Layout& w) {
  const float s3 = std::sqrt(3.0f);
  auto spread = [&](double fan_in) { return static_cast<float>(s3 / std::sqrt(fan_in)); };
  std::vector<Range> r{{w.embed, static_cast<size_t>(c.vocab) * c.hidden, -s3, s3},
                       {w.final_norm, static_cast<size_t>(c.hidden), 1 - 0.1f * s3, 1 + 0.1f * s3}};
  for (int l = 0; l < c.layers; ++l) {
    const float a = spread(c.hidden), ao = spread(c.heads * c.head_dim), ad = spread(c.mlp);
    r.push_back({w.attn_norm[l], static_cast<size_t>(c.hidden), 1 - 0.1f * s3, 1 + 0.1f * s3});
    r.push_back({w.mlp_norm[l], static_cast<size_t>(c.hidden), 1 - 0.1f * s3, 1 + 0.1f * s3});
    r.push_back({w.qkv[l], static_cast<size_t>(c.hidden) * c.qkv_out(), -a, a});
    r.push_back({w.o[l], static_cast<size_t>(c.heads) * c.head_dim * c.hidden, -ao, ao});
    r.push_back({w.gate_up[l], 2ull * c.hidden * c.mlp, -a, a});
    r.push_back({w.down[l], static_cast<size_t>(c.mlp) * c.hidden, -ad, ad});
  }
  return r;
}

// The rotary table for positions 0..capacity-1: dim / 2 angles each, computed in float64, stored fp32.
static void rope_table(const Config& c, int capacity, std::vector<float>& cos_t, std::vector<float>& sin_t) {
  const int half = c.head_dim / 2;
  cos_t.resize(static_cast<size_t>(capacity) * half), sin_t.resize(cos_t.size());
  for (int p = 0; p < capacity; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(c.rope_theta, -2.0 * i / c.head_dim);
      cos_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
}

// Row-major C (m x n) = A (m x k) B (k x n) in bf16 with fp32 accumulation: column-major cuBLAS computes
// C^T = B^T A^T. With b_transposed, B is stored (n x k) row-major: the tied embedding's logits.
static void gemm(cublasHandle_t h, const bf16* A, const bf16* B, void* C, int m, int n, int k,
                 cudaDataType_t c_type, bool b_transposed = false) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(h, b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B,
                            CUDA_R_16BF, b_transposed ? k : n, A, CUDA_R_16BF, k, &beta, C, c_type, n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Everything one step touches on the device.
struct Model {
  Config c;
  int batch = 1, capacity = 1;  // cache slots per sequence
  bool output_major = false;    // the four projections stored (out x in), as torch.nn.Linear stores them
  bool fused = false;           // the fused step (needs output_major): gemv::gemv_kernel in place of cuBLAS
  bool pdl = false;             // the fused step's GEMVs launched with Programmatic Dependent Launch
  int sms = 1;
  bf16 *residual2 = nullptr;    // the fused step's second residual buffer (its norms read one, write the other)
  bf16 *w = nullptr, *k_cache = nullptr, *v_cache = nullptr;  // caches [layers][batch][kv_heads][capacity][dim]
  bf16 *residual = nullptr, *normed = nullptr, *qkv = nullptr, *q = nullptr, *attn = nullptr, *delta = nullptr,
       *zeros = nullptr, *gate_up = nullptr, *act = nullptr;
  float *cos_t = nullptr, *sin_t = nullptr, *logits = nullptr, *part_acc = nullptr;
  float2* part_ml = nullptr;
  int *tokens = nullptr, *positions = nullptr, *lengths = nullptr;  // lengths = positions + 1
  decode::Plan plan;
  size_t cache_layer() const { return static_cast<size_t>(batch) * c.kv_heads * capacity * c.head_dim; }
};

static Model allocate(const Config& c, int batch, int capacity, int sms) {
  Model m;
  m.c = c, m.batch = batch, m.capacity = capacity, m.sms = sms;
  const Layout lay(c);
  m.w = course::device_alloc<bf16>(lay.total);
  m.k_cache = course::device_alloc<bf16>(c.layers * m.cache_layer());
  m.v_cache = course::device_alloc<bf16>(c.layers * m.cache_layer());
  const size_t bh = static_cast<size_t>(batch) * c.hidden, bq = static_cast<size_t>(batch) * c.heads * c.head_dim;
  m.residual = course::device_alloc<bf16>(bh), m.residual2 = course::device_alloc<bf16>(bh);
  m.normed = course::device_alloc<bf16>(bh);
  m.delta = course::device_alloc<bf16>(bh), m.zeros = course::device_alloc<bf16>(bh);
  m.qkv = course::device_alloc<bf16>(static_cast<size_t>(batch) * c.qkv_out());
  m.q = course::device_alloc<bf16>(bq), m.attn = course::device_alloc<bf16>(bq);
  m.gate_up = course::device_alloc<bf16>(2ull * batch * c.mlp);
  m.act = course::device_alloc<bf16>(static_cast<size_t>(batch) * c.mlp);
  m.logits = course::device_alloc<float>(static_cast<size_t>(batch) * c.vocab);
  std::vector<float> cos_t, sin_t;
  rope_table(c, capacity, cos_t, sin_t);
  m.cos_t = course::to_device(cos_t), m.sin_t = course::to_device(sin_t);
  m.tokens = course::device_alloc<int>(batch);
  m.positions = course::device_alloc<int>(batch), m.lengths = course::device_alloc<int>(batch);
  CUDA_CHECK(cudaMemset(m.zeros, 0, bh * sizeof(bf16)));
  // The attention's plan for the longest sequence the cache holds; shorter ones end early in their chunks.
  decode::Problem p;
  p.batch = batch, p.heads = c.heads, p.kv_heads = c.kv_heads, p.dim = c.head_dim, p.capacity = capacity;
  p.lengths.assign(batch, capacity);
  m.plan = decode::plan(p, sms);
  const size_t rows = static_cast<size_t>(batch) * c.heads * m.plan.splits;
  m.part_acc = course::device_alloc<float>(rows * c.head_dim);
  m.part_ml = course::device_alloc<float2>(rows);
  // Every intermediate poisoned once: a kernel that leaves part of one unwritten poisons the logits.
  course::poison(m.residual, bh * sizeof(bf16)), course::poison(m.residual2, bh * sizeof(bf16));
  course::poison(m.normed, bh * sizeof(bf16));
  course::poison(m.delta, bh * sizeof(bf16)), course::poison(m.q, bq * sizeof(bf16));
  course::poison(m.attn, bq * sizeof(bf16));
  course::poison(m.qkv, static_cast<size_t>(batch) * c.qkv_out() * sizeof(bf16));
  course::poison(m.gate_up, 2ull * batch * c.mlp * sizeof(bf16));
  course::poison(m.act, static_cast<size_t>(batch) * c.mlp * sizeof(bf16));
  course::poison(m.part_acc, rows * c.head_dim * sizeof(float)), course::poison(m.part_ml, rows * sizeof(float2));
  return m;
}

static void release(const Model& m) {
  course::device_free({m.w, m.k_cache, m.v_cache, m.residual, m.residual2, m.normed, m.qkv, m.q, m.attn, m.delta,
                       m.zeros, m.gate_up, m.act, m.cos_t, m.sin_t, m.logits, m.part_acc, m.part_ml, m.tokens,
                       m.positions, m.lengths});
}

// Sets every sequence's new token to `position` (the cache holds `position` tokens before it).
static void set_position(const Model& m, int position) {
  const std::vector<int> pos(m.batch, position), len(m.batch, position + 1);
  CUDA_CHECK(cudaMemcpy(m.positions, pos.data(), pos.size() * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(m.lengths, len.data(), len.size() * sizeof(int), cudaMemcpyHostToDevice));
}

namespace step {

constexpr int kThreads = 256;

// The token's embedding row copied into the residual stream, 16 bytes per thread.
__global__ void __launch_bounds__(kThreads)
    embed_rows(const int* __restrict__ tokens, const __nv_bfloat16* __restrict__ embed,
               __nv_bfloat16* __restrict__ residual, int hidden) {
  const size_t row = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(embed + static_cast<size_t>(tokens[row]) * hidden);
  uint4* dst = reinterpret_cast<uint4*>(residual + row * hidden);
  for (int v = threadIdx.x; v < hidden / 8; v += kThreads) dst[v] = src[v];
}

// --8<-- [start:rope_append]
// One block per sequence. qkv holds the projection's row [q heads | k heads | v heads]. The query heads
// are rotated into q (contiguous [heads][dim], as the attention kernel reads them); the new key, rotated,
// and the new value are written into the cache at slot positions[b] (layout [batch][kv_heads][capacity]
// [dim]). cos_t and sin_t hold dim / 2 fp32 values per position, rotated by rotary.cuh's rotate8.
__global__ void __launch_bounds__(kThreads)
    rope_append(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ positions,
                const float* __restrict__ cos_t, const float* __restrict__ sin_t, __nv_bfloat16* __restrict__ q,
                __nv_bfloat16* __restrict__ k_cache, __nv_bfloat16* __restrict__ v_cache, int heads, int kv_heads,
                int dim, int capacity) {
  const int b = blockIdx.x, pos = positions[b];
  const int half = dim / 2, groups = half / 8;
  const __nv_bfloat16* row = qkv + static_cast<size_t>(b) * (heads + 2 * kv_heads) * dim;
  const float* c_row = cos_t + static_cast<size_t>(pos) * half;
  const float* s_row = sin_t + static_cast<size_t>(pos) * half;
  const int rotated = (heads + kv_heads) * groups;
  for (int item = threadIdx.x; item < rotated + kv_heads * (dim / 8); item += kThreads) {
    if (item >= rotated) {  // a 16-byte piece of the new value: copied into the cache
      const int v = item - rotated, head = v / (dim / 8), piece = v % (dim / 8);
      const size_t slot = (static_cast<size_t>(b) * kv_heads + head) * capacity + pos;
      reinterpret_cast<uint4*>(v_cache + slot * dim)[piece] =
          reinterpret_cast<const uint4*>(row + static_cast<size_t>(heads + kv_heads + head) * dim)[piece];
      continue;
    }
    const int head = item / groups, i0 = (item % groups) * 8;  // head < heads: a query head, else a key head
    const __nv_bfloat16* src = row + static_cast<size_t>(head) * dim;
    __nv_bfloat16* dst = head < heads
        ? q + (static_cast<size_t>(b) * heads + head) * dim
        : k_cache + ((static_cast<size_t>(b) * kv_heads + (head - heads)) * capacity + pos) * dim;
    rope::rotate8(src, dst, i0, half, c_row, s_row);
  }
}
// --8<-- [end:rope_append]

}  // namespace step

// --8<-- [start:attention]
// The split-KV kernels of decode_common.cuh, launched on the step's stream (a graph captures one stream).
template <int kGroup>
static void attention(const Model& m, int layer, cudaStream_t s) {
  const Config& c = m.c;
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim))) * decode::kLog2e;
  const size_t at = layer * m.cache_layer();
  decode::decode_split<64, kGroup><<<dim3(m.plan.splits, c.kv_heads, m.batch), decode::kThreads, 0, s>>>(
      m.q, m.k_cache + at, m.v_cache + at, m.lengths, c.kv_heads, decode::ContiguousCache{m.capacity},
      m.plan.chunk, scale_log2, m.part_acc, m.part_ml);
  decode::decode_merge<64><<<m.batch * c.heads, 64, 0, s>>>(m.part_acc, m.part_ml, m.plan.splits, m.attn);
}
// --8<-- [end:attention]

// --8<-- [start:step]
// One decode step enqueued on stream s: 10 launches per layer (4 of them cuBLAS GEMMs), 3 more at the
// ends. plant_layer >= 0 skips that layer's attention residual add (the planted fault the checks catch).
static void enqueue_step(const Model& m, cublasHandle_t h, cudaStream_t s, int plant_layer = -1) {
  const Config& c = m.c;
  const Layout lay(c);
  const int b = m.batch, hd = c.heads * c.head_dim;
  step::embed_rows<<<b, step::kThreads, 0, s>>>(m.tokens, m.w + lay.embed, m.residual, c.hidden);
  const bf16* delta = m.zeros;  // layer 0 adds nothing to the embedding
  for (int l = 0; l < c.layers; ++l) {
    rmsnorm::fused_add_rmsnorm<<<b, rmsnorm::kThreads, 0, s>>>(delta, m.residual, m.w + lay.attn_norm[l],
                                                                m.normed, c.hidden, c.eps);
    gemm(h, m.normed, m.w + lay.qkv[l], m.qkv, b, c.qkv_out(), c.hidden, CUDA_R_16BF, m.output_major);
    const size_t at = l * m.cache_layer();
    step::rope_append<<<b, step::kThreads, 0, s>>>(m.qkv, m.positions, m.cos_t, m.sin_t, m.q, m.k_cache + at,
                                                   m.v_cache + at, c.heads, c.kv_heads, c.head_dim, m.capacity);
    switch (c.heads / c.kv_heads) {  // main() admits groups 1, 2, 4 and 8
      case 1: attention<1>(m, l, s); break;
      case 2: attention<2>(m, l, s); break;
      case 4: attention<4>(m, l, s); break;
      default: attention<8>(m, l, s); break;
    }
    gemm(h, m.attn, m.w + lay.o[l], m.delta, b, c.hidden, hd, CUDA_R_16BF, m.output_major);
    // The planted fault adds zeros in place of the attention's output: its residual add is skipped.
    rmsnorm::fused_add_rmsnorm<<<b, rmsnorm::kThreads, 0, s>>>(l == plant_layer ? m.zeros : m.delta, m.residual,
                                                                m.w + lay.mlp_norm[l], m.normed, c.hidden, c.eps);
    gemm(h, m.normed, m.w + lay.gate_up[l], m.gate_up, b, 2 * c.mlp, c.hidden, CUDA_R_16BF, m.output_major);
    swiglu::silu_mul<true><<<dim3(course::ceil_div(c.mlp / 8, swiglu::kThreads), b), swiglu::kThreads, 0, s>>>(
        m.gate_up, m.act, b, c.mlp);
    gemm(h, m.act, m.w + lay.down[l], m.delta, b, c.hidden, c.mlp, CUDA_R_16BF, m.output_major);
    delta = m.delta;
  }
  rmsnorm::fused_add_rmsnorm<<<b, rmsnorm::kThreads, 0, s>>>(delta, m.residual, m.w + lay.final_norm, m.normed,
                                                              c.hidden, c.eps);
  gemm(h, m.normed, m.w + lay.embed, m.logits, b, c.vocab, c.hidden, CUDA_R_32F, true);  // tied embedding
  CUDA_CHECK(cudaGetLastError());
}
// --8<-- [end:step]

// --8<-- [start:fused]
// The fused step (weights output-major): per layer 7 launches, 4 of them the GEMV of decode_gemv.cuh
// with the small kernels as its prologue or epilogue: add+RMSNorm into the QKV and gate/up projections,
// SiLU-and-multiply into the gate/up projection's epilogue. The norms read one residual buffer and write
// the other (every block recomputes the norm, so none may overwrite what another still reads).
static void enqueue_fused(const Model& m, cudaStream_t s, int plant_layer = -1) {
  using gemv::Epilogue;
  using gemv::Prologue;
  const Config& c = m.c;
  const Layout lay(c);
  const int b = m.batch, hd = c.heads * c.head_dim;
  auto add_norm = [&](const bf16* delta, const bf16* res_in, bf16* res_out, size_t norm, size_t w, int n) {
    return gemv::Args{delta, res_in, res_out, m.w + norm, c.eps, m.w + w, nullptr, n, c.hidden};
  };
  step::embed_rows<<<b, step::kThreads, 0, s>>>(m.tokens, m.w + lay.embed, m.residual, c.hidden);
  const bf16* delta = m.zeros;  // layer 0 adds nothing to the embedding
  for (int l = 0; l < c.layers; ++l) {
    gemv::Args qkv = add_norm(delta, m.residual, m.residual2, lay.attn_norm[l], lay.qkv[l], c.qkv_out());
    qkv.out = m.qkv;
    gemv::launch<Prologue::kAddNorm, Epilogue::kBf16>(qkv, b, m.sms, m.pdl, s);
    const size_t at = l * m.cache_layer();
    step::rope_append<<<b, step::kThreads, 0, s>>>(m.qkv, m.positions, m.cos_t, m.sin_t, m.q, m.k_cache + at,
                                                   m.v_cache + at, c.heads, c.kv_heads, c.head_dim, m.capacity);
    switch (c.heads / c.kv_heads) {
      case 1: attention<1>(m, l, s); break;
      case 2: attention<2>(m, l, s); break;
      case 4: attention<4>(m, l, s); break;
      default: attention<8>(m, l, s); break;
    }
    const gemv::Args o{m.attn, nullptr, nullptr, nullptr, 0.0f, m.w + lay.o[l], m.delta, c.hidden, hd};
    gemv::launch<Prologue::kCopy, Epilogue::kBf16>(o, b, m.sms, m.pdl, s);
    // The planted fault adds zeros in place of the attention's output: its residual add is skipped.
    gemv::Args gate_up = add_norm(l == plant_layer ? m.zeros : m.delta, m.residual2, m.residual, lay.mlp_norm[l],
                                  lay.gate_up[l], c.mlp);
    gate_up.out = m.act;
    gemv::launch<Prologue::kAddNorm, Epilogue::kSiluMul>(gate_up, b, m.sms, m.pdl, s);
    const gemv::Args down{m.act, nullptr, nullptr, nullptr, 0.0f, m.w + lay.down[l], m.delta, c.hidden, c.mlp};
    gemv::launch<Prologue::kCopy, Epilogue::kBf16>(down, b, m.sms, m.pdl, s);
    delta = m.delta;
  }
  gemv::Args logits = add_norm(delta, m.residual, m.residual2, lay.final_norm, lay.embed, c.vocab);
  logits.out = m.logits;
  gemv::launch<Prologue::kAddNorm, Epilogue::kFp32>(logits, b, m.sms, m.pdl, s);
  CUDA_CHECK(cudaGetLastError());
}
// --8<-- [end:fused]

// The step the model is set up for: the fused GEMVs where the batch fits them, else cuBLAS.
static void enqueue(const Model& m, cublasHandle_t h, cudaStream_t s, int plant_layer = -1) {
  if (m.fused)
    enqueue_fused(m, s, plant_layer);
  else
    enqueue_step(m, h, s, plant_layer);
}

// --8<-- [start:graph]
// The step captured once: replaying the graph launches its 163 launches (more kernels where cuBLAS splits
// a GEMM) with no host work between them.
static cudaGraphExec_t capture(const Model& m, cublasHandle_t h, cudaStream_t s, int plant_layer = -1) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue(m, h, s, plant_layer);
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}
// --8<-- [end:graph]

// ---- The float64 reference: the same step on the host, rounding to bf16 where the kernels store bf16.
static double rb(double x) { return attn::round_bf16(x); }

struct HostModel {
  Config c;
  Layout lay;
  std::vector<float> w, k_cache, v_cache, cos_t, sin_t;  // bf16 values, as the device holds them
  int batch, capacity;
  size_t cache_layer() const { return static_cast<size_t>(batch) * c.kv_heads * capacity * c.head_dim; }
};

// out (n) = bf16(x (k) . W (k x n) row-major), or, transposed, W (n x k): fp64 sums.
static std::vector<double> matvec(const std::vector<double>& x, const float* W, int k, int n, bool transposed,
                                  bool round) {
  std::vector<double> out(n, 0.0);
  for (int j = 0; j < n; ++j) {
    double sum = 0.0;
    for (int i = 0; i < k; ++i)
      sum += x[i] * (transposed ? W[static_cast<size_t>(j) * k + i] : W[static_cast<size_t>(i) * n + j]);
    out[j] = round ? rb(sum) : sum;
  }
  return out;
}

static std::vector<double> add_norm(std::vector<double>& residual, const std::vector<double>& delta,
                                    const float* weight, const Config& c, bool skip_add) {
  double squares = 0.0;
  for (int i = 0; i < c.hidden; ++i) {
    if (!skip_add) residual[i] = rb(residual[i] + delta[i]);
    squares += residual[i] * residual[i];
  }
  const double inv_rms = 1.0 / std::sqrt(squares / c.hidden + c.eps);
  std::vector<double> out(c.hidden);
  for (int i = 0; i < c.hidden; ++i) out[i] = rb(residual[i] * inv_rms * weight[i]);
  return out;
}

// One step for every sequence at `position`: writes the new K and V into the host caches, returns the
// logits (batch x vocab).
static std::vector<double> reference_step(HostModel& hm, const std::vector<int>& tokens, int position) {
  const Config& c = hm.c;
  const int hd = c.head_dim, half = hd / 2, group = c.heads / c.kv_heads;
  std::vector<double> logits(static_cast<size_t>(hm.batch) * c.vocab);
  for (int b = 0; b < hm.batch; ++b) {
    std::vector<double> residual(c.hidden), delta(c.hidden, 0.0);
    const float* embedding = &hm.w[hm.lay.embed + static_cast<size_t>(tokens[b]) * c.hidden];
    for (int i = 0; i < c.hidden; ++i) residual[i] = embedding[i];
    for (int l = 0; l < c.layers; ++l) {
      const auto xn = add_norm(residual, delta, &hm.w[hm.lay.attn_norm[l]], c, false);
      auto qkv = matvec(xn, &hm.w[hm.lay.qkv[l]], c.hidden, c.qkv_out(), false, true);
      const float* cs = &hm.cos_t[static_cast<size_t>(position) * half];
      const float* sn = &hm.sin_t[static_cast<size_t>(position) * half];
      for (int head = 0; head < c.heads + c.kv_heads; ++head) {  // rotate q and k in place
        double* x = &qkv[static_cast<size_t>(head) * hd];
        for (int i = 0; i < half; ++i) {
          const double lo = x[i], hi = x[i + half];
          x[i] = rb(lo * cs[i] - hi * sn[i]), x[i + half] = rb(hi * cs[i] + lo * sn[i]);
        }
      }
      const size_t base = l * hm.cache_layer();
      for (int kv = 0; kv < c.kv_heads; ++kv)
        for (int d = 0; d < hd; ++d) {
          const size_t slot = base + ((static_cast<size_t>(b) * c.kv_heads + kv) * hm.capacity + position) * hd + d;
          hm.k_cache[slot] = static_cast<float>(qkv[static_cast<size_t>(c.heads + kv) * hd + d]);
          hm.v_cache[slot] = static_cast<float>(qkv[static_cast<size_t>(c.heads + c.kv_heads + kv) * hd + d]);
        }
      std::vector<double> attn_out(static_cast<size_t>(c.heads) * hd, 0.0);
      for (int head = 0; head < c.heads; ++head) {
        const size_t rows = base + (static_cast<size_t>(b) * c.kv_heads + head / group) * hm.capacity * hd;
        std::vector<double> score(position + 1);
        double mx = -INFINITY, sum = 0.0, *out_head = &attn_out[static_cast<size_t>(head) * hd];
        for (int j = 0; j <= position; ++j) {
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += qkv[static_cast<size_t>(head) * hd + d] * hm.k_cache[rows + j * hd + d];
          score[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, score[j]);
        }
        for (int j = 0; j <= position; ++j) {
          const double p = std::exp(score[j] - mx);
          sum += p;
          for (int d = 0; d < hd; ++d) out_head[d] += p * hm.v_cache[rows + j * hd + d];
        }
        for (int d = 0; d < hd; ++d) out_head[d] = rb(out_head[d] / sum);
      }
      delta = matvec(attn_out, &hm.w[hm.lay.o[l]], c.heads * hd, c.hidden, false, true);
      const auto xm = add_norm(residual, delta, &hm.w[hm.lay.mlp_norm[l]], c, false);
      const auto gu = matvec(xm, &hm.w[hm.lay.gate_up[l]], c.hidden, 2 * c.mlp, false, true);
      std::vector<double> act(c.mlp);
      for (int i = 0; i < c.mlp; ++i) act[i] = rb(gu[i] / (1.0 + std::exp(-gu[i])) * gu[c.mlp + i]);
      delta = matvec(act, &hm.w[hm.lay.down[l]], c.mlp, c.hidden, false, true);
    }
    const auto xf = add_norm(residual, delta, &hm.w[hm.lay.final_norm], c, false);
    const auto out = matvec(xf, &hm.w[hm.lay.embed], c.hidden, c.vocab, true, false);
    std::copy(out.begin(), out.end(), logits.begin() + static_cast<size_t>(b) * c.vocab);
  }
  return logits;
}

// ---- The checks.
constexpr int kGenerateSteps = 8;   // greedy steps compared token for token
constexpr int kMinCompared = 6;     // fewer compared tokens (too many near-ties) proves too little: a failure

// The logits within a tolerance that scales with them: |got - want| <= 0.03 (|want| + rms(want)) for
// each, and the RMS of the error at most 1% of the logits' RMS (a wrong value among small ones fails it).
// The reference rounds to bf16 wherever the kernels store bf16, so what remains is fp32 accumulation and
// the rare rounding it flips.
static double rms_of(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / v.size());
}
static bool check_logits(const char* name, const std::vector<float>& got, const std::vector<double>& want) {
  const double rms = rms_of(want);
  bool ok = course::check_close(name, got.data(), want.data(), got.size(), 0.03, 0.03 * rms);
  double err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) err += (got[i] - want[i]) * (got[i] - want[i]);
  err = std::sqrt(err / std::max<size_t>(got.size(), 1));
  char detail[96];
  std::snprintf(detail, sizeof detail, "rms_err_over_rms=%.3g limit=0.01", err / rms);
  ok &= course::check_true((std::string(name) + "_rms").c_str(), err <= 0.01 * rms, got.size(), detail);
  return ok;
}

static int argmax(const double* x, int n, double* gap) {  // gap: the top logit minus the second
  int best = 0;
  for (int i = 1; i < n; ++i) best = x[i] > x[best] ? i : best;
  double second = -INFINITY;
  for (int i = 0; i < n; ++i) second = i == best ? second : std::max(second, x[i]);
  *gap = x[best] - second;
  return best;
}

// The tiny model at batch `batch` with `context` cached tokens: the first step's logits against the
// reference, then kGenerateSteps greedy steps token for token (fed the reference's choice),
// every step's logits held to the same tolerance. With tied embeddings and random weights the model
// mostly predicts the token it was given, so the tokens alone would prove little; the logits carry it.
// The four projections of a (k x n) row-major layout transposed to output-major (n x k), for the fused step.
static std::vector<float> output_major(const Config& c, const Layout& lay, const std::vector<float>& w) {
  std::vector<float> t = w;
  auto transpose = [&](size_t at, int k, int n) {
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < n; ++j) t[at + static_cast<size_t>(j) * k + i] = w[at + static_cast<size_t>(i) * n + j];
  };
  for (int l = 0; l < c.layers; ++l) {
    transpose(lay.qkv[l], c.hidden, c.qkv_out());
    transpose(lay.o[l], c.heads * c.head_dim, c.hidden);
    transpose(lay.gate_up[l], c.hidden, 2 * c.mlp);
    transpose(lay.down[l], c.mlp, c.hidden);
  }
  return t;
}

// Sets a model up for a step: "cublas" (weights k x n, cuBLAS GEMMs) or "fused" (weights output-major; the
// fused GEMVs where the batch fits them, else cuBLAS on the same weights; PDL on sm_90 and later).
static void choose_step(Model& m, const std::string& step, bool pdl = true) {
  const Config& c = m.c;
  m.output_major = step == "fused";
  m.fused = m.output_major && gemv::fits_batch(m.batch, std::max({c.hidden, c.heads * c.head_dim, c.mlp}));
  m.pdl = m.fused && pdl && gemv::has_pdl();
}

static bool check(int batch, int context, uint64_t seed, bool plant, int sms, const std::string& step_kind,
                  bool pdl) {
  const Config& c = kTiny;
  const int capacity = context + kGenerateSteps;
  Model m = allocate(c, batch, capacity, sms);
  choose_step(m, step_kind, pdl);
  std::printf("step: %s (%s%s)\n", step_kind.c_str(), m.fused ? "fused GEMVs" : "cuBLAS GEMMs",
              m.pdl ? ", programmatic dependent launch" : "");
  HostModel hm{c, Layout(c), {}, {}, {}, {}, {}, batch, capacity};
  hm.w.resize(hm.lay.total);
  uint64_t draw = seed;
  for (const Range& r : weight_ranges(c, hm.lay)) {
    std::vector<float> part(r.count);
    course::fill_uniform(part, draw++, r.lo, r.hi);
    std::copy(part.begin(), part.end(), hm.w.begin() + r.offset);
  }
  for (float& x : hm.w) x = static_cast<float>(rb(x));
  // The cache: context random tokens (std 1) per sequence; the slots after them poisoned on the device
  // (the step writes each before the attention reads it).
  hm.k_cache.assign(c.layers * hm.cache_layer(), NAN), hm.v_cache = hm.k_cache;
  for (auto* cache : {&hm.k_cache, &hm.v_cache}) {
    std::vector<float> fresh(cache->size());
    course::fill_uniform(fresh, draw++, -std::sqrt(3.0f), std::sqrt(3.0f));
    for (size_t e = 0; e < cache->size(); ++e)
      if (static_cast<int>(e / c.head_dim % capacity) < context) (*cache)[e] = static_cast<float>(rb(fresh[e]));
  }
  rope_table(c, capacity, hm.cos_t, hm.sin_t);
  auto upload = [](bf16* dst, const std::vector<float>& src) {
    std::vector<bf16> b(src.size());
    for (size_t e = 0; e < b.size(); ++e) b[e] = __float2bfloat16(src[e]);  // exact: already bf16 (NaN stays NaN)
    CUDA_CHECK(cudaMemcpy(dst, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  };
  // The reference reads the (k x n) weights; the fused step gets the same values transposed. Its sums run
  // in float64, where the order of the terms changes nothing the tolerance can see.
  upload(m.w, m.output_major ? output_major(c, hm.lay, hm.w) : hm.w);
  upload(m.k_cache, hm.k_cache), upload(m.v_cache, hm.v_cache);
  std::vector<int> tokens(batch), ref_tokens;
  for (int b = 0; b < batch; ++b) tokens[b] = static_cast<int>((seed * 7919 + b * 31) % c.vocab);
  ref_tokens = tokens;

  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const size_t workspace_bytes = 32u << 20;  // given to cuBLAS up front: nothing is allocated during capture
  void* workspace = course::device_alloc<char>(workspace_bytes);
  CUBLAS_CHECK(cublasSetWorkspace(h, workspace, workspace_bytes));
  // One eager step first (at the first position, so it writes only the slot the first replay rewrites):
  // cuBLAS picks and loads its kernels outside the capture.
  set_position(m, context);
  CUDA_CHECK(cudaMemcpy(m.tokens, tokens.data(), batch * sizeof(int), cudaMemcpyHostToDevice));
  enqueue(m, h, s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  const cudaGraphExec_t graph = capture(m, h, s, plant ? 0 : -1);

  bool ok = true, logits_ok = true, later_ok = true, stopped_any = false;
  int compared = 0;
  std::vector<bool> comparing(batch, true);
  for (int t = 0; t < kGenerateSteps && ok; ++t) {
    const int position = context + t;
    set_position(m, position);
    CUDA_CHECK(cudaMemcpy(m.tokens, tokens.data(), batch * sizeof(int), cudaMemcpyHostToDevice));
    course::poison(m.logits, static_cast<size_t>(batch) * c.vocab * sizeof(float));
    CUDA_CHECK(cudaGraphLaunch(graph, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    const std::vector<float> got = course::to_host(m.logits, static_cast<size_t>(batch) * c.vocab);
    const std::vector<double> want = reference_step(hm, ref_tokens, position);
    if (t == 0) {
      logits_ok = plant ? course::verdict_quietly([&] { return check_logits("x", got, want); })
                        : check_logits("decode_step_logits_vs_float64", got, want);
      if (plant) break;
      ok &= logits_ok;
    } else {  // every later step too: its attention reads the keys and values the earlier steps appended
      later_ok &= course::verdict_quietly([&] { return check_logits("x", got, want); });
    }
    const double tol = 0.03 * rms_of(want);
    for (int b = 0; b < batch; ++b) {
      const auto row = got.begin() + static_cast<size_t>(b) * c.vocab;
      std::vector<double> g(row, row + c.vocab);
      double gap_ref = 0.0, gap_got = 0.0;
      const int want_token = argmax(want.data() + static_cast<size_t>(b) * c.vocab, c.vocab, &gap_ref);
      const int got_token = argmax(g.data(), c.vocab, &gap_got);
      if (comparing[b] && gap_ref <= 2 * tol) {  // a near-tie: either token is right; stop comparing here
        std::printf("note: sequence %d step %d: the reference's top two logits are %.3g apart (tolerance %.3g): "
                    "a tie, not compared from here on\n", b, t, gap_ref, 2 * tol);
        comparing[b] = false, stopped_any = true;
      }
      if (comparing[b]) {
        ++compared;
        if (got_token != want_token) {
          std::printf("CHECK FAIL decode_step_greedy_tokens sequence=%d step=%d got=%d want=%d\n", b, t, got_token,
                      want_token);
          ok = false;
        }
      }
      // Both sides go on from the reference's token: equal to the kernels' wherever compared, and after a
      // near-tie it keeps the two computing the same function, so the logits stay comparable.
      tokens[b] = ref_tokens[b] = want_token;
    }
  }
  if (plant) {
    ok = course::check_true("planted_skip_residual_caught", !logits_ok, 1,
                            logits_ok ? "(the check ACCEPTED a step that skipped a residual add)"
                                      : "(the check rejected a step that skipped a residual add)");
  } else if (ok) {
    ok = course::check_true("decode_step_logits_vs_float64_after_appends", later_ok,
                            static_cast<size_t>(kGenerateSteps - 1) * batch * c.vocab,
                            "(steps 1 on, each held to the same tolerance)");
    char detail[96];
    std::snprintf(detail, sizeof detail, "compared=%d of %d min=%d%s", compared, batch * kGenerateSteps,
                  kMinCompared, stopped_any ? " (near-ties not compared)" : "");
    ok &= course::check_true("decode_step_greedy_tokens", compared >= kMinCompared, compared, detail);
  }
  CUDA_CHECK(cudaGraphExecDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUBLAS_CHECK(cublasDestroy(h));
  course::device_free({workspace});
  release(m);
  return ok;
}

// --8<-- [start:bench]
constexpr int kSteps = 8;  // graph replays timed back to back per repeat, as decode_step_torch.py's STEPS

// The real shapes at context 1,024: random weights and caches made on the device, the step as a graph and
// without one, and a copy of the same bytes. No L2 flush between repeats: a step reads gigabytes, a
// thousand times the 50 MB L2, so the previous step leaves almost nothing in L2 that this one reads first.
static bool bench(int batch, uint64_t seed, int sms) {
  const Config& c = kLlama1B;
  const int context = 1024;
  Model m = allocate(c, batch, context + 1, sms);
  const Layout lay(c);
  uint64_t draw = seed;
  for (const Range& r : weight_ranges(c, lay))
    decode::fill_random<<<4096, 256>>>(m.w + r.offset, r.count, draw++, r.lo, r.hi);
  decode::fill_random<<<4096, 256>>>(m.k_cache, c.layers * m.cache_layer(), draw++, -1.7320508f, 1.7320508f);
  decode::fill_random<<<4096, 256>>>(m.v_cache, c.layers * m.cache_layer(), draw++, -1.7320508f, 1.7320508f);
  CUDA_CHECK_LAUNCH();
  std::vector<int> tokens(batch);
  for (int b = 0; b < batch; ++b) tokens[b] = static_cast<int>((seed * 7919 + b * 104729) % c.vocab);
  CUDA_CHECK(cudaMemcpy(m.tokens, tokens.data(), batch * sizeof(int), cudaMemcpyHostToDevice));
  set_position(m, context);

  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const size_t workspace_bytes = 32u << 20;
  void* workspace = course::device_alloc<char>(workspace_bytes);
  CUBLAS_CHECK(cublasSetWorkspace(h, workspace, workspace_bytes));
  const std::string tag = "b" + std::to_string(batch);
  const std::string case_name = tag + " ctx" + std::to_string(context);
  const double bytes = c.step_bytes(batch, context), flops = 2.0 * batch * c.weight_elements();
  const std::initializer_list<course::BenchField> fields = {{"batch", batch},
                                                            {"bytes_per_token", bytes / batch}};
  // One variant of the step: eager first (cuBLAS picks and loads its kernels outside the capture), then
  // captured. The graph's logits, poisoned first, must be finite and match the eager step's: the same
  // kernels in the same order (cuBLAS may pick another algorithm inside a capture, so within 1% RMS, not
  // bit for bit). The random weights serve either layout: each matrix's values are drawn alike.
  bool ok = true;
  auto time_step = [&](const Model& v, const std::string& label, const std::string& check_name, bool eager_row) {
    enqueue(v, h, s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    const cudaGraphExec_t graph = capture(v, h, s);
    const size_t n = static_cast<size_t>(batch) * c.vocab;
    const std::vector<float> eager = course::to_host(v.logits, n);
    course::poison(v.logits, n * sizeof(float));
    CUDA_CHECK(cudaGraphLaunch(graph, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    const std::vector<float> replayed = course::to_host(v.logits, n);
    size_t same = 0, finite = 0;
    double diff = 0.0, scale = 0.0;
    for (size_t e = 0; e < n; ++e) {
      finite += std::isfinite(replayed[e]) && std::isfinite(eager[e]);
      same += replayed[e] == eager[e];
      diff += (static_cast<double>(replayed[e]) - eager[e]) * (static_cast<double>(replayed[e]) - eager[e]);
      scale += static_cast<double>(eager[e]) * eager[e];
    }
    char detail[96];
    std::snprintf(detail, sizeof detail, "bit_identical=%zu rms_diff_over_rms=%.3g limit=0.01", same,
                  std::sqrt(diff / scale));
    ok &= course::check_true((check_name + "_" + tag).c_str(), finite == n && diff <= 1e-4 * scale && scale > 0, n,
                             detail);
    const float graph_ms = course::time_kernel_ms([&] {
      for (int i = 0; i < kSteps; ++i) CUDA_CHECK(cudaGraphLaunch(graph, s));
    }, 3, 10, false) / kSteps;
    course::print_bench(case_name.c_str(), (label + ", CUDA graph (bf16)").c_str(), graph_ms, bytes, flops, false,
                        fields);
    float eager_ms = 0.0f;
    if (eager_row) {
      eager_ms = course::time_kernel_ms([&] {
        for (int i = 0; i < kSteps; ++i) enqueue(v, h, s);
      }, 3, 10, false) / kSteps;
      course::print_bench(case_name.c_str(), (label + ", no graph (bf16)").c_str(), eager_ms, bytes, flops, false,
                          fields);
    }
    std::printf("%s %s: %.3f GB per step, %.0f tokens/s (graph)", case_name.c_str(), label.c_str(), bytes / 1e9,
                batch * 1e3 / graph_ms);
    if (eager_row) std::printf(", %.0f tokens/s (no graph)", batch * 1e3 / eager_ms);
    std::printf("\n");
    CUDA_CHECK(cudaGraphExecDestroy(graph));
  };
  time_step(m, "chapter kernels + cuBLAS", "decode_step_graph_matches_eager", true);
  // The fused step on the same buffers: the GEMVs up to batch 8 (with and without PDL where the GPU has
  // it), cuBLAS on output-major weights beyond.
  Model fused = m;
  choose_step(fused, "fused");
  if (fused.fused) {
    time_step(fused, "fused GEMV step", "decode_step_fused_graph_matches_eager", true);
    if (fused.pdl) {
      choose_step(fused, "fused", false);
      time_step(fused, "fused GEMV step without PDL", "decode_step_fused_no_pdl_graph_matches_eager", false);
    }
  } else {
    time_step(fused, "chapter kernels + cuBLAS, output-major weights", "decode_step_output_major_graph_matches_eager",
              false);
  }
  const size_t half = static_cast<size_t>(bytes / 4);  // bf16 elements: half the bytes read, half written
  bf16* src = course::device_alloc<bf16>(half);
  bf16* dst = course::device_alloc<bf16>(half);
  const float copy_ms = decode::time_copy_ms(dst, src, half);
  course::print_bench(case_name.c_str(), "cudaMemcpy (copy, same bytes)", copy_ms, 4.0 * half, 0, false, fields);

  CUDA_CHECK(cudaStreamDestroy(s));
  CUBLAS_CHECK(cublasDestroy(h));
  course::device_free({workspace, src, dst});
  release(m);
  return ok;
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  course::Args args(argc, argv);
  const int batch = static_cast<int>(args.get_int("--batch", 3, 1, 64));
  const int context = static_cast<int>(args.get_int("--context", 5, 0, 1 << 20));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  const std::string plant = args.get_str("--plant", "none");
  const std::string step_kind = args.get_str("--step", "cublas");
  const std::string pdl = args.get_str("--pdl", "on");  // the fused step's checks with PDL on sm_90+, or without
  args.finish();
  if (step_kind != "cublas" && step_kind != "fused") {
    std::fprintf(stderr, "error: --step expects cublas or fused, got '%s'\n", step_kind.c_str());
    return course::kExitFail;
  }
  if (pdl != "on" && pdl != "off") {
    std::fprintf(stderr, "error: --pdl expects on or off, got '%s'\n", pdl.c_str());
    return course::kExitFail;
  }
  if (plant != "none" && plant != "skip-residual") {
    std::fprintf(stderr, "error: --plant expects none or skip-residual, got '%s'\n", plant.c_str());
    return course::kExitFail;
  }
  // The checks' cache holds context + kGenerateSteps tokens; the host reference is O(context) per step.
  if (context > 4096) {
    std::fprintf(stderr, "error: --context %d is beyond the checks' cache (at most 4096 tokens)\n", context);
    return course::kExitFail;
  }
  const int sms = decode::sm_count();
  bool ok = check(batch, context, seed, plant == "skip-residual", sms, step_kind, pdl == "on");
  if (ok && run_bench && plant == "none")
    for (int b : {1, 8, 64}) ok &= bench(b, seed, sms);
  return ok ? 0 : course::kExitFail;
}
