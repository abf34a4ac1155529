// bf16_checks.cuh: the checks of a bf16 output, against a float64 reference that may hold NaN and after
// a launch with nothing to do, shared by the chapter's element-wise and GEMV programs (silu_mul.cu,
// w4a16_gemv.cu). Taught in docs/serving/w4a16.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/verify.cuh"

// --8<-- [start:check]
// Where the reference is finite, each output within atol[e] + rtol |want[e]| (check_close_each_planted:
// plant_below > 0 also runs the planted zeros-small verdict); where it is NaN, the output must be NaN,
// checked apart as "<name>_nan_propagates", since check_close never passes a NaN.
inline bool check_bf16_with_nans(const char* name, const std::vector<__nv_bfloat16>& got_b,
                                 const std::vector<double>& want, const std::vector<double>& atol, double rtol,
                                 double plant_below) {
  std::vector<float> finite_got;
  std::vector<double> finite_want, finite_atol;
  size_t nan_want = 0, nan_got = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    const float g = __bfloat162float(got_b[e]);
    if (std::isnan(want[e])) {
      ++nan_want, nan_got += std::isnan(g);
      continue;
    }
    finite_got.push_back(g), finite_want.push_back(want[e]), finite_atol.push_back(atol[e]);
  }
  bool ok = course::check_close_each_planted(name, finite_got.data(), finite_want.data(), finite_atol.data(),
                                             finite_got.size(), rtol, plant_below);
  if (nan_want > 0) {
    char nan_name[160];
    std::snprintf(nan_name, sizeof(nan_name), "%s_nan_propagates", name);
    ok = course::check_true(nan_name, nan_got == nan_want, nan_want, "(NaN out wherever the reference is NaN)") &&
         ok;
  }
  return ok;
}
// --8<-- [end:check]

// The check of a launch with nothing to do: the output, filled with the byte 0x5A before it, must still
// hold that sentinel everywhere (the launcher returned without writing).
inline bool check_sentinel_unchanged(const char* name, const __nv_bfloat16* d_out, size_t n) {
  const std::vector<__nv_bfloat16> got = course::to_host(d_out, n);
  size_t untouched = 0;
  for (const __nv_bfloat16& v : got) {
    unsigned short bits;
    std::memcpy(&bits, &v, sizeof(bits));
    untouched += bits == 0x5A5A;
  }
  return course::check_true(name, untouched == n, n, "(the output's sentinel bytes are unchanged)");
}
