// transpose.cuh: the transpose kernels, from naive to conflict-free, in one include file.
//
// Taught in docs/memory-model/transpose.md. Included by transpose.cu (checks and times them against
// cudaMemcpy) and loaded by versus_pytorch.py through CuPy (NVRTC), so this file includes nothing
// and uses only what NVRTC knows. Every kernel reads `in`, a rows x cols row-major matrix, and writes
// `out`, its cols x rows transpose. Versions:
//   1 transpose_naive        one element per thread: reads coalesced, writes 32 rows apart
//   2 transpose_tiled        a 32x32 tile through shared memory: both sides coalesced, but the
//                            column reads from the tile hit one bank 32 times (a 32-way conflict)
//   3 transpose_padded       the same tile with one extra column: conflict-free
//   4 transpose_swizzled     the same tile, columns permuted by XOR instead of padded: conflict-free
//   5 transpose_padded_vec4  version 3 with 16-byte global loads and stores (needs rows and cols
//                            that are multiples of 4), one per thread with 256 threads
//   6 transpose_padded_vec4_x4  the same with 64 threads, four float4s per thread
//   7 transpose_tile64_vec4  a 64x64 tile, 256 threads, four float4s per thread: each output row
//                            gets 256 contiguous bytes per tile instead of 128
//
// course: header
#pragma once

// --8<-- [start:naive]
// Block: 32 x 8 threads. Consecutive threads (threadIdx.x) read consecutive floats of one input
// row, so the read of a warp is one 128-byte line; but they write one float into each of 32
// different output rows, 4 * rows bytes apart: 32 separate memory transactions per warp.
constexpr int kTile = 32;      // a tile is kTile x kTile elements
constexpr int kBlockRows = 8;  // a block is kTile x kBlockRows threads; each moves kTile / kBlockRows elements

extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows,
                                           int cols) {
  const int c = blockIdx.x * kTile + threadIdx.x;
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    const int r = blockIdx.y * kTile + j;
    if (r < rows && c < cols) out[(long long)c * rows + r] = in[(long long)r * cols + c];
  }
}
// --8<-- [end:naive]

// --8<-- [start:tiled]
// Each block moves one 32x32 tile. Phase 1: read the tile row by row (coalesced) into shared
// memory. Barrier. Phase 2: write it out row by row (coalesced), reading the tile by columns.
extern "C" __global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int rows,
                                           int cols) {
  __shared__ float tile[kTile][kTile];
  const int x = threadIdx.x, r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    if (r0 + j < rows && c0 + x < cols) tile[j][x] = in[(long long)(r0 + j) * cols + c0 + x];
  }
  __syncthreads();  // every element of the tile is written before any thread reads it
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    // Output row c0 + j is input column c0 + j; lane x writes output column r0 + x.
    if (c0 + j < cols && r0 + x < rows) out[(long long)(c0 + j) * rows + r0 + x] = tile[x][j];
  }
}
// --8<-- [end:tiled]

// --8<-- [start:padded]
// One unused column shifts each tile row by one bank: tile[x][j] for x = 0..31 now lies in banks
// (33 * x + j) mod 32 = (x + j) mod 32, all different.
extern "C" __global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out, int rows,
                                            int cols) {
  __shared__ float tile[kTile][kTile + 1];
  const int x = threadIdx.x, r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    if (r0 + j < rows && c0 + x < cols) tile[j][x] = in[(long long)(r0 + j) * cols + c0 + x];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    if (c0 + j < cols && r0 + x < rows) out[(long long)(c0 + j) * rows + r0 + x] = tile[x][j];
  }
}
// --8<-- [end:padded]

// --8<-- [start:swizzled]
// No padding: element (row j, column x) of the tile is stored in column x ^ j of row j. A warp
// that reads column j of the tile (rows x = 0..31) reads tile[x][j ^ x]: banks j ^ x, all different.
extern "C" __global__ void transpose_swizzled(const float* __restrict__ in, float* __restrict__ out, int rows,
                                              int cols) {
  __shared__ float tile[kTile][kTile];
  const int x = threadIdx.x, r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    if (r0 + j < rows && c0 + x < cols) tile[j][x ^ j] = in[(long long)(r0 + j) * cols + c0 + x];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kBlockRows) {
    if (c0 + j < cols && r0 + x < rows) out[(long long)(c0 + j) * rows + r0 + x] = tile[x][j ^ x];
  }
}
// --8<-- [end:swizzled]

// --8<-- [start:vec4]
// kThreads threads move a 32x32 tile with 16-byte global loads and stores: 8 float4s per tile row,
// so thread t handles rows t / 8, t / 8 + kThreads / 8, ... and floats 4 * (t % 8) .. + 3 of each.
// Needs rows % 4 == 0 and cols % 4 == 0 (every float4 is 16-byte aligned and wholly inside or
// outside the matrix); the launcher checks. Banks, rows padded to 33 floats: a warp's scalar stores
// tile[t / 8][4 * (t % 8) + k] hit banks (t / 8 + 4 * (t % 8) + k) mod 32, all different for the
// 32 lanes of a warp; so do the reads below.
// One aligned float4 of the input into four floats of a tile row (a padded row is not 16-byte aligned:
// four scalar stores), and four floats of a tile column (rows r..r+3) out as one aligned float4.
__device__ __forceinline__ void float4_to_row(const float* src, float* row) {
  const float4 v = *reinterpret_cast<const float4*>(src);
  row[0] = v.x;
  row[1] = v.y;
  row[2] = v.z;
  row[3] = v.w;
}
template <int kWidth>
__device__ __forceinline__ void column_to_float4(const float (*tile)[kWidth], int r, int c, float* dst) {
  *reinterpret_cast<float4*>(dst) = make_float4(tile[r + 0][c], tile[r + 1][c], tile[r + 2][c], tile[r + 3][c]);
}

template <int kThreads>
__device__ inline void transpose_vec4_body(const float* __restrict__ in, float* __restrict__ out, int rows,
                                           int cols) {
  __shared__ float tile[kTile][kTile + 1];
  const int c4 = 4 * (threadIdx.x % 8);
  const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
#pragma unroll
  for (int r = threadIdx.x / 8; r < kTile; r += kThreads / 8) {  // all loads first: more bytes in flight
    if (r0 + r < rows && c0 + c4 < cols) float4_to_row(in + (long long)(r0 + r) * cols + c0 + c4, &tile[r][c4]);
  }
  __syncthreads();
  // Output row c0 + r is input column c0 + r; its floats r0 + c4 .. + 3 come from four input rows.
#pragma unroll
  for (int r = threadIdx.x / 8; r < kTile; r += kThreads / 8) {
    if (c0 + r < cols && r0 + c4 < rows) column_to_float4(tile, c4, r, out + (long long)(c0 + r) * rows + r0 + c4);
  }
}

// Version 5: 256 threads, one float4 each way per thread.
extern "C" __global__ void transpose_padded_vec4(const float* __restrict__ in, float* __restrict__ out, int rows,
                                                 int cols) {
  transpose_vec4_body<256>(in, out, rows, cols);
}
// Version 6: 64 threads, four float4s each way per thread (four loads in flight before the first
// is needed).
extern "C" __global__ void transpose_padded_vec4_x4(const float* __restrict__ in, float* __restrict__ out,
                                                    int rows, int cols) {
  transpose_vec4_body<64>(in, out, rows, cols);
}
// --8<-- [end:vec4]

// --8<-- [start:tile64]
// A 64x64 tile (rows padded to 65 floats), 256 threads, four float4s each way per thread. The
// 1024 float4s of the tile are numbered L = it * 256 + threadIdx.x; warp L / 32 takes 4 tile rows
// (4 * g + lane / 8) and 8 consecutive float4s of them (8 * h + lane % 8), so each warp reads four
// full 128-byte segments and its scalar shared-memory stores hit banks
// (row + 4 * (lane % 8) + k) mod 32: all different. The write-out uses the same numbering.
constexpr int kTile64 = 64;

extern "C" __global__ void __launch_bounds__(256) transpose_tile64_vec4(const float* __restrict__ in,
                                                                       float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile64][kTile64 + 1];
  const int lane = threadIdx.x % 32;
  const int r0 = blockIdx.y * kTile64, c0 = blockIdx.x * kTile64;
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int w = (it * 256 + threadIdx.x) / 32, r = 4 * (w / 2) + lane / 8, c4 = 4 * (8 * (w % 2) + lane % 8);
    if (r0 + r < rows && c0 + c4 < cols) float4_to_row(in + (long long)(r0 + r) * cols + c0 + c4, &tile[r][c4]);
  }
  __syncthreads();
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int w = (it * 256 + threadIdx.x) / 32, oc = 4 * (w / 2) + lane / 8, r4 = 4 * (8 * (w % 2) + lane % 8);
    if (c0 + oc < cols && r0 + r4 < rows) column_to_float4(tile, r4, oc, out + (long long)(c0 + oc) * rows + r0 + r4);
  }
}
// --8<-- [end:tile64]
