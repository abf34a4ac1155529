// attention_common.cuh: what every CUDA attention program of the chapter shares: the problem's
// shape and masks, random inputs, the float64 reference (forward and backward), the checks and the
// BENCH line, the command-line options and the device buffers of the inputs. One reference for every
// kernel, so that the kernels are compared with one truth.
//
// Taught in docs/attention/arithmetic.md and docs/attention/three-kernels.md. Included by
// attention_naive.cu, flash_fwd.cu and flash_bwd.cu. Layout everywhere: [batch][heads][seq][dim],
// row-major, as PyTorch's scaled_dot_product_attention takes it.
//
// Masks: query i may attend to key j when j < key_len[b] (key padding: the keys past a sequence's
// length are padding) and, if causal, j <= i (top-left aligned, as PyTorch's is_causal=True for
// equal query and key lengths). A query row with no allowed key ("fully masked", here every row of
// a batch entry with key_len 0) has output zeros and logsumexp +inf, the FlashAttention convention
// (torch.softmax would give NaN).
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "../common/course.cuh"

namespace attn {

// --8<-- [start:shape]
struct Shape {
  int batch = 1, heads = 1, seq = 1, dim = 64;
  bool causal = false;
  std::vector<int> key_len;  // one per batch entry, each in [0, seq]

  long long rows() const { return 1LL * batch * heads * seq; }        // query rows (and key rows)
  long long elements() const { return rows() * dim; }                 // of Q, K, V or O
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(dim)); }
  bool allowed(int b, int i, int j) const { return j < key_len[b] && (!causal || j <= i); }
  // The arithmetic of the forward pass: Q K^T and P V, 2 * seq * seq * dim each, per (batch, head);
  // half of it under a causal mask (the masked half is skipped, not computed).
  double forward_flops() const {
    const double full = 4.0 * batch * heads * static_cast<double>(seq) * seq * dim;
    return causal ? full / 2 : full;
  }
};
// --8<-- [end:shape]

// Every key valid; or, with padding, key lengths that exercise a partial tile and an empty row:
// batch entry 0 full, 1 about two thirds (an odd number), 2 zero keys (every query row fully masked).
inline std::vector<int> key_lengths(int batch, int seq, bool padding) {
  std::vector<int> len(batch, seq);
  if (!padding) return len;
  for (int b = 0; b < batch; ++b) len[b] = b % 3 == 0 ? seq : b % 3 == 1 ? (2 * seq / 3) | 1 : 0;
  for (auto& l : len) l = std::min(l, seq);
  return len;
}

inline Shape make_shape(int batch, int heads, int seq, int dim, bool causal, bool padding) {
  return Shape{batch, heads, seq, dim, causal, key_lengths(batch, seq, padding)};
}

// The chapter's benchmark case, the same as sdpa_torch.py's: bf16, batch 4 x 16 heads, head
// dimension 128, sequence 4096 unless another length is asked for (the memory sweeps).
inline Shape bench_shape(bool causal, int seq = 4096) { return make_shape(4, 16, seq, 128, causal, false); }

// " padded" when some batch entry has padding keys: part of the CHECK names.
inline std::string padded_suffix(const Shape& s) {
  return s.key_len[0] < s.seq || s.key_len[s.batch - 1] < s.seq ? " padded" : "";
}

// The options every CUDA program of the chapter takes: the shape to check (--batch, --heads, --seq,
// --dim 64 or 128, --causal, --padding), --seed, and --bench for the benchmark cases instead.
// Malformed or unknown options end the program with a usage line (exit 1), before any CUDA call.
struct Options {
  Shape shape;
  uint64_t seed = 0;
  bool bench = false;
};

inline Options parse_options(int argc, char** argv, int max_seq = 1 << 16) {
  const course::Args args{argc, argv};
  const int batch = static_cast<int>(args.get_int("--batch", 2, 1, 64));
  const int heads = static_cast<int>(args.get_int("--heads", 3, 1, 64));
  const int seq = static_cast<int>(args.get_int("--seq", 333, 1, max_seq));
  const int dim = static_cast<int>(args.get_int("--dim", 128, 64, 128));
  const bool causal = args.has("--causal");
  const bool padding = args.has("--padding");
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2024, 0));
  const bool bench = args.has("--bench");
  args.finish();
  if (dim != 64 && dim != 128) {
    std::fprintf(stderr, "error: --dim must be 64 or 128, got %d\n", dim);
    std::exit(course::kExitFail);
  }
  return Options{make_shape(batch, heads, seq, dim, causal, padding), seed, bench};
}

using course::device_alloc;
using course::device_free;
using course::to_device;
using course::to_host;

// Random inputs, rounded to bf16 so that the reference sees exactly the values the GPU reads.
// Q and K in [-2, 2] give scaled scores with a spread of a few units, so that the softmax is far
// from uniform and the running maximum changes often; V in [-1, 1] bounds every output by 1.
struct Inputs {
  std::vector<float> q, k, v;           // bf16 values held as floats (the reference's inputs)
  std::vector<__nv_bfloat16> qb, kb, vb;  // the same values, for the GPU
};

inline void round_to_bf16(std::vector<float>& x, std::vector<__nv_bfloat16>& out) {
  out.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = __float2bfloat16(x[i]);
    x[i] = __bfloat162float(out[i]);
  }
}

inline Inputs make_inputs(const Shape& s, uint64_t seed) {
  Inputs in;
  in.q.resize(s.elements());
  in.k.resize(s.elements());
  in.v.resize(s.elements());
  course::fill_uniform(in.q, seed, -2.0f, 2.0f);
  course::fill_uniform(in.k, seed + 1, -2.0f, 2.0f);
  course::fill_uniform(in.v, seed + 2, -1.0f, 1.0f);
  round_to_bf16(in.q, in.qb);
  round_to_bf16(in.k, in.kb);
  round_to_bf16(in.v, in.vb);
  return in;
}

// The inputs on the device: Q, K, V (bf16) and the key lengths, bytes() of device memory.
struct DeviceInputs {
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr;
  int* key_len = nullptr;
  double bytes = 0;
  void release() const { device_free({q, k, v, key_len}); }
};

inline DeviceInputs upload(const Shape& s, const Inputs& in) {
  DeviceInputs d{to_device(in.qb), to_device(in.kb), to_device(in.vb), to_device(s.key_len), 0};
  d.bytes = 3.0 * s.elements() * sizeof(__nv_bfloat16) + s.batch * sizeof(int);
  return d;
}

// A fused forward's whole footprint: the inputs plus what it writes, O (bf16) and the logsumexp.
struct ForwardBuffers {
  DeviceInputs in;
  __nv_bfloat16* o = nullptr;
  float* lse = nullptr;
  double bytes = 0;  // everything allocated here
  void release() const {
    in.release();
    device_free({o, lse});
  }
};

inline ForwardBuffers upload_and_allocate(const Shape& s, const Inputs& in) {
  ForwardBuffers d{upload(s, in), device_alloc<__nv_bfloat16>(s.elements()), device_alloc<float>(s.rows()), 0};
  d.bytes = d.in.bytes + s.elements() * sizeof(__nv_bfloat16) + s.rows() * sizeof(float);
  return d;
}

// --8<-- [start:reference]
// float64 reference for one query row r (= (b * heads + h) * seq + i): the output row and the
// logsumexp of the row's scaled scores (+inf for a fully masked row). Direct two-pass softmax.
inline void reference_row(const Shape& s, const float* q, const float* k, const float* v, long long r,
                          double* out, double* lse) {
  const int i = static_cast<int>(r % s.seq);
  const long long bh = r / s.seq;
  const int b = static_cast<int>(bh / s.heads);
  const float* qi = q + r * s.dim;
  const float* kh = k + bh * s.seq * s.dim;
  const float* vh = v + bh * s.seq * s.dim;
  std::vector<double> score(s.seq, -std::numeric_limits<double>::infinity());
  double m = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < s.seq; ++j) {
    if (!s.allowed(b, i, j)) continue;
    double dot = 0.0;
    for (int c = 0; c < s.dim; ++c) dot += static_cast<double>(qi[c]) * kh[1LL * j * s.dim + c];
    score[j] = dot * s.scale();
    m = std::max(m, score[j]);
  }
  for (int c = 0; c < s.dim; ++c) out[c] = 0.0;
  if (m == -std::numeric_limits<double>::infinity()) {  // fully masked: zeros, lse +inf
    *lse = std::numeric_limits<double>::infinity();
    return;
  }
  double sum = 0.0;
  for (int j = 0; j < s.seq; ++j) {
    if (score[j] == -std::numeric_limits<double>::infinity()) continue;
    const double p = std::exp(score[j] - m);
    sum += p;
    for (int c = 0; c < s.dim; ++c) out[c] += p * vh[1LL * j * s.dim + c];
  }
  for (int c = 0; c < s.dim; ++c) out[c] /= sum;
  *lse = m + std::log(sum);
}
// --8<-- [end:reference]

// --8<-- [start:reference_backward]
// float64 reference of the backward pass for one (batch, head) `bh`, given dO: with P the softmax
// of the masked scaled scores and O = P V,
//   dV = P^T dO,  dP = dO V^T,  dS = P o (dP - rowsum(dO o O)),  dQ = scale dS K,  dK = scale dS^T Q.
// A masked pair has P = 0 and contributes nothing; a fully masked row's dQ is 0.
inline void reference_backward(const Shape& s, const float* q, const float* k, const float* v, const float* d_out,
                               long long bh, double* dq, double* dk, double* dv) {
  const int n = s.seq, d = s.dim, b = static_cast<int>(bh / s.heads);
  const long long off = bh * n * d;
  q += off, k += off, v += off, d_out += off;
  std::vector<double> out(d);
  for (long long e = 0; e < 1LL * n * d; ++e) dq[e] = dk[e] = dv[e] = 0.0;
  for (int i = 0; i < n; ++i) {
    double lse = 0.0;
    reference_row(s, q - off, k - off, v - off, bh * n + i, out.data(), &lse);
    double delta = 0.0;  // rowsum(dO o O)
    for (int c = 0; c < d; ++c) delta += static_cast<double>(d_out[1LL * i * d + c]) * out[c];
    for (int j = 0; j < n; ++j) {
      if (!s.allowed(b, i, j)) continue;
      double dot = 0.0, dp = 0.0;
      for (int c = 0; c < d; ++c) {
        dot += static_cast<double>(q[1LL * i * d + c]) * k[1LL * j * d + c];
        dp += static_cast<double>(d_out[1LL * i * d + c]) * v[1LL * j * d + c];
      }
      const double p = std::exp(dot * s.scale() - lse);
      const double ds = p * (dp - delta) * s.scale();
      for (int c = 0; c < d; ++c) {
        dv[1LL * j * d + c] += p * d_out[1LL * i * d + c];
        dq[1LL * i * d + c] += ds * k[1LL * j * d + c];
        dk[1LL * j * d + c] += ds * q[1LL * i * d + c];
      }
    }
  }
}
// --8<-- [end:reference_backward]

// --8<-- [start:tolerances]
// Tolerances, from the precision of each step (inputs are exact bf16 values, |q|, |k| <= 2, |v| <= 1):
//  - the output is rounded to bf16: relative error up to bf16's unit roundoff 2^-8 (rtol 2^-7 leaves
//    room for the fp32 steps below);
//  - a score is a length-D fp32 dot product: error <= D * 2^-24 * sum |q_c k_c| <= 128 * 2^-24 * 512,
//    about 4e-3 before the scale 1/sqrt(D), 3.5e-4 after; it shifts p relatively by as much, and
//    the output (a weighted mean of |v| <= 1) by at most twice that: atol 2^-10 when P stays fp32;
//  - a kernel that rounds P to bf16 before P V (the row sum uses the fp32 P) changes each weight by
//    up to 2^-8 relative, the output by at most 2^-8: atol 2^-7 (2^-8 + 2^-10, rounded up).
// The logsumexp carries only the scores' error: rtol 1e-5, atol 1e-3.
constexpr double kRtol = 0x1p-7;
constexpr double kAtolFp32P = 0x1p-10;
constexpr double kAtolBf16P = 0x1p-7;
// --8<-- [end:tolerances]

// The rows to check: all of them for small problems; for the benchmark sizes, where the reference
// would take minutes, a spread of rows in every (batch, head), including each sequence's first and
// last rows (the causal mask's extremes).
inline std::vector<long long> rows_to_check(const Shape& s, long long budget = 1LL << 31) {
  std::vector<long long> rows;
  const double cost = static_cast<double>(s.rows()) * s.seq * s.dim;
  if (cost <= static_cast<double>(budget)) {
    for (long long r = 0; r < s.rows(); ++r) rows.push_back(r);
    return rows;
  }
  const long long bh_count = 1LL * s.batch * s.heads;
  for (long long bh = 0; bh < bh_count; bh += std::max(1LL, bh_count / 8)) {
    for (int i : {0, 1, s.seq / 3, s.seq / 2 + 1, s.seq - 2, s.seq - 1}) {
      if (i >= 0 && i < s.seq) rows.push_back(bh * s.seq + i);
    }
  }
  return rows;
}

// A CHECK line's name is one word: "v1 b2 h3 s1 d128 causal" becomes "v1_b2_h3_s1_d128_causal".
inline std::string check_label(std::string text) {
  for (char& c : text) c = c == ' ' ? '_' : c;
  return text;
}

// Compare the GPU's output rows (bf16) and logsumexp (float, natural log; empty: not produced) with
// the reference on the chosen rows. Returns true when the checks pass.
inline bool check_forward(const char* name, const Shape& s, const Inputs& in, const std::vector<__nv_bfloat16>& out,
                          const std::vector<float>& lse, const std::vector<long long>& rows, double rtol,
                          double atol) {
  std::vector<float> got, got_lse;
  std::vector<double> want, want_lse;
  std::vector<double> row(s.dim);
  for (long long r : rows) {
    double l = 0.0;
    reference_row(s, in.q.data(), in.k.data(), in.v.data(), r, row.data(), &l);
    for (int c = 0; c < s.dim; ++c) {
      got.push_back(__bfloat162float(out[r * s.dim + c]));
      want.push_back(row[c]);
    }
    if (!lse.empty()) got_lse.push_back(lse[r]), want_lse.push_back(l);
  }
  const bool ok_out = course::check_close(check_label(name).c_str(), got.data(), want.data(), got.size(), rtol, atol);
  if (lse.empty()) return ok_out;
  // The logsumexp carries the scores' error only; a fully masked row's +inf must be +inf.
  const std::string lse_name = check_label(std::string(name) + " logsumexp");
  return course::check_close(lse_name.c_str(), got_lse.data(), want_lse.data(), got_lse.size(), 1e-5, 1e-3) && ok_out;
}

// --8<-- [start:bench_row]
// The chapter's BENCH line: course::print_bench's fields plus the sequence length (the x axis of the
// memory plots) and alloc_bytes, the device memory the implementation allocated for this run (inputs,
// outputs and every intermediate: the score matrix for the three-kernel version, the logsumexp
// for the fused ones), so that a page can show linear against quadratic memory.
inline void print_bench_row(const char* case_name, const char* impl, double time_ms, double bytes, double flops,
                            int seq, double alloc_bytes) {
  course::print_bench(case_name, impl, time_ms, bytes, flops, false, {{"seq", seq}, {"alloc_bytes", alloc_bytes}});
}
// --8<-- [end:bench_row]

// The case name the CUDA programs and sdpa_torch.py share, e.g. "b4 h16 s4096 d128 causal".
inline std::string case_name(const Shape& s) {
  char text[96];
  std::snprintf(text, sizeof(text), "b%d h%d s%d d%d %s", s.batch, s.heads, s.seq, s.dim,
                s.causal ? "causal" : "non-causal");
  return text;
}

}  // namespace attn
