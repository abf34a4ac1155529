// decode_step_kernels.cuh: the small kernels of a whole decode step (decode_step.cu) that the chapter's
// other programs define beside their own main(): the residual add and RMSNorm fused (as
// fused_add_rmsnorm.cu), the rotary embedding of one new token per sequence, written with the new K and V
// into the cache (as rotary.cu, plus the append), and SiLU-and-multiply (as silu_mul.cu). A .cu file with
// a main() cannot be included, so until those kernels move into shared headers the step keeps its own
// definitions here; the arithmetic and the roundings are the same. Taught in docs/serving/decode-step.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include "bf16_vectors.cuh"

namespace step {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxVecs = 4;  // 16-byte vectors per thread in the norm: hidden up to 8192
constexpr int kMaxHidden = kThreads * kMaxVecs * 8;

// The token's embedding row copied into the residual stream, 16 bytes per thread.
__global__ void __launch_bounds__(kThreads)
    embed_rows(const int* __restrict__ tokens, const __nv_bfloat16* __restrict__ embed,
               __nv_bfloat16* __restrict__ residual, int hidden) {
  const size_t row = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(embed + static_cast<size_t>(tokens[row]) * hidden);
  uint4* dst = reinterpret_cast<uint4*>(residual + row * hidden);
  for (int v = threadIdx.x; v < hidden / 8; v += kThreads) dst[v] = src[v];
}

// --8<-- [start:norm]
// residual <- bf16(residual + delta); out <- bf16(residual * rsqrt(mean(residual^2) + eps) * weight).
// One block per sequence, as fused_add_rmsnorm.cu.
__global__ void __launch_bounds__(kThreads)
    add_rmsnorm(const __nv_bfloat16* __restrict__ delta, __nv_bfloat16* __restrict__ residual,
                const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out, int hidden, float eps,
                int skip_add) {
  const size_t row = blockIdx.x;
  const int vecs = hidden / 8;
  const uint4* d_row = reinterpret_cast<const uint4*>(delta + row * hidden);
  uint4* res_row = reinterpret_cast<uint4*>(residual + row * hidden);
  float sum[kMaxVecs][8];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = threadIdx.x + i * kThreads;
    if (v >= vecs) break;
    float a[8], b[8];
    unpack8(d_row[v], a);
    unpack8(res_row[v], b);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum[i][j] = skip_add ? b[j] : a[j] + b[j];  // skip_add: the planted fault
    const uint4 rounded = pack8(sum[i]);
    res_row[v] = rounded;
    unpack8(rounded, sum[i]);
#pragma unroll
    for (int j = 0; j < 8; ++j) squares = fmaf(sum[i][j], sum[i][j], squares);
  }
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
// --8<-- [end:norm]

// --8<-- [start:rope_append]
// One block per sequence. qkv holds the projection's row [q heads | k heads | v heads]. The query heads
// are rotated into q (contiguous [heads][dim], as the attention kernel reads them); the new key, rotated,
// and the new value are written into the cache at slot positions[b] (layout [batch][kv_heads][capacity]
// [dim]). cos_t and sin_t hold dim / 2 fp32 values per position, the rotate-half form of rotary.cu.
__global__ void __launch_bounds__(kThreads)
    rope_append(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ positions,
                const float* __restrict__ cos_t, const float* __restrict__ sin_t, __nv_bfloat16* __restrict__ q,
                __nv_bfloat16* __restrict__ k_cache, __nv_bfloat16* __restrict__ v_cache, int heads, int kv_heads,
                int dim, int capacity) {
  const int b = blockIdx.x, pos = positions[b];
  const int half = dim / 2, groups = half / 8;
  const __nv_bfloat16* row = qkv + static_cast<size_t>(b) * (heads + 2 * kv_heads) * dim;
  const float* c_row = cos_t + static_cast<size_t>(pos) * half;
  const float* s_row = sin_t + static_cast<size_t>(pos) * half;
  const int rotated = (heads + kv_heads) * groups;
  for (int item = threadIdx.x; item < rotated + kv_heads * (dim / 8); item += kThreads) {
    if (item >= rotated) {  // a 16-byte piece of the new value: copied into the cache
      const int v = item - rotated, head = v / (dim / 8), piece = v % (dim / 8);
      const size_t slot = (static_cast<size_t>(b) * kv_heads + head) * capacity + pos;
      reinterpret_cast<uint4*>(v_cache + slot * dim)[piece] =
          reinterpret_cast<const uint4*>(row + static_cast<size_t>(heads + kv_heads + head) * dim)[piece];
      continue;
    }
    const int head = item / groups, i0 = (item % groups) * 8;  // head < heads: a query head, else a key head
    const __nv_bfloat16* src = row + static_cast<size_t>(head) * dim;
    __nv_bfloat16* dst = head < heads
        ? q + (static_cast<size_t>(b) * heads + head) * dim
        : k_cache + ((static_cast<size_t>(b) * kv_heads + (head - heads)) * capacity + pos) * dim;
    float lo[8], hi[8], new_lo[8], new_hi[8];
    unpack8(*reinterpret_cast<const uint4*>(src + i0), lo);
    unpack8(*reinterpret_cast<const uint4*>(src + i0 + half), hi);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      new_lo[j] = fmaf(lo[j], c_row[i0 + j], -hi[j] * s_row[i0 + j]);
      new_hi[j] = fmaf(hi[j], c_row[i0 + j], lo[j] * s_row[i0 + j]);
    }
    *reinterpret_cast<uint4*>(dst + i0) = pack8(new_lo);
    *reinterpret_cast<uint4*>(dst + i0 + half) = pack8(new_hi);
  }
}
// --8<-- [end:rope_append]

// out[b][i] = bf16(silu(gate[b][i]) * up[b][i]) in fp32, gate and up the two halves of the row, as
// silu_mul.cu; 8 values per thread.
__global__ void __launch_bounds__(kThreads)
    silu_mul(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out, int inter) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= inter / 8) return;
  const size_t row = blockIdx.y;
  const __nv_bfloat16* gate = in + row * 2 * inter;
  float g[8], u[8], y[8];
  unpack8(reinterpret_cast<const uint4*>(gate)[i], g);
  unpack8(reinterpret_cast<const uint4*>(gate + inter)[i], u);
#pragma unroll
  for (int j = 0; j < 8; ++j) y[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
  reinterpret_cast<uint4*>(out + row * inter)[i] = pack8(y);
}

}  // namespace step
