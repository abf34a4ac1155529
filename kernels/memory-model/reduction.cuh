// reduction.cuh: the sum of n floats, from one atomic per element to a bandwidth-bound kernel.
//
// Taught in docs/memory-model/reduction.md, and its barrier and shuffle parts in
// docs/memory-model/synchronisation.md. Included by reduction.cu (checks and times every version
// against cudaMemcpy and CUB) and loaded by versus_pytorch.py through CuPy (NVRTC), so it includes
// nothing. Versions:
//   1 reduce_atomic   every thread adds its element to the result with atomicAdd
//   2 reduce_shared   a block sums its elements as a tree in shared memory, then one atomicAdd
//                     (reduce_shared_racy: the same without the barrier, for racecheck)
//   3 reduce_warp     the tree's last five levels in registers with warp shuffles
//   4 reduce_vec4     a fixed grid of blocks strides over the array with float4 loads and writes
//                     one partial sum per block; reduce_partials adds those (no atomics: the
//                     result is the same on every run)
//   5 reduce_vec4_x4  version 4 with four independent float4 loads in flight per thread
//   6 reduce_chunks_x4, reduce_chunks_x8  each block sums one contiguous chunk of the array (as
//                     CUB does) with 4 or 8 float4 loads in flight per thread
//   7 reduce_chunks_x4_fused  version 6 in one launch: the last block to finish adds the partials
//
// course: header
#pragma once

constexpr int kReduceThreads = 256;  // block size of versions 1 to 3
constexpr int kGridThreads = 512;    // block size of versions 4 and 5 and of reduce_partials

// --8<-- [start:atomic]
extern "C" __global__ void reduce_atomic(const float* __restrict__ in, float* out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, in[i]);  // n atomics on one address: they execute one after another
}
// --8<-- [end:atomic]

// --8<-- [start:shared]
// One element per thread, then log2(256) = 8 halving steps. In step s, thread t < s adds
// partial[t + s], which thread t + s wrote in the step before: the barrier at the end of each step
// is what makes that write visible. kPlantRace leaves it out (reduction.cu --plant-race).
template <bool kPlantRace>
__device__ void reduce_shared_body(const float* __restrict__ in, float* out, long long n) {
  __shared__ float partial[kReduceThreads];
  const int t = threadIdx.x;
  const long long i = (long long)blockIdx.x * kReduceThreads + t;
  partial[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    if (!kPlantRace) __syncthreads();
  }
  if (t == 0) atomicAdd(out, partial[0]);
}

extern "C" __global__ void reduce_shared(const float* __restrict__ in, float* out, long long n) {
  reduce_shared_body<false>(in, out, n);
}
extern "C" __global__ void reduce_shared_racy(const float* __restrict__ in, float* out, long long n) {
  reduce_shared_body<true>(in, out, n);
}
// --8<-- [end:shared]

// --8<-- [start:shuffle]
// After the loop every lane holds the sum of all 32 lanes' values. __shfl_xor_sync(mask, v, o)
// returns v from lane (lane XOR o); the mask names the lanes taking part (here all 32), and the
// exchange itself synchronises them, so no barrier and no shared memory are needed.
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block; the result is valid in thread 0. Needs blockDim.x to be a multiple of 32.
__device__ inline float block_sum(float v) {
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // all warp sums written before warp 0 reads them
  if (warp == 0) v = warp_sum(lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f);
  return v;
}
// --8<-- [end:shuffle]

// --8<-- [start:warp]
extern "C" __global__ void reduce_warp(const float* __restrict__ in, float* out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const float v = block_sum(i < n ? in[i] : 0.0f);
  if (threadIdx.x == 0) atomicAdd(out, v);
}
// --8<-- [end:warp]

// --8<-- [start:vec4]
// A grid of a few blocks per SM strides over the whole array, 16 bytes per load. Each thread sums
// many elements in a register before the block reduces once, so the reduction's cost is spread
// over thousands of loads instead of one.
extern "C" __global__ void reduce_vec4(const float* __restrict__ in, float* __restrict__ partials, long long n) {
  const long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* in4 = reinterpret_cast<const float4*>(in);  // cudaMalloc memory is 256-byte aligned
  float v = 0.0f;
  for (long long i = first; i < n4; i += stride) {
    const float4 q = in4[i];
    v += (q.x + q.y) + (q.z + q.w);
  }
  for (long long i = 4 * n4 + first; i < n; i += stride) v += in[i];  // the n % 4 leftovers
  v = block_sum(v);
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

// One block adds the per-block partial sums: a second, tiny launch instead of atomics.
extern "C" __global__ void reduce_partials(const float* __restrict__ partials, float* out, int count) {
  float v = 0.0f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) v += partials[i];
  v = block_sum(v);
  if (threadIdx.x == 0) *out = v;
}
// --8<-- [end:vec4]

// --8<-- [start:vec4_x4]
// Four independent loads per iteration: the thread issues all four before it needs the first,
// so four times as many bytes are in flight per thread while it waits for memory.
extern "C" __global__ void reduce_vec4_x4(const float* __restrict__ in, float* __restrict__ partials, long long n) {
  const long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float v0 = 0.0f, v1 = 0.0f, v2 = 0.0f, v3 = 0.0f;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n4; i += 4 * stride) {
    const float4 a = in4[i], b = in4[i + stride], c = in4[i + 2 * stride], d = in4[i + 3 * stride];
    v0 += (a.x + a.y) + (a.z + a.w);
    v1 += (b.x + b.y) + (b.z + b.w);
    v2 += (c.x + c.y) + (c.z + c.w);
    v3 += (d.x + d.y) + (d.z + d.w);
  }
  for (; i < n4; i += stride) {
    const float4 a = in4[i];
    v0 += (a.x + a.y) + (a.z + a.w);
  }
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long j = 4 * n4 + first; j < n; j += stride) v0 += in[j];
  const float v = block_sum((v0 + v1) + (v2 + v3));
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}
// --8<-- [end:vec4_x4]

// --8<-- [start:chunks]
// Block b sums float4s [begin, end), one contiguous chunk, instead of striding over the whole array:
// a block's loads stay close together in memory (DRAM serves neighbouring addresses best), and each
// thread keeps kUnroll loads in flight. The chunk length is a multiple of the block size so that
// every warp's loads start on a 512-byte boundary.
template <int kUnroll>
__device__ inline void reduce_chunks_body(const float* __restrict__ in, float* __restrict__ partials, long long n) {
  const long long n4 = n / 4, threads = blockDim.x;
  const long long per_block = (n4 + gridDim.x - 1) / gridDim.x;
  const long long chunk = (per_block + threads - 1) / threads * threads;
  const long long begin = blockIdx.x * chunk;
  const long long end = begin + chunk < n4 ? begin + chunk : n4;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) v[u] = 0.0f;
  long long i = begin + threadIdx.x;
  for (; i + (kUnroll - 1) * threads < end; i += kUnroll * threads) {
    float4 q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) q[u] = in4[i + u * threads];  // all loads issued first
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] += (q[u].x + q[u].y) + (q[u].z + q[u].w);
  }
  for (; i < end; i += threads) {
    const float4 q = in4[i];
    v[0] += (q.x + q.y) + (q.z + q.w);
  }
  const long long first = (long long)blockIdx.x * threads + threadIdx.x;
  for (long long j = 4 * n4 + first; j < n; j += (long long)gridDim.x * threads) v[0] += in[j];  // n % 4 leftovers
  float total = 0.0f;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) total += v[u];
  total = block_sum(total);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

extern "C" __global__ void reduce_chunks_x4(const float* __restrict__ in, float* __restrict__ partials, long long n) {
  reduce_chunks_body<4>(in, partials, n);
}
extern "C" __global__ void reduce_chunks_x8(const float* __restrict__ in, float* __restrict__ partials, long long n) {
  reduce_chunks_body<8>(in, partials, n);
}
// --8<-- [end:chunks]

// --8<-- [start:fused]
// One launch instead of two: every block writes its partial, then counts itself done; the block
// that finds it was the last adds all the partials, in block order (so the result is still the same
// on every run), and resets the counter for the next launch. __threadfence() makes a block's partial
// visible to every other block before the count that announces it.
extern "C" __global__ void reduce_chunks_x4_fused(const float* __restrict__ in, float* partials,
                                                  unsigned int* blocks_done, float* out, long long n) {
  reduce_chunks_body<4>(in, partials, n);  // thread 0 has written partials[blockIdx.x]
  __shared__ bool is_last;
  if (threadIdx.x == 0) {
    __threadfence();
    is_last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  float v = 0.0f;
  for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x)
    v += __ldcg(&partials[i]);  // from L2, not a stale L1
  v = block_sum(v);
  if (threadIdx.x == 0) {
    *out = v;
    *blocks_done = 0;
  }
}
// --8<-- [end:fused]
