// silu_mul.cuh: the MLP's SiLU-and-multiply, out = bf16(silu(gate) * up) in fp32, gate and up the two
// halves of each token's row. Included by silu_mul.cu (which checks and times it) and decode_step.cu.
// Taught in docs/serving/fused-small.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include "bf16_vectors.cuh"

namespace swiglu {

constexpr int kThreads = 256;

// --8<-- [start:kernel]
// fp32 silu. Below x = -88.7 expf(-x) overflows to inf and x / inf is -0: the exact value there is
// below 2^-121, so -0 is within the check's absolute floor. x = -inf gives -inf / inf = NaN, as in
// PyTorch and vLLM; NaN propagates.
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// One thread per 16-byte vector of a row (kVectors: inter is a multiple of 8, so every row of gate, up
// and out starts on a 16-byte boundary) or per element (otherwise: the rows of gate, up and out then
// start at different offsets from a 16-byte boundary, and no one split into scalar head, vectors and
// scalar tail serves all three). blockIdx.y walks the tokens.
template <bool kVectors>
__global__ void __launch_bounds__(kThreads)
    silu_mul(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out, int tokens, int inter) {
  const int units = kVectors ? inter / 8 : inter;
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= units) return;
  for (size_t row = blockIdx.y; row < static_cast<size_t>(tokens); row += gridDim.y) {
    const __nv_bfloat16* gate = in + row * 2 * inter;
    const __nv_bfloat16* up = gate + inter;
    __nv_bfloat16* out_row = out + row * inter;
    if constexpr (kVectors) {
      float g[8], u[8], y[8];
      unpack8(reinterpret_cast<const uint4*>(gate)[i], g);
      unpack8(reinterpret_cast<const uint4*>(up)[i], u);
#pragma unroll
      for (int j = 0; j < 8; ++j) y[j] = silu(g[j]) * u[j];  // fp32 throughout, rounded once by pack8
      reinterpret_cast<uint4*>(out_row)[i] = pack8(y);
    } else {
      out_row[i] = __float2bfloat16(silu(__bfloat162float(gate[i])) * __bfloat162float(up[i]));
    }
  }
}
// --8<-- [end:kernel]

}  // namespace swiglu
