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
//                          (_256x32: 256 threads x 32 floats; _v4_256x8: 256 threads x 8 float4s,
//                          needs cols % 4 == 0; both need cols <= 8192)
//
// course: header
#pragma once

#define SOFTMAX_NEG_INF __int_as_float(0xff800000)  // -infinity, without <cmath>

// --8<-- [start:naive]
extern "C" __global__ void softmax_naive(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* in = x + (long long)r * cols;
  float* out = y + (long long)r * cols;
  float m = SOFTMAX_NEG_INF;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);  // pass 1: the maximum (for stability)
  float d = 0.0f;
  for (int c = 0; c < cols; ++c) d += expf(in[c] - m);  // pass 2: the denominator
  const float inv = 1.0f / d;
  for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) * inv;  // pass 3: the output
}
// --8<-- [end:naive]

// --8<-- [start:online]
// Keep a running maximum m and a running sum d of exp(x - m). When a larger x arrives, every term
// already in d was scaled by exp(-m_old) and must be by exp(-m_new): multiply d by exp(m_old - m_new).
__device__ inline void online_update(float& m, float& d, float x) {
  const float m_new = fmaxf(m, x);
  d = d * expf(m - m_new) + expf(x - m_new);  // with m = -inf at the start, d * 0 + exp(0)
  m = m_new;
}

extern "C" __global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* in = x + (long long)r * cols;
  float* out = y + (long long)r * cols;
  float m = SOFTMAX_NEG_INF, d = 0.0f;
  for (int c = 0; c < cols; ++c) online_update(m, d, in[c]);  // pass 1: max and sum together
  const float inv = 1.0f / d;
  for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) * inv;  // pass 2: the output
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

// Each lane keeps (m, d) over columns lane, lane + 32, ... (coalesced: a warp reads 128 bytes at a
// time). To combine, take the warp's maximum M, rescale each lane's d by exp(m - M) and add them up.
// A lane that saw no column has m = -inf and d = 0, and contributes 0.
extern "C" __global__ void softmax_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // a whole warp leaves together, so the shuffles below see all 32 lanes
  const float* in = x + (long long)r * cols;
  float* out = y + (long long)r * cols;
  float m = SOFTMAX_NEG_INF, d = 0.0f;
  for (int c = lane; c < cols; c += 32) online_update(m, d, in[c]);
  const float row_max = warp_max(m);
  const float row_sum = warp_add(d == 0.0f ? 0.0f : d * expf(m - row_max));
  const float inv = 1.0f / row_sum;
  for (int c = lane; c < cols; c += 32) out[c] = expf(in[c] - row_max) * inv;
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
  const float row_max = block_allreduce<true>(m, scratch);
  const float row_sum = block_allreduce<false>(d == 0.0f ? 0.0f : d * expf(m - row_max), scratch);
  const float inv = 1.0f / row_sum;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - row_max) * inv;
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
  const float row_max = block_allreduce<true>(m, scratch);
  float d = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    v[k] = expf(v[k] - row_max);  // exp(-inf) = 0 for the padding
    d += v[k];
  }
  const float inv = 1.0f / block_allreduce<false>(d, scratch);
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
  const float row_max = block_allreduce<true>(m, scratch);
  float d = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    v[k] = make_float4(expf(v[k].x - row_max), expf(v[k].y - row_max), expf(v[k].z - row_max),
                       expf(v[k].w - row_max));
    d += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float inv = 1.0f / block_allreduce<false>(d, scratch);
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
