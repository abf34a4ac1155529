// fused_add_rmsnorm.cuh: the residual add and the RMSNorm that follows it, fused into one pass: one block
// per token; hidden a multiple of 8, at most kMaxHidden. Included by fused_add_rmsnorm.cu (which checks and
// times it) and decode_step.cu (which runs it twice per layer). Taught in docs/serving/fused-small.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include "bf16_vectors.cuh"

namespace rmsnorm {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxVecs = 4;  // 16-byte vectors per thread: hidden up to 8192
constexpr int kMaxHidden = kThreads * kMaxVecs * 8;

// --8<-- [start:kernel]
__global__ void __launch_bounds__(kThreads)
    fused_add_rmsnorm(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ residual,
                      const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out, int hidden,
                      float eps) {
  const size_t row = blockIdx.x;
  const int vecs = hidden / 8;  // hidden is a multiple of 8: whole 16-byte vectors
  const uint4* x_row = reinterpret_cast<const uint4*>(x + row * hidden);
  uint4* res_row = reinterpret_cast<uint4*>(residual + row * hidden);

  // Add, round to bf16 (the stored residual), store it, and keep it in registers for the norm.
  float sum[kMaxVecs][8];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = threadIdx.x + i * kThreads;
    if (v >= vecs) break;
    float a[8], b[8];
    unpack8(x_row[v], a);
    unpack8(res_row[v], b);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum[i][j] = a[j] + b[j];
    const uint4 rounded = pack8(sum[i]);
    res_row[v] = rounded;
    unpack8(rounded, sum[i]);  // the norm sees the stored bf16 values
#pragma unroll
    for (int j = 0; j < 8; ++j) squares = fmaf(sum[i][j], sum[i][j], squares);
  }

  // The block's sum of squares: warps by shuffles, then the warps' sums through shared memory.
  __shared__ float warp_squares[kWarps];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  if (threadIdx.x % 32 == 0) warp_squares[threadIdx.x / 32] = squares;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += warp_squares[w];
  const float inv_rms = rsqrtf(total / hidden + eps);

  const uint4* w_vec = reinterpret_cast<const uint4*>(weight);
  uint4* out_row = reinterpret_cast<uint4*>(out + row * hidden);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = threadIdx.x + i * kThreads;
    if (v >= vecs) break;
    float w[8], y[8];
    unpack8(w_vec[v], w);
#pragma unroll
    for (int j = 0; j < 8; ++j) y[j] = sum[i][j] * inv_rms * w[j];
    out_row[v] = pack8(y);
  }
}
// --8<-- [end:kernel]

}  // namespace rmsnorm
