// bf16_vectors.cuh: eight bf16 values as one 16-byte load or store, and their conversion to and from
// fp32: the unit of memory access of the chapter's bandwidth-bound kernels.
//
// Taught in docs/serving/decode-attention.md. Included by decode_attention.cu and fused_add_rmsnorm.cu.
//
// course: header
#pragma once

#include <cuda_bf16.h>

// --8<-- [start:vectors]
__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x, out[2 * i + 1] = f.y;
  }
}

// Rounds to nearest even, as __float2bfloat16 does.
__device__ __forceinline__ uint4 pack8(const float (&in)[8]) {
  uint4 raw;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return raw;
}
// --8<-- [end:vectors]
