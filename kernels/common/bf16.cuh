// bf16.cuh: bf16 on the host, rounded as the GPU rounds (to nearest even), for inputs that the reference
// and the GPU must see alike and for references computed in the kernels' precision.
// Taught in docs/conventions.md.
//   round_bf16      a value rounded to bf16 (through float, as the kernels' __float2bfloat16)
//   round_to_bf16   a float vector rounded to bf16 in place, and its bf16 copy for the GPU
//   to_bf16         the bf16 copy of a float vector
#pragma once

#include <cuda_bf16.h>

#include <vector>

namespace course {

// --8<-- [start:bf16]
inline double round_bf16(double x) { return __bfloat162float(__float2bfloat16(static_cast<float>(x))); }

inline void round_to_bf16(std::vector<float>& x, std::vector<__nv_bfloat16>& out) {
  out.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = __float2bfloat16(x[i]);
    x[i] = __bfloat162float(out[i]);
  }
}

inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16(v[i]);
  return out;
}
// --8<-- [end:bf16]

}  // namespace course
