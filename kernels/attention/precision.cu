// precision.cu: the floating-point formats of deep learning (fp32, tf32, fp16, bf16, fp8 e4m3 and
// e5m2), measured on the CPU: their range and precision found by probing each type's own conversion,
// the error of a length-K dot product with inputs rounded to each format and the sum accumulated in
// fp32 or in the format itself, checked against the textbook bound, and loss scaling for gradients
// that fp16 cannot hold.
//
// Taught in docs/attention/precision.md. Host code only: cuda_fp16.h, cuda_bf16.h and cuda_fp8.h
// convert on the CPU too, so this runs (and is checked) on machines without a GPU. tf32 has no
// storage type: it is fp32 with the low 13 mantissa bits rounded away, which is what this emulates.
// Build: mkdir -p build/attention && nvcc -std=c++17 -O3 -o build/attention/precision kernels/attention/precision.cu
// Run:   ./build/attention/precision [--trials 8] [--max-k 65536] [--seed 1]
//
// course: run --trials 4 --max-k 4096
// course: run
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/verify.cuh"

// --8<-- [start:formats]
// A format is its rounding function: double in, nearest value of the format out (as a double).
// Everything below (range, precision, errors) is measured through these functions.
using RoundFn = double (*)(double);

double round_fp32(double x) { return static_cast<double>(static_cast<float>(x)); }
double round_tf32(double x) {  // fp32's exponent, 10 fraction bits: round to nearest even on the bits
  float f = static_cast<float>(x);
  if (!std::isfinite(f)) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x0FFFu + ((bits >> 13) & 1u);  // add half of the dropped part (ties to even), then drop it
  bits &= ~0x1FFFu;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
double round_fp16(double x) { return static_cast<double>(__half2float(__double2half(x))); }
double round_bf16(double x) { return static_cast<double>(__bfloat162float(__double2bfloat16(x))); }
// The fp8 constructors saturate (__NV_SATFINITE): a value beyond the range becomes the largest finite
// one, as the hardware's satfinite conversions do, instead of inf (e4m3 has no inf at all).
double round_e4m3(double x) { return static_cast<double>(static_cast<float>(__nv_fp8_e4m3(x))); }
double round_e5m2(double x) { return static_cast<double>(static_cast<float>(__nv_fp8_e5m2(x))); }

struct Format {
  const char* name;
  RoundFn round;
};
const Format kFormats[] = {{"fp32", round_fp32}, {"tf32", round_tf32}, {"fp16", round_fp16},
                           {"bf16", round_bf16}, {"fp8_e4m3", round_e4m3}, {"fp8_e5m2", round_e5m2}};
// --8<-- [end:formats]

// --8<-- [start:probe]
// Range and precision of a format, found by asking its rounding function, not typed in.
struct Properties {
  int fraction_bits;    // t: 1 + 2^-t is representable, 1 + 2^-(t+1) is not
  double unit_roundoff; // u = 2^-(t+1): the largest relative error of one rounding to nearest
  double max_finite, min_normal, min_subnormal;
};

bool holds(RoundFn round, double x) { return round(x) == x; }  // x is exactly representable

Properties probe(RoundFn round) {
  Properties p{};
  while (holds(round, 1.0 + std::ldexp(1.0, -(p.fraction_bits + 1)))) ++p.fraction_bits;
  p.unit_roundoff = std::ldexp(1.0, -(p.fraction_bits + 1));
  double top = 1.0;  // largest power of two; then add fraction bits while the value still holds
  while (std::isfinite(2 * top) && holds(round, 2 * top)) top *= 2;
  p.max_finite = top;
  for (int i = 1; i <= p.fraction_bits; ++i)
    if (holds(round, p.max_finite + std::ldexp(top, -i))) p.max_finite += std::ldexp(top, -i);
  // Normal numbers carry all t fraction bits; subnormals lose them one by one below the smallest normal.
  double x = 1.0;
  while (holds(round, x / 2 * (1 + std::ldexp(1.0, -p.fraction_bits)))) x /= 2;
  p.min_normal = x;
  while (x / 2 > 0 && holds(round, x / 2)) x /= 2;
  p.min_subnormal = x;
  return p;
}
// --8<-- [end:probe]

// --8<-- [start:dot]
// x.y with x and y already rounded to the format. Products and the running sum are formed exactly
// (in double, as far as it reaches) and then rounded: to fp32 when accumulating in fp32, to the
// format itself when accumulating in the format. Recursive summation, as one thread's loop does.
double dot(const std::vector<double>& x, const std::vector<double>& y, RoundFn accumulate) {
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum = accumulate(sum + accumulate(x[i] * y[i]));
  return sum;
}

// Higham's bound for recursive summation of K products: |error| <= gamma_K * sum|x_i y_i|,
// gamma_K = K u / (1 - K u). Only meaningful while K u < 1.
double gamma_bound(long long k, double u) { return k * u < 1 ? k * u / (1 - k * u) : INFINITY; }
// --8<-- [end:dot]

// Probe every format, print the table, and check the probes against what the headers and bit
// patterns say. Returns the properties, in kFormats' order; *ok false if a probe disagrees.
std::vector<Properties> probe_all(bool* ok) {
  std::printf("format    | fraction bits | unit roundoff u | max finite   | min normal   | min subnormal\n");
  std::vector<Properties> props;
  for (const Format& f : kFormats) {
    const Properties p = probe(f.round);
    props.push_back(p);
    std::printf("%-9s | %13d | %15.3e | %12.5e | %12.5e | %12.5e\n", f.name, p.fraction_bits, p.unit_roundoff,
                p.max_finite, p.min_normal, p.min_subnormal);
  }
  // The probes against what the headers and bit patterns say: fp32 against <cfloat>, fp16 and bf16
  // against the CUDA headers' constants, fp8 against decoded bit patterns (e4m3 has no infinity and
  // gives its top pattern to NaN, so its largest finite value is 0x7E; e5m2 is IEEE-like: 0x7B).
  auto fp8 = [](auto value, unsigned char bits) {
    value.__x = bits;
    return static_cast<double>(static_cast<float>(value));
  };
  const double expected[6][3] = {
      {FLT_MAX, FLT_MIN, FLT_TRUE_MIN},
      // tf32 as emulated here: fp32's exponent range, 10 fraction bits, fp32's subnormals cut to 10 bits.
      {FLT_MAX * (1 - std::ldexp(1.0, -11)) / (1 - std::ldexp(1.0, -24)), FLT_MIN, std::ldexp(1.0, -136)},
      {__half2float(CUDART_MAX_NORMAL_FP16), std::ldexp(1.0, -14), __half2float(CUDART_MIN_DENORM_FP16)},
      {__bfloat162float(CUDART_MAX_NORMAL_BF16), FLT_MIN, __bfloat162float(CUDART_MIN_DENORM_BF16)},
      {fp8(__nv_fp8_e4m3{}, 0x7E), fp8(__nv_fp8_e4m3{}, 0x08), fp8(__nv_fp8_e4m3{}, 0x01)},
      {fp8(__nv_fp8_e5m2{}, 0x7B), fp8(__nv_fp8_e5m2{}, 0x04), fp8(__nv_fp8_e5m2{}, 0x01)}};
  int facts = 0;
  bool same = true;
  for (int i = 0; i < 6; ++i) {
    const double got[3] = {props[i].max_finite, props[i].min_normal, props[i].min_subnormal};
    for (int j = 0; j < 3; ++j, ++facts)
      if (got[j] != expected[i][j]) {
        std::printf("  %s: probe found %.9g, the header/bit pattern says %.9g\n", kFormats[i].name, got[j],
                    expected[i][j]);
        same = false;
      }
  }
  *ok = course::check_true("format_probes_match_headers", same, facts) && *ok;
  return props;

}

// The dot-product experiment (the page's table) and its two checks.
bool dot_experiment(const std::vector<Properties>& props, int trials, long long max_k, std::mt19937_64& rng) {
  // --8<-- [start:experiment]
  // Dot products of non-negative inputs (like softmax probabilities times values): the running sum
  // grows, so each addition is rounded at a larger magnitude, the worst case for recursive summation.
  std::printf("\nrelative error of x.y, K terms, x and y uniform in [0, 1), median / max of %d trials\n", trials);
  std::printf("%-9s %8s | %-23s | %-23s | %-23s | %s\n", "format", "K", "inputs rounded only",
              "+ fp32 accumulation", "+ accumulation in format", "gamma_K bound (format)");
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  int bounded = 0, compared = 0;
  bool within = true, fp32_wins = true;
  for (size_t fi = 0; fi < 6; ++fi) {
    const Format& f = kFormats[fi];
    const double u = props[fi].unit_roundoff, u32 = props[0].unit_roundoff;
    for (long long k = 16; k <= max_k; k *= 4) {
      std::vector<double> input_err, acc32_err, accf_err;
      for (int t = 0; t < trials; ++t) {
        std::vector<double> x(k), y(k);
        double exact = 0.0, rounded = 0.0, magnitude = 0.0;  // float64 sums (error ~1e-16 relative)
        for (long long i = 0; i < k; ++i) {
          const double a = uniform(rng), b = uniform(rng);
          x[i] = f.round(a);
          y[i] = f.round(b);
          exact += a * b;
          rounded += x[i] * y[i];
          magnitude += std::fabs(x[i] * y[i]);
        }
        const double s32 = dot(x, y, round_fp32), sf = dot(x, y, f.round);
        input_err.push_back(std::fabs(rounded - exact) / exact);
        acc32_err.push_back(std::fabs(s32 - exact) / exact);
        accf_err.push_back(std::fabs(sf - exact) / exact);
        // The check: the accumulation error (against the dot of the rounded inputs) within gamma_K.
        const double bound32 = gamma_bound(k, u32) * magnitude, boundf = gamma_bound(k, u) * magnitude;
        if (std::isfinite(bound32)) {
          ++bounded;
          if (!(std::fabs(s32 - rounded) <= bound32)) within = false;
        }
        if (std::isfinite(boundf)) {
          ++bounded;
          if (!(std::fabs(sf - rounded) <= boundf)) within = false;
        }
      }
      auto median_max = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        char text[64];
        std::snprintf(text, sizeof text, "%9.2e / %9.2e", v[v.size() / 2], v.back());
        return std::string(text);
      };
      // The page's point, checked where the sum has grown (K >= 1024): accumulating fp16 or bf16
      // products in fp16 or bf16 is far worse (100x) than accumulating the same products in fp32.
      if ((fi == 2 || fi == 3) && k >= 1024) {
        ++compared;
        std::vector<double> a = acc32_err, b = accf_err;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (!(b[b.size() / 2] > 100 * a[a.size() / 2])) fp32_wins = false;
      }
      const double g = gamma_bound(k, u);
      char bound[32];
      if (std::isfinite(g)) std::snprintf(bound, sizeof bound, "%.2e", g);
      else std::snprintf(bound, sizeof bound, "none (K u >= 1)");
      std::printf("%-9s %8lld | %s | %s | %s | %s\n", f.name, k, median_max(input_err).c_str(),
                  median_max(acc32_err).c_str(), median_max(accf_err).c_str(), bound);
    }
  }
  bool ok = course::check_true("dot_error_within_gamma_K", within, bounded);
  ok = course::check_true("fp32_accumulation_beats_16_bit", fp32_wins, compared) && ok;
  // --8<-- [end:experiment]
  return ok;

}

// Loss scaling: which gradients fp16 and bf16 keep, with and without a scale, and its checks.
bool loss_scaling(const std::vector<Properties>& props, std::mt19937_64& rng) {
  bool ok = true;
  // --8<-- [start:loss_scaling]
  // Gradients spread over many orders of magnitude (log-uniform from 2^-40 to 2^-4), as a deep
  // network's are. Stored in fp16 they underflow; multiplied by a loss scale S before the cast (the
  // chain rule carries S from the loss to every gradient) they survive, and dividing by S in fp32
  // afterwards gives them back with fp16's relative error.
  std::printf("\nloss scaling: %d gradients, log-uniform in [2^-40, 2^-4]\n", 100000);
  std::uniform_real_distribution<double> exponent(-40.0, -4.0);
  std::vector<double> grads(100000);
  for (double& g : grads) g = std::exp2(exponent(rng));
  const double scale = 65536.0;  // 2^16: keeps the largest gradient (2^-4 * 2^16 = 2^12) far below fp16's max
  const int fp16 = 2, bf16 = 3;  // indices into kFormats
  auto survey = [&](const char* label, int format, double s) {
    long long zero = 0, subnormal = 0, bad = 0;
    const RoundFn round = kFormats[format].round;
    const double min_normal = props[format].min_normal, u = props[format].unit_roundoff;
    for (double g : grads) {
      const double stored = round(g * s);
      if (stored == 0) ++zero;
      else if (stored < min_normal) ++subnormal;
      else if (!(std::fabs(stored / s - g) <= u * g)) ++bad;  // a normal value: relative error <= u
    }
    std::printf("  %-24s flushed to zero %6lld, subnormal (precision lost) %6lld, normal %6lld\n", label, zero,
                subnormal, static_cast<long long>(grads.size()) - zero - subnormal);
    return std::array<long long, 3>{zero, subnormal, bad};
  };
  const auto fp16_plain = survey("fp16, no scaling", fp16, 1.0);
  const auto fp16_scaled = survey("fp16, loss scale 2^16", fp16, scale);
  const auto bf16_plain = survey("bf16, no scaling", bf16, 1.0);
  // What the page says, as checks: fp16 loses gradients unscaled, scaling saves most of them, bf16
  // (fp32's exponent range) loses none, and every value stored as a normal number is within u.
  ok &= course::check_true("fp16_unscaled_underflows", fp16_plain[0] > 0, 1);
  ok &= course::check_true("fp16_scaling_recovers", fp16_scaled[0] * 10 < fp16_plain[0], 1);
  ok &= course::check_true("bf16_keeps_all", bf16_plain[0] == 0 && bf16_plain[1] == 0, 1);
  ok &= course::check_true("normal_values_within_u", fp16_plain[2] + fp16_scaled[2] + bf16_plain[2] == 0, 3);
  // Too large a scale overflows instead: dynamic loss scaling halves S and skips the step when it sees inf.
  const double overflow_scale = std::ldexp(1.0, 24);  // 2^-4 * 2^24 = 2^20 > fp16's max
  long long infinite = 0;
  for (double g : grads) infinite += std::isinf(round_fp16(g * overflow_scale)) ? 1 : 0;
  std::printf("  %-24s overflowed to inf %lld\n", "fp16, loss scale 2^24", infinite);
  ok &= course::check_true("fp16_scale_too_large_overflows", infinite > 0, 1);
  // --8<-- [end:loss_scaling]
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int trials = static_cast<int>(args.get_int("--trials", 8, 1, 1000));
  const long long max_k = args.get_int("--max-k", 65536, 16, 1 << 22);
  const long long seed = args.get_int("--seed", 1, 0);
  args.finish();

  bool ok = true;
  const std::vector<Properties> props = probe_all(&ok);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));  // one stream: the experiment's draws, then the gradients'
  ok = dot_experiment(props, trials, max_k, rng) && ok;
  ok = loss_scaling(props, rng) && ok;
  return ok ? 0 : 1;
}
