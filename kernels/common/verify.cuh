// verify.cuh: checks that print the CHECK lines the harness reads (course/verdicts.py), and the
// tolerances they take. Taught in docs/conventions.md.
//   check_close            |got - want| <= atol + rtol |want| element by element; the first mismatch printed
//   check_true             a check that is not element-wise: PASS only if it held and checked something
//   check_close_each       check_close with an absolute tolerance per element (one that scales with the data)
//   sum_atol, abs_values   the atol of each computed sum (a GEMM or convolution output) from its terms' sizes
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace course {

// --8<-- [start:compare]
// Compare got against want with |got - want| <= atol + rtol * |want|; equal infinities match, and
// NaN never passes.
// Prints one line the harness parses:
//   CHECK PASS <name> n=<elements> max_abs_err=<e> rtol=<r> atol=<a>
//   CHECK FAIL <name> n=<elements> first_bad=<index> got=<g> want=<w>
template <typename T, typename R>
bool check_close(const char* name, const T* got, const R* want, size_t n, double rtol, double atol) {
  double max_abs_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    // Equal values match, equal infinities included (softmax of -inf rows), whatever the tolerance:
    // rtol * |inf| would be NaN when rtol is 0. The comparison is written so that NaN fails.
    const double err = g == w ? 0.0 : std::fabs(g - w);
    if (g != w && !(err <= atol + rtol * std::fabs(w))) {
      std::printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g\n", name, n, i, g, w);
      return false;
    }
    max_abs_err = std::max(max_abs_err, err);
  }
  if (n == 0) {
    std::printf("CHECK FAIL %s n=0 (nothing was compared)\n", name);
    return false;
  }
  std::printf("CHECK PASS %s n=%zu max_abs_err=%.3g rtol=%.1g atol=%.1g\n", name, n, max_abs_err, rtol,
              atol);
  return true;
}
// --8<-- [end:compare]

// For checks that are not element-wise comparisons (for example "the device reports sane limits"):
// n says how many facts were checked, so a check that checked nothing cannot pass.
inline bool check_true(const char* name, bool ok, size_t n, const char* detail = "") {
  if (ok && n > 0) {
    std::printf("CHECK PASS %s n=%zu %s\n", name, n, detail);
    return true;
  }
  std::printf("CHECK FAIL %s n=%zu %s\n", name, n, detail);
  return false;
}
// --8<-- [start:compare_each]
// check_close with an absolute tolerance per element: |got - want| <= rtol * |want| + atol[i]. A
// fixed atol is only right for one scale of data: where outputs are smaller than it, a kernel that
// writes zeros passes. atol[i] is computed beside the reference from what limits element i's accuracy:
// u times the condition of its sum (sum |terms|, a dot product's sum |a_k b_k|), or for an FFT a
// multiple of u log2(n) times its transform's norm. Prints the same CHECK lines as check_close.
template <typename T, typename R>
bool check_close_each(const char* name, const T* got, const R* want, const double* atol, size_t n, double rtol) {
  double max_abs_err = 0.0, max_share = 0.0;  // max_share: the largest error as a share of its tolerance
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    const double err = g == w ? 0.0 : std::fabs(g - w);
    const double tol = atol[i] + rtol * std::fabs(w);
    if (g != w && !(err <= tol)) {  // equal infinities match whatever rtol; NaN fails
      std::printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g tol=%.3g\n", name, n, i, g, w, tol);
      return false;
    }
    max_abs_err = std::max(max_abs_err, err);
    if (tol > 0) max_share = std::max(max_share, err / tol);
  }
  if (n == 0) {
    std::printf("CHECK FAIL %s n=0 (nothing was compared)\n", name);
    return false;
  }
  const double max_atol = *std::max_element(atol, atol + n), min_atol = *std::min_element(atol, atol + n);
  std::printf("CHECK PASS %s n=%zu max_abs_err=%.3g rtol=%.1g atol=%.2g..%.2g worst_err_over_tol=%.2g\n", name, n,
              max_abs_err, rtol, min_atol, max_atol, max_share);
  return true;
}
// --8<-- [end:compare_each]

// --8<-- [start:sum_atol]
// The absolute tolerance of each output that is a sum of `terms` products (a GEMM's dot products, a
// convolution's window), from sum_abs[i] = sum |a_k b_k| of output i, computed beside the reference:
//   atol[i] = (2 u_in + min(terms, 8 sqrt(terms)) u_acc) * sum_abs[i].
// u_in is the unit roundoff of inputs the GPU rounds but the reference does not (TF32: 2^-10, which also
// covers truncation; 0 where the reference reads the rounded inputs): each product then moves by at most
// 2 u_in of its size. u_acc is the accumulator's (fp32: 2^-23, which covers tensor cores' truncating
// adds): `terms` additions move a sum by at most terms u_acc sum_abs, and by 8 sqrt(terms) u_acc sum_abs
// with overwhelming probability when the roundings are independent (Higham and Mary, "A new approach to
// probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019). The tolerance follows each
// output's own terms: an output made of small terms (a quiet row) gets a small one, where a fixed atol let
// zeros pass.
inline std::vector<double> sum_atol(const std::vector<double>& sum_abs, long long terms, double u_acc,
                                    double u_in = 0) {
  const double t = static_cast<double>(terms > 0 ? terms : 1);
  const double factor = 2 * u_in + std::min(t, 8 * std::sqrt(t)) * u_acc;
  std::vector<double> atol(sum_abs.size());
  for (size_t i = 0; i < atol.size(); ++i) atol[i] = factor * sum_abs[i];
  return atol;
}
// --8<-- [end:sum_atol]

// |v| as floats (exact for float, half and bf16 inputs): run a reference on |A| and |B| to get each
// output's sum |a_k b_k| for sum_atol.
template <typename T>
std::vector<float> abs_values(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(static_cast<float>(v[i]));
  return out;
}

}  // namespace course
