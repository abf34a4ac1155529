// rotary.cuh: the rotary embedding (rotate-half form, an fp32 cos and sin table per position), in place
// over a token's query and key heads; head dim a multiple of 16. Included by rotary.cu (which checks and
// times it) and decode_step.cu (whose rope_append rotates with rotate8 while appending to the KV cache).
// Taught in docs/serving/fused-small.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include "bf16_vectors.cuh"

namespace rope {

constexpr int kThreads = 256;

// --8<-- [start:kernel]
// One group of 8 rotate-half pairs of a head: elements i0..i0+7 of src's first half and the same of its
// second half, rotated by the position's fp32 cos and sin rows and written to dst (src itself in place).
// i0 is a multiple of 8 and dim / 2 of 8, so every load and store is 16 bytes.
__device__ __forceinline__ void rotate8(const __nv_bfloat16* src, __nv_bfloat16* dst, int i0, int half,
                                        const float* c_row, const float* s_row) {
  float lo[8], hi[8], c[8], s[8];
  unpack8(*reinterpret_cast<const uint4*>(src + i0), lo);
  unpack8(*reinterpret_cast<const uint4*>(src + i0 + half), hi);
#pragma unroll
  for (int q = 0; q < 2; ++q) {  // 16-byte loads of the table's fp32 rows
    const float4 cq = *reinterpret_cast<const float4*>(c_row + i0 + 4 * q);
    const float4 sq = *reinterpret_cast<const float4*>(s_row + i0 + 4 * q);
    c[4 * q] = cq.x, c[4 * q + 1] = cq.y, c[4 * q + 2] = cq.z, c[4 * q + 3] = cq.w;
    s[4 * q] = sq.x, s[4 * q + 1] = sq.y, s[4 * q + 2] = sq.z, s[4 * q + 3] = sq.w;
  }
  float new_lo[8], new_hi[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    new_lo[j] = fmaf(lo[j], c[j], -hi[j] * s[j]);
    new_hi[j] = fmaf(hi[j], c[j], lo[j] * s[j]);
  }
  *reinterpret_cast<uint4*>(dst + i0) = pack8(new_lo);
  *reinterpret_cast<uint4*>(dst + i0 + half) = pack8(new_hi);
}

// x: [tokens][heads][dim] (the query heads followed by the key heads of each token, as a fused QKV
// projection leaves them, with a row stride of `stride` elements), rotated in place.
__global__ void __launch_bounds__(kThreads)
    rotary(__nv_bfloat16* __restrict__ x, const int* __restrict__ positions, const float* __restrict__ cos_t,
           const float* __restrict__ sin_t, int heads, int dim, size_t stride) {
  const size_t token = blockIdx.x;
  const int half = dim / 2, groups = half / 8;  // groups of 8 pairs per head
  const float* c_row = cos_t + static_cast<size_t>(positions[token]) * half;
  const float* s_row = sin_t + static_cast<size_t>(positions[token]) * half;
  for (int item = threadIdx.x; item < heads * groups; item += kThreads) {
    const int head = item / groups, i0 = (item % groups) * 8;
    __nv_bfloat16* row = x + token * stride + static_cast<size_t>(head) * dim;
    rotate8(row, row, i0, half, c_row, s_row);
  }
}
// --8<-- [end:kernel]

}  // namespace rope
