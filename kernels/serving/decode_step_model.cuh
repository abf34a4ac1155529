// decode_step_model.cuh: the model that decode_step.cu runs, and its plumbing: its shape (Config: the
// Llama-3.2-1B shape, and the checks' tiny model), where each weight lives in the one weight buffer
// (Layout) and the range it is drawn from, the rotary table, the device buffers of a step (Model:
// allocate, release, set_position), and the projections transposed to output-major for the fused step.
// Included by decode_step.cu; taught in docs/serving/decode-step.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <vector>

#include "../common/course.cuh"
#include "decode_common.cuh"

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
inline std::vector<Range> weight_ranges(const Config& c, const Layout& w) {
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
inline void rope_table(const Config& c, int capacity, std::vector<float>& cos_t, std::vector<float>& sin_t) {
  const int half = c.head_dim / 2;
  cos_t.resize(static_cast<size_t>(capacity) * half), sin_t.resize(cos_t.size());
  for (int p = 0; p < capacity; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(c.rope_theta, -2.0 * i / c.head_dim);
      cos_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
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

inline Model allocate(const Config& c, int batch, int capacity, int sms) {
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

inline void release(const Model& m) {
  course::device_free({m.w, m.k_cache, m.v_cache, m.residual, m.residual2, m.normed, m.qkv, m.q, m.attn, m.delta,
                       m.zeros, m.gate_up, m.act, m.cos_t, m.sin_t, m.logits, m.part_acc, m.part_ml, m.tokens,
                       m.positions, m.lengths});
}

// Sets every sequence's new token to `position` (the cache holds `position` tokens before it).
inline void set_position(const Model& m, int position) {
  const std::vector<int> pos(m.batch, position), len(m.batch, position + 1);
  CUDA_CHECK(cudaMemcpy(m.positions, pos.data(), pos.size() * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(m.lengths, len.data(), len.size() * sizeof(int), cudaMemcpyHostToDevice));
}

// The four projections of a (k x n) row-major layout transposed to output-major (n x k), for the fused step.
inline std::vector<float> output_major(const Config& c, const Layout& lay, const std::vector<float>& w) {
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
