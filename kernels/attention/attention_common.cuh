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
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/cpu_threads.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

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

// A fault planted in a kernel's output after it ran (--plant), to show that the checks reject it, named
// in kernels/common/planted.cuh's vocabulary:
//   zeros-small  zeros wherever the reference's magnitude is below the old absolute tolerance
//   tile         one tile of 64 rows (at three fifths of the checked rows) shifted by 1% of the
//                output's typical (RMS) magnitude
using course::Plant;
using course::plant_name;

// The options every CUDA program of the chapter takes: the shape to check (--batch, --heads, --seq,
// --dim 64 or 128, --causal, --padding), --seed, --bench for the benchmark cases instead, and
// --plant FAULT. Malformed or unknown options end the program with a usage line (exit 1), before any
// CUDA call.
struct Options {
  Shape shape;
  uint64_t seed = 0;
  bool bench = false;
  Plant plant = Plant::kNone;
};

inline Options parse_options(int argc, char** argv, int max_seq = 1 << 16, bool takes_plant = true) {
  const course::Args args{argc, argv};
  const int batch = static_cast<int>(args.get_int("--batch", 2, 1, 64));
  const int heads = static_cast<int>(args.get_int("--heads", 3, 1, 64));
  const int seq = static_cast<int>(args.get_int("--seq", 333, 1, max_seq));
  const int dim = static_cast<int>(args.get_int("--dim", 128, 64, 128));
  const bool causal = args.has("--causal");
  const bool padding = args.has("--padding");
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2024, 0));
  const bool bench = args.has("--bench");
  const std::string plant = takes_plant ? args.get_str("--plant", "none") : "none";
  args.finish();
  if (dim != 64 && dim != 128) {
    std::fprintf(stderr, "error: --dim must be 64 or 128, got %d\n", dim);
    std::exit(course::kExitFail);
  }
  Plant p;
  if (!course::parse_plant(plant, {Plant::kZerosSmall, Plant::kTile}, p)) std::exit(course::kExitFail);
  if (bench && p != Plant::kNone) {
    std::fprintf(stderr, "error: --plant checks one shape; it cannot be combined with --bench\n");
    std::exit(course::kExitFail);
  }
  return Options{make_shape(batch, heads, seq, dim, causal, padding), seed, bench, p};
}

// --profile NAME: which of `names` to launch once, unchecked, for Nsight Compute (the programs'
// ncu scripts), or -1 without the option. Taken out of argv before parse_options reads the rest.
inline int take_profile_option(int& argc, char** argv, std::initializer_list<const char*> names) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") != 0) continue;
    const char* what = i + 1 < argc ? argv[i + 1] : "";
    int which = 0;
    for (const char* name : names) {
      if (std::strcmp(what, name) == 0) {
        for (int j = i; j + 2 < argc; ++j) argv[j] = argv[j + 2];
        argc -= 2;
        return which;
      }
      ++which;
    }
    std::string expected;
    for (const char* name : names) expected += (expected.empty() ? "" : ", ") + std::string(name);
    std::fprintf(stderr, "error: --profile expects one of %s, got '%s'\n", expected.c_str(), what);
    std::exit(course::kExitFail);
  }
  return -1;
}

using course::device_alloc;
using course::device_free;
using course::to_device;
using course::to_host;
// bf16 rounding (kernels/common/bf16.cuh) and the host's threads (kernels/common/cpu_threads.cuh).
using course::parallel_for;
using course::round_bf16;
using course::round_to_bf16;

// Random inputs, rounded to bf16 so that the reference sees exactly the values the GPU reads.
// Q and K in [-2, 2] give scaled scores with a spread of a few units, so that the softmax is far
// from uniform and the running maximum changes often; V in [-1, 1] bounds every output by 1.
struct Inputs {
  std::vector<float> q, k, v;           // bf16 values held as floats (the reference's inputs)
  std::vector<__nv_bfloat16> qb, kb, vb;  // the same values, for the GPU
};

// Uniform values in [lo, hi), each a hash of (seed, index) (splitmix64's mixing), rounded to bf16: the
// same numbers however many threads make them, so that the inputs of the memory sweeps' long sequences
// (3 x 268M values at 32768) are made on every core instead of one.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
inline void fill_uniform_bf16(std::vector<float>& x, std::vector<__nv_bfloat16>& xb, size_t n, uint64_t seed,
                              float lo, float hi) {
  x.resize(n);
  xb.resize(n);
  const uint64_t base = mix64(seed + 0x9E3779B97F4A7C15ULL);
  constexpr long long kChunk = 1 << 20;
  parallel_for((static_cast<long long>(n) + kChunk - 1) / kChunk, [&](long long c) {
    const size_t end = std::min(n, static_cast<size_t>((c + 1) * kChunk));
    for (size_t i = static_cast<size_t>(c * kChunk); i < end; ++i) {
      const float u = static_cast<float>(mix64(base + (i + 1) * 0x9E3779B97F4A7C15ULL) >> 40) * 0x1.0p-24f;
      xb[i] = __float2bfloat16(lo + (hi - lo) * u);  // u < 1: below hi before rounding
      x[i] = __bfloat162float(xb[i]);
    }
  });
}

inline Inputs make_inputs(const Shape& s, uint64_t seed) {
  Inputs in;
  fill_uniform_bf16(in.q, in.qb, s.elements(), seed, -2.0f, 2.0f);
  fill_uniform_bf16(in.k, in.kb, s.elements(), seed + 1, -2.0f, 2.0f);
  fill_uniform_bf16(in.v, in.vb, s.elements(), seed + 2, -1.0f, 1.0f);
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
// With out_bf16_p, also the same row with each weight p rounded to bf16 before P V (the row sum
// keeps the unrounded p), as the tensor-core kernels compute it: the checks' measure of what the
// kernels' precision costs.
inline void reference_row(const Shape& s, const float* q, const float* k, const float* v, long long r,
                          double* out, double* lse, double* out_bf16_p = nullptr) {
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
  if (out_bf16_p)
    for (int c = 0; c < s.dim; ++c) out_bf16_p[c] = 0.0;
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
    if (!out_bf16_p) continue;
    const double p_bf16 = round_bf16(p);
    for (int c = 0; c < s.dim; ++c) out_bf16_p[c] += p_bf16 * vh[1LL * j * s.dim + c];
  }
  for (int c = 0; c < s.dim; ++c) out[c] /= sum;
  if (out_bf16_p)
    for (int c = 0; c < s.dim; ++c) out_bf16_p[c] /= sum;
  *lse = m + std::log(sum);
}
// --8<-- [end:reference]

// --8<-- [start:reference_backward]
// float64 reference of the backward pass for one (batch, head) `bh`, given dO: with P the softmax
// of the masked scaled scores and O = P V,
//   dV = P^T dO,  dP = dO V^T,  dS = P o (dP - rowsum(dO o O)),  dQ = scale dS K,  dK = scale dS^T Q.
// A masked pair has P = 0 and contributes nothing; a fully masked row's dQ is 0.
// Optionally also the same gradients in the kernels' precision, the checks' measure of what it costs:
// `fp32` with delta taken from the bf16 output of a bf16-P forward (what a backward is given: version
// 1), `bf16` with that delta, P rounded to bf16 for dV, dS for dQ and dK, and the gradients rounded
// to bf16 (version 2).
struct Gradients {
  double *dq, *dk, *dv;  // [seq][dim] each
};
// The last step of the rounded references: version 1's dV is the exact one; version 2's gradients
// are rounded to bf16.
inline void round_gradients(long long count, const Gradients& exact, const Gradients* fp32, const Gradients* bf16) {
  for (long long e = 0; e < count; ++e) {
    if (fp32) fp32->dv[e] = exact.dv[e];
    if (bf16)
      bf16->dq[e] = round_bf16(bf16->dq[e]), bf16->dk[e] = round_bf16(bf16->dk[e]),
      bf16->dv[e] = round_bf16(bf16->dv[e]);
  }
}
// What the backward needs of query row i from the forward: its logsumexp and delta = rowsum(dO o O),
// exactly and with O as a kernel is given it (from a bf16-P forward, rounded to bf16).
struct RowStats {
  double lse = 0, delta = 0, delta_low = 0;
};
inline RowStats reference_row_stats(const Shape& s, const float* q, const float* k, const float* v,
                                    const float* d_out, long long bh, int i) {
  std::vector<double> out(s.dim), out_bf16_p(s.dim);
  RowStats r;
  reference_row(s, q, k, v, bh * s.seq + i, out.data(), &r.lse, out_bf16_p.data());
  const float* d_out_i = d_out + (bh * s.seq + i) * s.dim;
  for (int c = 0; c < s.dim; ++c) {
    r.delta += static_cast<double>(d_out_i[c]) * out[c];
    r.delta_low += static_cast<double>(d_out_i[c]) * round_bf16(out_bf16_p[c]);
  }
  return r;
}
// One allowed (query i, key j) pair, from its two dot products q_i . k_j and dO_i . v_j: P, and
// dS = P (dP - delta) scale exactly, with delta_low (fp32), and with P (dP - delta_low) rounded to bf16
// before the scale (bf16); P rounded to bf16 for dV.
struct PairGrads {
  double p, ds, ds_fp32, p_bf16, ds_bf16;
};
inline PairGrads pair_grads(const Shape& s, double dot, double dp, const RowStats& row) {
  const double p = std::exp(dot * s.scale() - row.lse);
  return {p, p * (dp - row.delta) * s.scale(), p * (dp - row.delta_low) * s.scale(), round_bf16(p),
          round_bf16(p * (dp - row.delta_low)) * s.scale()};
}
// A [seq][dim] matrix as [dim][seq]: the dot products below then run along contiguous memory.
inline std::vector<float> transposed(const float* m, int n, int d) {
  std::vector<float> t(1LL * n * d);
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < d; ++c) t[1LL * c * n + j] = m[1LL * j * d + c];
  return t;
}
// x . a_j and y . b_j for every j in [lo, hi), given a and b transposed (stride n): each a sum over
// the dims in order, as a dot product takes it, but all j at once, so that the compiler vectorises
// across them (one dot product at a time waits on its own additions).
inline void dots(const float* x, const float* y, const float* a_t, const float* b_t, int n, int d, int lo, int hi,
                 double* xa, double* yb) {
  for (int j = lo; j < hi; ++j) xa[j] = yb[j] = 0.0;
  for (int c = 0; c < d; ++c) {
    const double xc = x[c], yc = y[c];
    const float *a = a_t + 1LL * c * n, *b = b_t + 1LL * c * n;
    for (int j = lo; j < hi; ++j) xa[j] += xc * a[j], yb[j] += yc * b[j];
  }
}
// dQ of head bh's query rows [i0, i1), each row a sum over its keys; dK and dV of its keys [j0, j1),
// each key a sum over its query rows. Two passes instead of one over the pairs: each writes only the
// rows it owns, so that a head splits over cores without private copies of dK and dV to add up.
inline void reference_dq(const Shape& s, const float* q, const float* k, const float* v, const float* d_out,
                         long long bh, const RowStats* rows, Gradients exact, const Gradients* fp32,
                         const Gradients* bf16, int i0, int i1) {
  const int n = s.seq, d = s.dim, b = static_cast<int>(bh / s.heads);
  const long long off = bh * n * d;
  q += off, k += off, v += off, d_out += off;
  const std::vector<float> k_t = transposed(k, n, d), v_t = transposed(v, n, d);
  std::vector<double> dot(n), dp(n);
  for (int i = i0; i < i1; ++i) {
    double *dq = exact.dq + 1LL * i * d, *dq_fp32 = fp32 ? fp32->dq + 1LL * i * d : nullptr,
           *dq_bf16 = bf16 ? bf16->dq + 1LL * i * d : nullptr;
    for (int c = 0; c < d; ++c) {
      dq[c] = 0.0;
      if (fp32) dq_fp32[c] = 0.0;
      if (bf16) dq_bf16[c] = 0.0;
    }
    const int keys = std::min(s.key_len[b], s.causal ? i + 1 : n);  // row i sees keys [0, keys)
    dots(q + 1LL * i * d, d_out + 1LL * i * d, k_t.data(), v_t.data(), n, d, 0, keys, dot.data(), dp.data());
    for (int j = 0; j < keys; ++j) {
      if (!s.allowed(b, i, j)) continue;
      const float* k_j = k + 1LL * j * d;
      const PairGrads g = pair_grads(s, dot[j], dp[j], rows[i]);
      for (int c = 0; c < d; ++c) dq[c] += g.ds * k_j[c];
      if (fp32)
        for (int c = 0; c < d; ++c) dq_fp32[c] += g.ds_fp32 * k_j[c];
      if (bf16)
        for (int c = 0; c < d; ++c) dq_bf16[c] += g.ds_bf16 * k_j[c];
    }
  }
}
inline void reference_dkdv(const Shape& s, const float* q, const float* k, const float* v, const float* d_out,
                           long long bh, const RowStats* rows, Gradients exact, const Gradients* fp32,
                           const Gradients* bf16, int j0, int j1) {
  const int n = s.seq, d = s.dim, b = static_cast<int>(bh / s.heads);
  const long long off = bh * n * d;
  q += off, k += off, v += off, d_out += off;
  const std::vector<float> q_t = transposed(q, n, d), d_out_t = transposed(d_out, n, d);
  std::vector<double> dot(n), dp(n);
  for (int j = j0; j < j1; ++j) {
    double *dk = exact.dk + 1LL * j * d, *dv = exact.dv + 1LL * j * d;
    double* dk_fp32 = fp32 ? fp32->dk + 1LL * j * d : nullptr;  // version 1's dV is the exact one
    double *dk_bf16 = bf16 ? bf16->dk + 1LL * j * d : nullptr, *dv_bf16 = bf16 ? bf16->dv + 1LL * j * d : nullptr;
    for (int c = 0; c < d; ++c) {
      dk[c] = dv[c] = 0.0;
      if (fp32) dk_fp32[c] = 0.0;
      if (bf16) dk_bf16[c] = dv_bf16[c] = 0.0;
    }
    if (j >= s.key_len[b]) continue;    // a padding key: no row sees it
    const int first = s.causal ? j : 0;  // key j is seen by rows [first, n)
    dots(k + 1LL * j * d, v + 1LL * j * d, q_t.data(), d_out_t.data(), n, d, first, n, dot.data(), dp.data());
    for (int i = first; i < n; ++i) {
      if (!s.allowed(b, i, j)) continue;
      const float *q_i = q + 1LL * i * d, *d_out_i = d_out + 1LL * i * d;
      const PairGrads g = pair_grads(s, dot[i], dp[i], rows[i]);
      for (int c = 0; c < d; ++c) dv[c] += g.p * d_out_i[c], dk[c] += g.ds * q_i[c];
      if (fp32)
        for (int c = 0; c < d; ++c) dk_fp32[c] += g.ds_fp32 * q_i[c];
      if (bf16)
        for (int c = 0; c < d; ++c) dv_bf16[c] += g.p_bf16 * d_out_i[c], dk_bf16[c] += g.ds_bf16 * q_i[c];
    }
  }
}
// Every gradient of one head on one core.
inline void reference_backward(const Shape& s, const float* q, const float* k, const float* v, const float* d_out,
                               long long bh, Gradients exact, const Gradients* fp32 = nullptr,
                               const Gradients* bf16 = nullptr) {
  std::vector<RowStats> rows(s.seq);
  for (int i = 0; i < s.seq; ++i) rows[i] = reference_row_stats(s, q, k, v, d_out, bh, i);
  reference_dq(s, q, k, v, d_out, bh, rows.data(), exact, fp32, bf16, 0, s.seq);
  reference_dkdv(s, q, k, v, d_out, bh, rows.data(), exact, fp32, bf16, 0, s.seq);
  round_gradients(1LL * s.seq * s.dim, exact, fp32, bf16);
}
// --8<-- [end:reference_backward]

// A CHECK line's name is one word: "v1 b2 h3 s1 d128 causal" becomes "v1_b2_h3_s1_d128_causal".
inline std::string check_label(std::string text) {
  for (char& c : text) c = c == ' ' ? '_' : c;
  return text;
}

// --8<-- [start:tolerances]
// The criterion (FlashAttention's tests' convention): a kernel's error against float64 may be at
// most twice the error of the same computation done in the kernel's precision, both measured
// against float64. The "rounded" reference rounds exactly where the kernel rounds (P to bf16 before
// P V, the output to bf16; in the backward also dS and the gradients), so its error is what that
// precision costs on these very values, and the tolerance follows the data: small where the outputs
// are small. Two tests, both needed:
//  - every element: |got - exact| <= tol = 2 max |rounded - exact| + floor. A kernel that writes
//    zeros wherever |exact| < tol fails; the CHECK line prints below_tol, the share of such elements;
//  - every group of rows: rms(got - exact) <= 2 rms(rounded - exact) + rms_all(rounded - exact) / 2
//    + floor, so that a tile shifted by far less than tol (1% of the typical value) fails too.
// floor = 2^-12 rms(exact) + 2^-20: room for the fp32 arithmetic where the rounded reference is exact
// (an fp32 output, a row with one key); tiny against every rounding error above. The absolute 2^-20
// covers outputs that are exactly zero in exact arithmetic: with one key, dS = P (dP - D) is zero,
// and fp32's rounding of dP - D leaves about 2^-24 of the inputs' scale (|q|, |k| <= 2, |v|, |dO| <= 1).
struct Verdict {
  bool ok = false;
  size_t n = 0;
  double tol = 0, below_tol = 0, max_err = 0, ref_max_err = 0, rms_ratio = 0;  // rms_ratio: worst group
  long long bad = -1;                // first failing element, or -1
  long long bad_group = -1;          // first failing group, or -1
  double got_bad = 0, want_bad = 0;  // the failing element's values
};

inline Verdict compare_scaled(const float* got, const double* exact, const double* rounded, size_t n, size_t group) {
  Verdict r;
  r.n = n;
  double sq_exact = 0, sq_ref = 0;
  for (size_t e = 0; e < n; ++e) {
    sq_exact += exact[e] * exact[e];
    sq_ref += (rounded[e] - exact[e]) * (rounded[e] - exact[e]);
    r.ref_max_err = std::max(r.ref_max_err, std::fabs(rounded[e] - exact[e]));
  }
  const double floor = 0x1p-12 * std::sqrt(sq_exact / std::max<size_t>(n, 1)) + 0x1p-20;
  const double rms_ref_all = std::sqrt(sq_ref / std::max<size_t>(n, 1));
  r.tol = 2 * r.ref_max_err + floor;
  size_t below = 0;
  bool ok = n > 0;
  for (size_t g0 = 0; g0 < n; g0 += group) {
    const size_t g1 = std::min(n, g0 + group);
    double sq_err = 0, sq_ref_g = 0;
    for (size_t e = g0; e < g1; ++e) {
      const double err = got[e] == exact[e] ? 0.0 : std::fabs(got[e] - exact[e]);
      below += std::fabs(exact[e]) < r.tol;
      if (!(err <= r.tol) && r.bad < 0) r.bad = static_cast<long long>(e), r.got_bad = got[e], r.want_bad = exact[e];
      if (err <= r.tol) r.max_err = std::max(r.max_err, err);
      sq_err += err * err;
      sq_ref_g += (rounded[e] - exact[e]) * (rounded[e] - exact[e]);
    }
    const double count = static_cast<double>(g1 - g0);
    const double allowed = 2 * std::sqrt(sq_ref_g / count) + rms_ref_all / 2 + floor;
    const double ratio = std::sqrt(sq_err / count) / allowed;
    if (!(ratio <= 1.0) && allowed > 0) {
      if (r.bad_group < 0) r.bad_group = static_cast<long long>(g0 / group);
    } else if (allowed > 0) {
      r.rms_ratio = std::max(r.rms_ratio, ratio);
    } else if (sq_err > 0) {  // nothing allowed (an all-zero reference) and an error: fails
      if (r.bad_group < 0) r.bad_group = static_cast<long long>(g0 / group);
    }
  }
  r.below_tol = n ? static_cast<double>(below) / n : 0.0;
  r.ok = ok && r.bad < 0 && r.bad_group < 0;
  return r;
}
// --8<-- [end:tolerances]

// The CHECK line of a verdict: the effective tolerance and the share of reference values below it.
inline bool report(const std::string& name, const Verdict& r) {
  const std::string label = check_label(name);
  if (r.n == 0) {
    std::printf("CHECK FAIL %s n=0 (nothing was compared)\n", label.c_str());
  } else if (r.ok) {
    std::printf(
        "CHECK PASS %s n=%zu below_tol=%.3g%% tol=%.3g max_err=%.3g rounded_ref_max_err=%.3g rms_ratio=%.3g\n",
        label.c_str(), r.n, 100 * r.below_tol, r.tol, r.max_err, r.ref_max_err, r.rms_ratio);
  } else if (r.bad >= 0) {
    std::printf("CHECK FAIL %s n=%zu below_tol=%.3g%% tol=%.3g first_bad=%lld got=%.9g want=%.9g\n", label.c_str(),
                r.n, 100 * r.below_tol, r.tol, r.bad, r.got_bad, r.want_bad);
  } else {
    std::printf("CHECK FAIL %s n=%zu below_tol=%.3g%% tol=%.3g bad_group=%lld (rms error over twice the rounded "
                "reference's)\n",
                label.c_str(), r.n, 100 * r.below_tol, r.tol, r.bad_group);
  }
  return r.ok;
}

// The rows compared with each check group (16 rows: one mma row-tile of the kernels).
constexpr size_t kGroupRows = 16;

// The old criterion, |got - exact| <= atol + rtol |exact| with fixed atol (2^-7 for a bf16-P output,
// 2^-6 for the gradients): kept only so that a planted run can say whether it would have passed.
constexpr double kOldRtol = 0x1p-7, kOldAtolOut = 0x1p-7, kOldAtolGrad = 0x1p-6;

inline bool old_criterion_accepts(const float* got, const double* exact, size_t n, double atol) {
  for (size_t e = 0; e < n; ++e)
    if (!(std::fabs(got[e] - exact[e]) <= atol + kOldRtol * std::fabs(exact[e]))) return false;
  return true;
}

// Corrupt a copy of a kernel's output (rows of row_len values, as compared) with the planted fault.
inline std::vector<float> planted(Plant p, std::vector<float> got, const double* exact, size_t row_len,
                                  double old_atol) {
  const size_t n = got.size();
  if (p == Plant::kZerosSmall) {
    for (size_t e = 0; e < n; ++e)
      if (std::fabs(exact[e]) < old_atol) got[e] = 0.0f;
    return got;
  }
  double sq = 0;
  for (size_t e = 0; e < n; ++e) sq += exact[e] * exact[e];
  const double shift = 0.01 * std::sqrt(sq / std::max<size_t>(n, 1));  // 1% of the typical magnitude
  const size_t rows = n / row_len, first = rows * 3 / 5 / 64 * 64;      // a tile mid-sequence, not a head's first
  for (size_t e = first * row_len; e < std::min(n, (first + 64) * row_len); ++e) got[e] += static_cast<float>(shift);
  return got;
}

// A planted run's verdict: the clean output passes, the planted one fails the data-scaled check.
// Prints CHECK PASS planted_<fault>_caught (the suffix names a gradient where there are several),
// and whether the old fixed tolerance would have let the fault through.
inline bool report_planted(Plant p, const std::string& suffix, const std::vector<float>& got, const double* exact,
                           const double* rounded, size_t row_len, double old_atol) {
  const size_t n = got.size(), group = kGroupRows * row_len;
  const Verdict clean = compare_scaled(got.data(), exact, rounded, n, group);
  const std::vector<float> bad = planted(p, got, exact, row_len, old_atol);
  const Verdict fault = compare_scaled(bad.data(), exact, rounded, n, group);
  const bool old_ok = old_criterion_accepts(bad.data(), exact, n, old_atol);
  const bool caught = clean.ok && !fault.ok;
  std::printf("CHECK %s planted_%s_caught%s n=%zu clean=%s planted=%s old_tol=%s below_tol=%.3g%% tol=%.3g\n",
              caught ? "PASS" : "FAIL", plant_name(p), suffix.c_str(), n, clean.ok ? "pass" : "FAIL",
              fault.ok ? "pass" : "rejected", old_ok ? "accepted" : "rejected", 100 * clean.below_tol, clean.tol);
  return caught;
}

// The rows to check, within a budget of the float64 reference's work (query rows x keys x dim,
// shared by every core; 2e11 takes a quarter of a minute on 16 cores): every row where it fits (the
// benchmark case, b4 h16 s4096 d128, fits);
// otherwise evenly spaced tiles of 64 consecutive rows over all (batch, head)s, the first and the
// last tile included. A benchmark's repeat timing process checks a 1/16 sample of what the first
// checked in full (course::is_timing_repeat).
constexpr double kCheckBudget = 2e11, kSweepBudget = 1e10;  // the memory sweeps check a sample
inline std::vector<long long> rows_to_check(const Shape& s, double budget = kCheckBudget) {
  if (course::is_timing_repeat()) budget /= 16;
  std::vector<long long> rows;
  const double cost = static_cast<double>(s.rows()) * s.seq * s.dim * (s.causal ? 0.5 : 1.0);
  if (cost <= budget) {
    for (long long r = 0; r < s.rows(); ++r) rows.push_back(r);
    return rows;
  }
  const long long tiles = (s.rows() + 63) / 64;
  const long long picked = std::max(2LL, static_cast<long long>(tiles * (budget / cost)));
  for (long long t = 0; t < picked; ++t) {
    const long long tile = t * (tiles - 1) / (picked - 1);
    for (long long r = tile * 64; r < std::min(s.rows(), tile * 64 + 64); ++r) rows.push_back(r);
  }
  return rows;
}

// The float64 reference of the forward on the checked rows, computed once per shape on every core
// and shared by every kernel checked on it: the exact output and logsumexp, and the output in the
// kernels' precision with P in fp32 (only the output rounded to bf16: v1) and with P in bf16.
struct ForwardReference {
  std::vector<long long> rows;
  std::vector<double> exact, rounded_fp32_p, rounded_bf16_p, lse;  // [checked row][dim], [checked row]
};

inline ForwardReference forward_reference(const Shape& s, const Inputs& in, std::vector<long long> rows) {
  ForwardReference f;
  f.rows = std::move(rows);
  const size_t count = f.rows.size(), d = s.dim;
  f.exact.resize(count * d), f.rounded_fp32_p.resize(count * d), f.rounded_bf16_p.resize(count * d);
  f.lse.resize(count);
  parallel_for(static_cast<long long>(count), [&](long long i) {
    double* out = &f.exact[i * d];
    double* out_bf16_p = &f.rounded_bf16_p[i * d];
    reference_row(s, in.q.data(), in.k.data(), in.v.data(), f.rows[i], out, &f.lse[i], out_bf16_p);
    for (size_t c = 0; c < d; ++c) {
      f.rounded_fp32_p[i * d + c] = round_bf16(out[c]);
      out_bf16_p[c] = round_bf16(out_bf16_p[c]);
    }
  });
  return f;
}

// Check a forward kernel's output rows (bf16) and logsumexp (float, natural log; empty: not
// produced) on the reference's rows; bf16_p: the kernel rounds P to bf16 before P V. With a plant,
// only the planted verdict is printed.
inline bool check_forward(const std::string& name, const Shape& s, const ForwardReference& ref,
                          const std::vector<__nv_bfloat16>& out, const std::vector<float>& lse, bool bf16_p,
                          Plant plant = Plant::kNone) {
  std::vector<float> got, got_lse;
  for (long long r : ref.rows) {
    for (int c = 0; c < s.dim; ++c) got.push_back(__bfloat162float(out[r * s.dim + c]));
    if (!lse.empty()) got_lse.push_back(lse[r]);
  }
  const std::vector<double>& rounded = bf16_p ? ref.rounded_bf16_p : ref.rounded_fp32_p;
  if (plant != Plant::kNone)
    return report_planted(plant, "", got, ref.exact.data(), rounded.data(), s.dim, kOldAtolOut);
  const bool ok_out = report(name, compare_scaled(got.data(), ref.exact.data(), rounded.data(), got.size(),
                                                  kGroupRows * s.dim));
  if (lse.empty()) return ok_out;
  // The logsumexp (a few units, never small) carries the fp32 scores' error only: a dot product of
  // D = 128 terms |q k| <= 4 is off by at most D * 2^-24 * 512 ~ 4e-3 before the scale 1/sqrt(D).
  // A fully masked row's +inf must be +inf.
  const std::string lse_name = check_label(name + " logsumexp");
  return course::check_close(lse_name.c_str(), got_lse.data(), ref.lse.data(), got_lse.size(), 1e-5, 1e-3) && ok_out;
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

// One run of a fused forward kernel as the checks see it: O and the logsumexp poisoned, `launch()` run
// and waited for, both copied back and checked against the reference (check_forward).
template <typename Launch>
bool run_and_check_forward(const std::string& name, const Shape& s, const ForwardReference& ref,
                           const ForwardBuffers& d, bool bf16_p, Plant plant, const Launch& launch) {
  course::poison(d.o, s.elements() * sizeof(__nv_bfloat16));
  course::poison(d.lse, s.rows() * sizeof(float));
  launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  return check_forward(name, s, ref, to_host(d.o, s.elements()), to_host(d.lse, s.rows()), bf16_p, plant);
}

// A fused forward kernel timed (`launch()` runs it once: 2 warm-up runs, then the median of `repeats`)
// and its BENCH row printed. Bytes the operation must move: Q, K, V read once, O written once, the
// logsumexp written.
template <typename Launch>
void bench_forward(const Shape& s, const char* impl, double alloc_bytes, int repeats, const Launch& launch) {
  const double time_ms = course::time_kernel_ms(launch, 2, repeats);
  const double bytes = 4.0 * s.elements() * sizeof(__nv_bfloat16) + s.rows() * sizeof(float);
  print_bench_row(case_name(s).c_str(), impl, time_ms, bytes, s.forward_flops(), s.seq, alloc_bytes);
}

}  // namespace attn
