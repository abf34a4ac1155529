// softmax.cuh: row-wise softmax of a rows x cols float matrix, y[r][c] = exp(x[r][c] - m_r) / d_r
// with m_r the row's maximum and d_r = sum_c exp(x[r][c] - m_r).
//
// Taught in docs/memory-model/softmax.md. Included by softmax.cu (checks and times every version
// against a float64 CPU reference and cudaMemcpy) and loaded by versus_pytorch.py through CuPy
// (NVRTC), so it includes nothing. Versions:
//   1 softmax_naive        one thread per row, three passes over the row (max, sum, write)
//   2 softmax_online       one thread per row, two passes: max and sum together ("online softmax")
//   3 softmax_warp         one warp per row: lanes stride over the row, shuffles combine them
//   4 softmax_block        one block per row, same two passes, block-wide combine
//   5 softmax_block_regs_* one block per row, the row held in registers: read once, written once
//                          (_256x32: 256 threads x 32 floats; _v4_256x8 and _v4_512x4: 256 x 8 or
//                          512 x 4 float4s, need cols % 4 == 0; all need cols <= 8192)
// Every version follows the same conventions: a masked score is -inf and contributes 0; a fully
// masked row (every element -inf) gives all zeros (as FlashAttention does; torch.softmax gives NaN);
// a NaN anywhere in a row makes the whole row's output NaN.
//
// course: header
#pragma once

#define SOFTMAX_NEG_INF __int_as_float(0xff800000)  // -infinity, without <cmath>

// --8<-- [start:rules]
// The -inf rule. Masked scores are -inf, and exp(x - m) with x = m = -inf is exp(-inf + inf) =
// exp(NaN) = NaN, not the 0 that a masked element must contribute. A maximum (running or final) of
// -inf means "every element seen so far is -inf": use 0 as the base instead, so that every
// exp(-inf - 0) is 0 and the sum stays 0.
__device__ inline float softmax_base(float m) { return m == SOFTMAX_NEG_INF ? 0.0f : m; }

// 1 / d, except for a fully masked row (every element -inf, so d == 0), whose output the course
// defines as zeros, as FlashAttention does. d >= 1 otherwise: the maximum contributes exp(0). A NaN
// in the row makes d NaN, and NaN * anything is NaN: the whole row's output is NaN.
__device__ inline float softmax_inv_sum(float d) { return d == 0.0f ? 0.0f : 1.0f / d; }
// --8<-- [end:rules]

// --8<-- [start:naive]
extern "C" __global__ void softmax_naive(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* in = x + (long long)r * cols;
  float* out = y + (long long)r * cols;
  float m = SOFTMAX_NEG_INF;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);  // pass 1: the maximum (for stability)
  const float base = softmax_base(m);
  float d = 0.0f;
  for (int c = 0; c < cols; ++c) d += expf(in[c] - base);  // pass 2: the denominator
  const float inv = softmax_inv_sum(d);
  for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - base) * inv;  // pass 3: the output
}
// --8<-- [end:naive]

// --8<-- [start:online]
// Keep a running maximum m and a running sum d of exp(x - m). When a larger x arrives, every term
// already in d was scaled by exp(-m_old) and must be by exp(-m_new): multiply d by exp(m_old - m_new).
// While every x so far is -inf, m_new is -inf: the base 0 keeps d at 0 instead of NaN.
__device__ inline void online_update(float& m, float& d, float x) {
  const float m_new = fmaxf(m, x);  // fmaxf ignores a NaN x, but exp(NaN - base) makes d NaN below
  const float base = softmax_base(m_new);
  d = d * expf(m - base) + expf(x - base);
  m = m_new;
}

extern "C" __global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* in = x + (long long)r * cols;
  float* out = y + (long long)r * cols;
  float m = SOFTMAX_NEG_INF, d = 0.0f;
  for (int c = 0; c < cols; ++c) online_update(m, d, in[c]);  // pass 1: max and sum together
  const float base = softmax_base(m), inv = softmax_inv_sum(d);
  for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - base) * inv;  // pass 2: the output
}
// --8<-- [end:online]

// --8<-- [start:warp]
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float warp_add(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The merge rule: partial results (m_k, d_k) over disjoint parts of a row combine at the row's
// maximum M as d = sum_k d_k * exp(m_k - M). A part that saw only -inf (or no column at all) has
// m_k = -inf and d_k = 0, and must contribute 0: with the base softmax_base(M) it does, even when M
// itself is -inf (exp(-inf - 0) = 0, where exp(-inf - (-inf)) would be NaN).
__device__ inline float rescaled_sum(float m, float d, float row_base) { return d * expf(m - row_base); }

// Each lane keeps (m, d) over columns lane, lane + 32, ... (coalesced: a warp reads 128 bytes at a
// time). To combine, take the warp's maximum, rescale each lane's d to it and add them up.
extern "C" __global__ void softmax_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // a whole warp leaves together, so the shuffles below see all 32 lanes
  const float* in = x + (long long)r * cols;
  float* out = y + (long long)r * cols;
  float m = SOFTMAX_NEG_INF, d = 0.0f;
  for (int c = lane; c < cols; c += 32) online_update(m, d, in[c]);
  const float base = softmax_base(warp_max(m));
  const float inv = softmax_inv_sum(warp_add(rescaled_sum(m, d, base)));
  for (int c = lane; c < cols; c += 32) out[c] = expf(in[c] - base) * inv;
}
// --8<-- [end:warp]

// --8<-- [start:block]
// Block-wide all-reduce: every thread gets the max (kMax) or sum of v over the block. `scratch`
// is 32 floats of shared memory. The second barrier lets the caller reuse scratch right away.
template <bool kMax>
__device__ inline float block_allreduce(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = kMax ? warp_max(v) : warp_add(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (kMax ? SOFTMAX_NEG_INF : 0.0f);
  v = kMax ? warp_max(v) : warp_add(v);  // every warp reduces the warp results: all threads get it
  __syncthreads();
  return v;
}

extern "C" __global__ void softmax_block(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float scratch[32];
  const float* in = x + (long long)blockIdx.x * cols;
  float* out = y + (long long)blockIdx.x * cols;
  float m = SOFTMAX_NEG_INF, d = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) online_update(m, d, in[c]);
  const float base = softmax_base(block_allreduce<true>(m, scratch));
  const float inv = softmax_inv_sum(block_allreduce<false>(rescaled_sum(m, d, base), scratch));
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - base) * inv;
  (void)rows;  // one block per row: the grid has exactly `rows` blocks
}
// --8<-- [end:block]

// --8<-- [start:regs]
// The whole row in registers: thread t holds columns t, t + kThreads, ... (kPerThread of them).
// The row is read from memory once and written once, the minimum. kPerThread must be a
// compile-time constant so that v[] can live in registers (a runtime index would put it in local
// memory); the launcher uses this kernel only when cols <= kThreads * kPerThread.
template <int kThreads, int kPerThread>
__device__ inline void softmax_regs_body(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[32];
  const float* in = x + (long long)blockIdx.x * cols;
  float* out = y + (long long)blockIdx.x * cols;
  float v[kPerThread];
  float m = SOFTMAX_NEG_INF;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int c = k * kThreads + threadIdx.x;
    v[k] = c < cols ? in[c] : SOFTMAX_NEG_INF;
    m = fmaxf(m, v[k]);
  }
  const float base = softmax_base(block_allreduce<true>(m, scratch));
  float d = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    v[k] = expf(v[k] - base);  // exp(-inf - base) = 0 for masked elements and the padding
    d += v[k];
  }
  const float inv = softmax_inv_sum(block_allreduce<false>(d, scratch));
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int c = k * kThreads + threadIdx.x;
    if (c < cols) out[c] = v[k] * inv;
  }
}

extern "C" __global__ void __launch_bounds__(256) softmax_block_regs_256x32(const float* __restrict__ x,
                                                                            float* __restrict__ y, int cols) {
  softmax_regs_body<256, 32>(x, y, cols);
}
// --8<-- [end:regs]

// --8<-- [start:regs_vec4]
// The same with 16-byte loads and stores: thread t holds float4 number t, t + kThreads, ...
template <int kThreads, int kVecPerThread>
__device__ inline void softmax_regs_vec4_body(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[32];
  const int cols4 = cols / 4;  // the launcher guarantees cols % 4 == 0
  const float4* in = reinterpret_cast<const float4*>(x + (long long)blockIdx.x * cols);
  float4* out = reinterpret_cast<float4*>(y + (long long)blockIdx.x * cols);
  float4 v[kVecPerThread];
  float m = SOFTMAX_NEG_INF;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int c = k * kThreads + threadIdx.x;
    const float ninf = SOFTMAX_NEG_INF;
    v[k] = c < cols4 ? in[c] : make_float4(ninf, ninf, ninf, ninf);
    m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
  }
  const float base = softmax_base(block_allreduce<true>(m, scratch));
  float d = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    v[k] = make_float4(expf(v[k].x - base), expf(v[k].y - base), expf(v[k].z - base), expf(v[k].w - base));
    d += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float inv = softmax_inv_sum(block_allreduce<false>(d, scratch));
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int c = k * kThreads + threadIdx.x;
    if (c < cols4) out[c] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
  }
}

extern "C" __global__ void __launch_bounds__(256) softmax_block_regs_v4_256x8(const float* __restrict__ x,
                                                                              float* __restrict__ y, int cols) {
  softmax_regs_vec4_body<256, 8>(x, y, cols);
}
extern "C" __global__ void __launch_bounds__(512) softmax_block_regs_v4_512x4(const float* __restrict__ x,
                                                                              float* __restrict__ y, int cols) {
  softmax_regs_vec4_body<512, 4>(x, y, cols);
}
// --8<-- [end:regs_vec4]
