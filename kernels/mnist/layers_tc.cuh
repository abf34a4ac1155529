// layers_tc.cuh: version 4 of the MNIST CNN: the matrix products on the tensor cores, in bf16 with
// fp32 accumulation (mma.sync.m16n8k16, compute capability 8.0 or newer).
//
// Taught in docs/mnist/tensor-cores.md. conv2's three products (forward with batch-norm statistics
// in its epilogue, input gradient, weight gradient) stage whole images and the weights in shared
// memory and read their mma fragments with ldmatrix (conv3x3_tc, conv3x3_wgrad_tc): the im2col
// matrix is never formed. fc1's three products share one GEMM kernel, gemm_bf16, with a small
// "operand" struct each (LinFwd, LinDgrad, LinWgrad) that says where the operands come from and where
// the result goes; the fp32 -> bf16 rounding of the activations happens as they are staged. The
// weights come from a bf16 copy of the fp32 master weights that the SGD kernel writes
// (sgd_update_bf16), once per step. Around the GEMMs: fc2, softmax, the loss, fc2's backward and
// fc1's bias, ReLU, ReLU mask and bias gradient in one kernel (fc2_loss_and_backward); those fp32
// kernels live in layers_tc_around.cuh, which this file includes. conv1 (one
// input channel: K = 9) stays on the CUDA cores in a kernel of its own (conv3x3_c1), as do batch
// norm, ReLU and pooling (layers_fused.cuh).
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "../common/check.cuh"
#include "../common/mma.cuh"
#include "layers_fused.cuh"
#include "layers_tc_around.cuh"

namespace mnist {
namespace tc {

constexpr int kBK = 32, kThreads = 256, kPad = 8;  // k-tile; 8 warps; row padding (bf16) against bank conflicts

__device__ inline uint32_t ld_pair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// --8<-- [start:gemm]
// C[M][N] = sum over k of A(m, k) B(k, n), A and B rounded to bf16, sums in fp32. Op supplies
// op.a(m, k), op.b(k, n) (fp32 values, read from wherever the layer keeps them) and op.store(m, n, v),
// and says which index is contiguous in memory (kAKFast, kBKFast), so that consecutive threads load
// consecutive addresses. Shared memory holds the tile as As[m][k] and Bs[n][k] (k contiguous), the
// layout the mma fragments read with one 32-bit load per register.
// Grid: x = column tiles, y = row tiles, z = slices of k of length k_split (split-K; Op::store then
// writes the slice's part, blockIdx.z, and reduce_parts adds the parts).
template <int BM, int BN, int WARPS_M, int WARPS_N, class Op>
__global__ void __launch_bounds__(kThreads, 2) gemm_bf16(const Op op, int M, int N, int K, int k_split) {
  static_assert(WARPS_M * WARPS_N * 32 == kThreads, "8 warps");
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N, MF = WTM / 16, NF = WTN / 8, LD = kBK + kPad;
  static_assert(MF * 16 == WTM && NF * 8 == WTN, "warp tile: whole 16 x 8 fragments");
  constexpr int kAPer = BM * kBK / kThreads, kBPer = BN * kBK / kThreads;
  static_assert(kAPer * kThreads == BM * kBK && kBPer * kThreads == BN * kBK, "whole tiles per thread");
  __shared__ __align__(16) __nv_bfloat16 As[BM][LD];
  __shared__ __align__(16) __nv_bfloat16 Bs[BN][LD];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N, g = lane >> 2, t4 = lane & 3;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int kbegin = blockIdx.z * k_split, kend = min(K, kbegin + k_split);

  // Element t of this thread's share of a tile: (row, k) of A, (column, k) of B. 256 is a multiple
  // of BM, BN and kBK, so along the contiguous index a thread keeps the same position for every t:
  // what depends on it only (a row's base address) is computed once.
  static_assert(kThreads % BM == 0 && kThreads % BN == 0 && kThreads % kBK == 0, "fixed positions");
  auto a_at = [&](int t, int& mm, int& kk) {
    if constexpr (Op::kAKFast) { kk = tid % kBK; mm = tid / kBK + t * (kThreads / kBK); }
    else { mm = tid % BM; kk = tid / BM + t * (kThreads / BM); }
  };
  auto b_at = [&](int t, int& nn, int& kk) {
    if constexpr (Op::kBKFast) { kk = tid % kBK; nn = tid / kBK + t * (kThreads / kBK); }
    else { nn = tid % BN; kk = tid / BN + t * (kThreads / BN); }
  };

  float acc[MF][NF][4] = {};
  // Each k-tile: gather (converting to bf16) into shared memory, then multiply. No register
  // staging of the next tile: it would double the registers a thread holds and halve the blocks
  // an SM keeps; the loads of one block overlap the mma of the other blocks on the SM instead.
  for (int k0 = kbegin; k0 < kend; k0 += kBK) {
#pragma unroll
    for (int t = 0; t < kAPer; ++t) {
      int mm, kk;
      a_at(t, mm, kk);
      const int m = m0 + mm, k = k0 + kk;
      As[mm][kk] = __float2bfloat16_rn((m < M && k < kend) ? op.a(m, k) : 0.0f);
    }
#pragma unroll
    for (int t = 0; t < kBPer; ++t) {
      int nn, kk;
      b_at(t, nn, kk);
      const int n = n0 + nn, k = k0 + kk;
      Bs[nn][kk] = __float2bfloat16_rn((n < N && k < kend) ? op.b(k, n) : 0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t af[MF][4], bf[NF][2];
#pragma unroll
      for (int f = 0; f < MF; ++f) {
        const int r = wm * WTM + f * 16 + g, c = ks + 2 * t4;
        af[f][0] = ld_pair(&As[r][c]);
        af[f][1] = ld_pair(&As[r + 8][c]);
        af[f][2] = ld_pair(&As[r][c + 8]);
        af[f][3] = ld_pair(&As[r + 8][c + 8]);
      }
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        const int r = wn * WTN + f * 8 + g, c = ks + 2 * t4;
        bf[f][0] = ld_pair(&Bs[r][c]);
        bf[f][1] = ld_pair(&Bs[r][c + 8]);
      }
#pragma unroll
      for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < NF; ++j) course::mma_bf16_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
    __syncthreads();
  }
  // Epilogue: every accumulator to its (m, n), straight from the registers.
#pragma unroll
  for (int i = 0; i < MF; ++i)
#pragma unroll
    for (int j = 0; j < NF; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + wm * WTM + i * 16 + g + (e >> 1) * 8, n = n0 + wn * WTN + j * 8 + 2 * t4 + (e & 1);
        if (m < M && n < N) op.store(m, n, acc[i][j][e]);
      }
}
// --8<-- [end:gemm]

// --8<-- [start:ldmatrix]
// ldmatrix (compute capability 7.5 on): each of the 32 lanes gives the shared-memory address of one
// 16-byte row; the warp gets back 8 x 8 bf16 matrices already in mma's fragment layout (lane
// g * 4 + t holds row g, elements 2t and 2t + 1). .x4 loads four matrices (lanes 0-7 address the
// rows of the first, 8-15 the second, ...), .x2 two (lanes 0-15).
__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ inline void ldmatrix_x2(uint32_t (&r)[2], const __nv_bfloat16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(p)));
}

// 16 bytes of an activation (4 fp32 or 8 bf16 values) with one vector load, as bf16.
template <class T>
constexpr int kChunk = 16 / static_cast<int>(sizeof(T));
__device__ inline void load_chunk(const float* p, __nv_bfloat16 (&v)[4]) {
  const float4 f = __ldg(reinterpret_cast<const float4*>(p));
  v[0] = __float2bfloat16_rn(f.x);
  v[1] = __float2bfloat16_rn(f.y);
  v[2] = __float2bfloat16_rn(f.z);
  v[3] = __float2bfloat16_rn(f.w);
}
__device__ inline void load_chunk(const __nv_bfloat16* p, __nv_bfloat16 (&v)[8]) {
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
  memcpy(v, &u, sizeof(u));
}
// --8<-- [end:ldmatrix]

// --8<-- [start:conv1]
// conv1 (one input channel, 32 outputs, 3x3, padding 1) with its batch-norm sums. K = 9 is too short
// for a GEMM tile: version 3's implicit GEMM pads it to 16 and gathers the image again for every
// tile of 64 positions, while all conv1 has to do is write its 32-channel fp32 output (4 FLOP per
// byte). Here a block stages one image with its zero border in shared memory (once), and each of 196
// threads computes 4 positions (one column, rows 7 apart) for all 32 channels: a warp's stores are
// 32 consecutive floats. Each output adds its 9 products in the order (r, s), one fused multiply-add
// each, as version 3's kernel does. The batch-norm sums stay in registers across the block's images;
// each warp's sums go to its own slot in shared memory, and the block adds its 7 warps in order and
// writes part[block] = {32 sums, 32 sums of squares} (no atomics: reduce_parts adds the blocks in a
// fixed order, so the sums are the same bits in every run).
constexpr int kConv1Threads = 224, kConv1Active = 196;  // 7 full warps (for the shuffles), 196 compute
__global__ void __launch_bounds__(kConv1Threads)
    conv3x3_c1(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int N,
               double* __restrict__ part) {
  constexpr int H = 28, HW = H * H, PW = H + 2, C = 32, ROWS = HW / kConv1Active, WARPS = kConv1Threads / 32;
  static_assert(ROWS * kConv1Active == HW && kConv1Active % H == 0, "4 whole rows of positions per thread");
  __shared__ float img[PW * PW];
  __shared__ float ws[C * 9];
  __shared__ double wsum[WARPS][C], wsq[WARPS][C];
  const int tid = threadIdx.x, col = tid % H, row = tid / H;  // positions (row + 7 k, col), k < 4
  const bool active = tid < kConv1Active;
  for (int i = tid; i < C * 9; i += kConv1Threads) ws[i] = w[i];
  for (int i = tid; i < PW * PW; i += kConv1Threads) img[i] = 0.0f;  // the border stays 0
  float s1[C] = {}, s2[C] = {};
  // The next image's 4 values are loaded into registers while this one is computed (one block per
  // SM: the registers of s1, s2 and the 36 inputs leave room for no second block to hide that latency).
  float next[ROWS];
  auto load = [&](int n) {
#pragma unroll
    for (int k = 0; k < ROWS; ++k)
      next[k] = (active && n < N) ? x[static_cast<size_t>(n) * HW + tid + k * kConv1Active] : 0.0f;
  };
  load(blockIdx.x);
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    __syncthreads();  // the previous image is no longer read (the first time: the zeroing is done)
    if (active)
#pragma unroll
      for (int k = 0; k < ROWS; ++k) img[(row + 7 * k + 1) * PW + col + 1] = next[k];
    __syncthreads();
    load(n + gridDim.x);
    if (!active) continue;
    float v[ROWS][9];
#pragma unroll
    for (int k = 0; k < ROWS; ++k)
#pragma unroll
      for (int rs = 0; rs < 9; ++rs) v[k][rs] = img[(row + 7 * k + rs / 3) * PW + col + rs % 3];
    float* dst = out + static_cast<size_t>(n) * C * HW + tid;
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < ROWS; ++k) {
        float a = 0.0f;
#pragma unroll
        for (int rs = 0; rs < 9; ++rs) a += ws[c * 9 + rs] * v[k][rs];
        dst[c * HW + k * kConv1Active] = a;
        s1[c] += a;
        s2[c] += a * a;
      }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {  // every warp is full: the idle lanes add zeros
    float a = s1[c], b = s2[c];
    for (int o = 16; o > 0; o >>= 1) {
      a += __shfl_xor_sync(0xffffffffu, a, o);
      b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if ((tid & 31) == 0) {
      wsum[tid / 32][c] = a;
      wsq[tid / 32][c] = b;
    }
  }
  __syncthreads();
  if (tid < C) {
    double a = 0.0, b = 0.0;
    for (int k = 0; k < WARPS; ++k) a += wsum[k][tid], b += wsq[k][tid];
    part[blockIdx.x * 2 * C + tid] = a;
    part[blockIdx.x * 2 * C + C + tid] = b;
  }
}
// --8<-- [end:conv1]

// --8<-- [start:conv]
// conv2 as implicit GEMMs that stage whole images. One image of conv2's input is small (32 channels
// x 14 x 14 in bf16: 12.5 KB) and the weights too (64 x 288 in bf16: 36 KB), so a block keeps the
// weights in shared memory for its whole life and brings in one image at a time with 16-byte loads,
// stored position-major with a zero border: Is[(y + 1) * PW + x + 1][c], PW = H + 2. With the
// reduction index ordered k = (r, s, c), 16 consecutive k are one tap (r, s) and 16 consecutive
// channels, which are 32 contiguous bytes of Is for every output position: the im2col matrix is
// never formed, ldmatrix reads its fragments straight from Is, one row address per position and tap.
// Rows are padded by 8 bf16 (an odd number of 16-byte units per row), so that the 8 rows of an
// ldmatrix fall in 8 different groups of banks.
//
// out[n][m][y][x] = sum over (r, s, c) of A[m][(r, s, c)] in[n][c][y + r - 1][x + s - 1] for the
// forward pass (A[m][(r, s, c)] = w[m][c][r][s]); with FLIP, the input gradient: in = the output
// gradient (CIN = the forward's output channels), A[m][(r, s, k)] = w[k][m][2 - r][2 - s].
// Warps: all 8 along the positions (25 fragments of 8 for 196 positions, warp w takes w, w + 8, ...),
// each with all COUT rows (COUT / 16 fragments of 16). Grid: at most two blocks per SM, each looping
// over images, so that one block's image loads overlap the other's products.
// STATS: each channel's sum and sum of squares of the stored outputs, per warp in its own slots of
// shared memory (added image after image), then the block's 8 warps added in order and written to
// part[block] = {COUT sums, COUT sums of squares}: no atomics, the same bits in every run.
template <int H, int CIN, int COUT>
struct ConvShape {
  static constexpr int PW = H + 2, HW = H * H, K = 9 * CIN;
  static constexpr int LDW = K + 8, LDI = CIN + 8;  // row strides of Ws and Is (bf16)
  static constexpr int FRAGS = (HW + 7) / 8, NF = (FRAGS + 7) / 8, MF = COUT / 16;
  static constexpr int kSmemBytes = (COUT * LDW + PW * PW * LDI) * 2;
  static_assert(CIN % 16 == 0 && COUT % 16 == 0 && HW % 2 == 0, "whole k-steps; pairs of positions");
  static_assert((LDW / 8) % 2 == 1 && (LDI / 8) % 2 == 1, "odd 16-byte units per row: no bank conflicts");
};

template <int H, int CIN, int COUT, bool FLIP, bool STATS, class TIn>
__global__ void __launch_bounds__(kThreads, 2)
    conv3x3_tc(const __nv_bfloat16* __restrict__ w, const TIn* __restrict__ in, float* __restrict__ out, int N,
               double* __restrict__ part) {
  using S = ConvShape<H, CIN, COUT>;
  constexpr int PW = S::PW, HW = S::HW, K = S::K, LDW = S::LDW, LDI = S::LDI, MF = S::MF, NF = S::NF;
  static_assert((CIN * HW) % kChunk<TIn> == 0, "an image is whole 16-byte chunks");
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* Ws = reinterpret_cast<__nv_bfloat16*>(smem);  // [COUT][LDW], k = (r, s, c)
  __nv_bfloat16* Is = Ws + COUT * LDW;                          // [PW * PW][LDI]
  constexpr int kWarps = kThreads / 32;
  __shared__ double wsum[STATS ? kWarps : 1][STATS ? COUT : 1], wsq[STATS ? kWarps : 1][STATS ? COUT : 1];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;

  // The weights, read in their global order (coalesced) and stored with k reordered to (r, s, c).
  for (int e = tid; e < COUT * K; e += kThreads) {
    if constexpr (FLIP) {  // w is [CIN][COUT][3][3]: e = (k * COUT + m) * 9 + 8 - rs
      const int k = e / (9 * COUT), m = (e / 9) % COUT, rs = 8 - e % 9;
      Ws[m * LDW + rs * CIN + k] = w[e];
    } else {  // w is [COUT][CIN][3][3]: e = (m * CIN + c) * 9 + rs
      const int m = e / K, c = (e / 9) % CIN, rs = e % 9;
      Ws[m * LDW + rs * CIN + c] = w[e];
    }
  }
  for (int e = tid; e < PW * PW * LDI / 8; e += kThreads)  // the zero border (and padding), once
    reinterpret_cast<uint4*>(Is)[e] = make_uint4(0, 0, 0, 0);
  if constexpr (STATS)
    for (int e = tid; e < kWarps * COUT; e += kThreads) wsum[e / COUT][e % COUT] = wsq[e / COUT][e % COUT] = 0.0;

  // This lane's ldmatrix rows: for A, row lane % 16 and k-half lane / 16 of each 16 x 16 fragment;
  // for B, position lane % 8 of each fragment of 8 positions (clamped to the last position past the
  // end: those columns are computed but never stored) and k-half (lane / 8) % 2.
  int pos[NF];
#pragma unroll
  for (int j = 0; j < NF; ++j) {
    const int p = min((warp + 8 * j) * 8 + (lane & 7), HW - 1);
    pos[j] = (p / H) * PW + p % H;
  }
  const int a_off = (lane & 15) * LDW + (lane >> 4) * 8, b_half = ((lane >> 3) & 1) * 8;

  for (int img = blockIdx.x; img < N; img += gridDim.x) {
    __syncthreads();  // the previous image's products are done with Is (the first time: Ws, the border)
    const TIn* src = in + static_cast<size_t>(img) * CIN * HW;
    for (int e = tid * kChunk<TIn>; e < CIN * HW; e += kThreads * kChunk<TIn>) {
      __nv_bfloat16 v[kChunk<TIn>];
      load_chunk(src + e, v);
#pragma unroll
      for (int u = 0; u < kChunk<TIn>; ++u) {
        const int c = (e + u) / HW, p = (e + u) % HW;
        Is[((p / H + 1) * PW + p % H + 1) * LDI + c] = v[u];
      }
    }
    __syncthreads();

    float acc[MF][NF][4] = {};
#pragma unroll
    for (int rs = 0; rs < 9; ++rs) {
      const int tap = (rs / 3) * PW + rs % 3;
#pragma unroll
      for (int c0 = 0; c0 < CIN; c0 += 16) {
        uint32_t af[MF][4];
#pragma unroll
        for (int i = 0; i < MF; ++i) ldmatrix_x4(af[i], Ws + i * 16 * LDW + a_off + rs * CIN + c0);
#pragma unroll
        for (int j = 0; j < NF; ++j) {
          if (warp + 8 * j < S::FRAGS) {  // the same for the whole warp
            uint32_t bf[2];
            ldmatrix_x2(bf, Is + (pos[j] + tap) * LDI + c0 + b_half);
#pragma unroll
            for (int i = 0; i < MF; ++i) course::mma_bf16_16816(acc[i][j], af[i], bf[0], bf[1]);
          }
        }
      }
    }

    // Epilogue: each lane holds pairs of adjacent positions (2 t4, 2 t4 + 1) of rows g and g + 8.
    float* dst = out + static_cast<size_t>(img) * COUT * HW;
    float ps[MF][2] = {}, pq[MF][2] = {};
#pragma unroll
    for (int j = 0; j < NF; ++j) {
      const int p = (warp + 8 * j) * 8 + 2 * t4;
      if (p < HW) {  // HW is even: p + 1 < HW too
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
            *reinterpret_cast<float2*>(dst + (i * 16 + g + 8 * h) * HW + p) = make_float2(v0, v1);
            ps[i][h] += v0 + v1;
            pq[i][h] += v0 * v0 + v1 * v1;
          }
      }
    }
    if constexpr (STATS) {
#pragma unroll
      for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the 4 lanes of a quad share a row
          float a = ps[i][h], b = pq[i][h];
          a += __shfl_xor_sync(0xffffffffu, a, 1);
          b += __shfl_xor_sync(0xffffffffu, b, 1);
          a += __shfl_xor_sync(0xffffffffu, a, 2);
          b += __shfl_xor_sync(0xffffffffu, b, 2);
          if (t4 == 0) {  // this lane alone owns the warp's slot of row i * 16 + g + 8 h
            wsum[warp][i * 16 + g + 8 * h] += a;
            wsq[warp][i * 16 + g + 8 * h] += b;
          }
        }
    }
  }
  if constexpr (STATS) {
    __syncthreads();
    for (int m = tid; m < COUT; m += kThreads) {
      double a = 0.0, b = 0.0;
      for (int k = 0; k < kWarps; ++k) a += wsum[k][m], b += wsq[k][m];
      part[blockIdx.x * 2 * COUT + m] = a;
      part[blockIdx.x * 2 * COUT + COUT + m] = b;
    }
  }
}
// --8<-- [end:conv]

// --8<-- [start:conv_wgrad]
// conv2's weight gradient dw[m][c][r][s] = sum over images and positions of dout[n][m][y][x]
// in[n][c][y + r - 1][x + s - 1]: the reduction runs over positions. Per image, A = the output
// gradient As[m][P] and B[P][(c, r, s)] = the input shifted by (r, s), both indexed by the padded
// position P = y * PW + x (the output gradient is 0 in the columns x >= H, so they add nothing).
// For ldmatrix, 8 consecutive P of one B row must be 16 aligned bytes: a shift by r is r * PW
// positions (PW = 16: aligned), a shift by s is not, so the input is staged three times, shifted by
// s = 0, 1, 2: Bs[s][c][P] = Ipad[c][P + s], Ipad the input with its zero border.
// Each block sums over its images (a slice of the batch) in registers and writes its partial
// gradient to partial[blockIdx.x]; reduce_parts adds the slices in a fixed order: no atomics on the
// 18,432 outputs from hundreds of blocks, and the same bits in every run. Warps: 2 along m (32 rows
// each) x 4 along the 288 outputs (72 each).
template <int H, int CIN, int COUT>
struct WgradShape {
  static constexpr int PW = H + 2, HW = H * H, Q = 9 * CIN;
  static constexpr int KPOS = (H * PW + 15) / 16 * 16;  // padded positions of the output gradient
  static constexpr int LDA = KPOS + 8, LDB = KPOS + 2 * PW + 8, BCOPY = CIN * LDB + 8;
  static constexpr int WARPS_M = COUT / 32, WARPS_N = 8 / WARPS_M, NF = Q / 8 / WARPS_N;
  static constexpr int kSmemBytes = (COUT * LDA + 3 * BCOPY) * 2;
  static_assert(PW % 8 == 0, "a shift by whole rows keeps ldmatrix rows 16-byte aligned");
  static_assert(COUT % 32 == 0 && WARPS_M * WARPS_N == 8 && NF * 8 * WARPS_N == Q, "warp tiling");
  static_assert((LDA / 8) % 2 == 1 && (LDB / 8) % 2 == 1, "odd 16-byte units per row: no bank conflicts");
};

template <int H, int CIN, int COUT, class TIn>
__global__ void __launch_bounds__(kThreads, 2)
    conv3x3_wgrad_tc(const float* __restrict__ dout, const TIn* __restrict__ in, float* __restrict__ partial, int N) {
  using S = WgradShape<H, CIN, COUT>;
  constexpr int PW = S::PW, HW = S::HW, Q = S::Q, LDA = S::LDA, LDB = S::LDB, NF = S::NF;
  static_assert((COUT * HW) % kChunk<float> == 0 && (CIN * HW) % kChunk<TIn> == 0, "whole 16-byte chunks");
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(smem);  // [COUT][LDA]
  __nv_bfloat16* Bs = As + COUT * LDA;                          // [3][CIN][LDB], copies BCOPY apart
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int wm = warp / S::WARPS_N, wn = warp % S::WARPS_N;
  // Everything never written below stays 0: the border, the columns x >= H, the padding.
  for (int e = tid; e < (COUT * LDA + 3 * S::BCOPY) / 8; e += kThreads)
    reinterpret_cast<uint4*>(As)[e] = make_uint4(0, 0, 0, 0);

  // This lane's ldmatrix rows: A as in conv3x3_tc; B row q = (c, r, s) of each fragment of 8 outputs.
  int b_off[NF];
#pragma unroll
  for (int j = 0; j < NF; ++j) {
    const int q = (wn * NF + j) * 8 + (lane & 7), c = q / 9, r = (q % 9) / 3, s = q % 3;
    b_off[j] = s * S::BCOPY + c * LDB + r * PW + ((lane >> 3) & 1) * 8;
  }
  const int a_off = (wm * 32 + (lane & 15)) * LDA + (lane >> 4) * 8;

  float acc[2][NF][4] = {};
  for (int img = blockIdx.x; img < N; img += gridDim.x) {
    __syncthreads();  // the previous image's products are done (the first time: the zeroing)
    const float* g_src = dout + static_cast<size_t>(img) * COUT * HW;
    for (int e = tid * 4; e < COUT * HW; e += kThreads * 4) {
      __nv_bfloat16 v[4];
      load_chunk(g_src + e, v);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int m = (e + u) / HW, p = (e + u) % HW;
        As[m * LDA + (p / H) * PW + p % H] = v[u];
      }
    }
    const TIn* i_src = in + static_cast<size_t>(img) * CIN * HW;
    for (int e = tid * kChunk<TIn>; e < CIN * HW; e += kThreads * kChunk<TIn>) {
      __nv_bfloat16 v[kChunk<TIn>];
      load_chunk(i_src + e, v);
#pragma unroll
      for (int u = 0; u < kChunk<TIn>; ++u) {
        const int c = (e + u) / HW, p = (e + u) % HW, at = (p / H + 1) * PW + p % H + 1 + c * LDB;
#pragma unroll
        for (int s = 0; s < 3; ++s) Bs[s * S::BCOPY + at - s] = v[u];
      }
    }
    __syncthreads();
#pragma unroll 2
    for (int p0 = 0; p0 < S::KPOS; p0 += 16) {
      uint32_t af[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) ldmatrix_x4(af[i], As + a_off + i * 16 * LDA + p0);
#pragma unroll
      for (int j = 0; j < NF; ++j) {
        uint32_t bf[2];
        ldmatrix_x2(bf, Bs + b_off[j] + p0);
#pragma unroll
        for (int i = 0; i < 2; ++i) course::mma_bf16_16816(acc[i][j], af[i], bf[0], bf[1]);
      }
    }
  }
  float* dst = partial + static_cast<size_t>(blockIdx.x) * COUT * Q;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < NF; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = wm * 32 + i * 16 + g + 8 * h, q = (wn * NF + j) * 8 + 2 * t4;
        *reinterpret_cast<float2*>(dst + m * Q + q) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

// --8<-- [end:conv_wgrad]

// --8<-- [start:operands]
// The split-K products store each slice of k's result to its own part, part + slice * rows * cols;
// reduce_parts adds the slices in a fixed order (with one slice, part is the output itself).
// Linear forward without bias: y[b][o] = sum_i x[b][i] w[o][i] (the bias and ReLU are applied by
// the next kernel, fc2_loss_and_backward). M = batch, N = O, K = I.
template <class TIn>
struct LinFwd {
  static constexpr bool kAKFast = true, kBKFast = true;
  const TIn* x;
  const __nv_bfloat16* w;
  float* part;
  int I, O, B;
  __device__ float a(int b, int i) const { return to_float(x[static_cast<size_t>(b) * I + i]); }
  __device__ float b(int i, int o) const { return __bfloat162float(w[static_cast<size_t>(o) * I + i]); }
  __device__ void store(int b, int o, float v) const { part[(static_cast<size_t>(blockIdx.z) * B + b) * O + o] = v; }
};

// Input gradient: dx[b][i] = sum_o dy[b][o] w[o][i]. M = batch, N = I, K = O.
struct LinDgrad {
  static constexpr bool kAKFast = true, kBKFast = false;
  const float* dy;
  const __nv_bfloat16* w;
  float* dx;
  int I, O;
  __device__ float a(int b, int o) const { return dy[b * O + o]; }
  __device__ float b(int o, int i) const { return __bfloat162float(w[static_cast<size_t>(o) * I + i]); }
  __device__ void store(int b, int i, float v) const { dx[static_cast<size_t>(b) * I + i] = v; }
};

// Weight gradient: dw[o][i] = sum over b of dy[b][o] x[b][i] (split over the batch). M = O, N = I,
// K = batch.
template <class TIn>
struct LinWgrad {
  static constexpr bool kAKFast = false, kBKFast = false;
  const float* dy;
  const TIn* x;
  float* part;
  int I, O;
  __device__ float a(int o, int b) const { return dy[b * O + o]; }
  __device__ float b(int b, int i) const { return to_float(x[static_cast<size_t>(b) * I + i]); }
  __device__ void store(int o, int i, float v) const {
    part[(static_cast<size_t>(blockIdx.z) * O + o) * I + i] = v;
  }
};
// --8<-- [end:operands]

// --- launchers ------------------------------------------------------------------------------------

// Split-K: `splits` asked for, each slice a whole number of k-tiles; k_slices is how many the grid has.
inline int k_split_length(int K, int splits) {
  return course::ceil_div(course::ceil_div(K, std::max(1, splits)), kBK) * kBK;
}
inline int k_slices(int K, int splits) { return course::ceil_div(K, k_split_length(K, splits)); }

template <int BM, int BN, int WARPS_M, int WARPS_N, class Op>
inline void gemm(const Op& op, int M, int N, int K, int splits, cudaStream_t st) {
  const int k_split = k_split_length(K, splits);
  const dim3 grid(course::ceil_div(N, BN), course::ceil_div(M, BM), course::ceil_div(K, k_split));
  gemm_bf16<BM, BN, WARPS_M, WARPS_N><<<grid, kThreads, 0, st>>>(op, M, N, K, k_split);
  CUDA_CHECK_LAUNCH();
}

// How many slices of k give about `target` blocks when there are `tiles` output tiles, each slice
// at least `min_k` long.
inline int split_for(int tiles, int K, int target, int min_k) {
  return std::max(1, std::min(target / std::max(1, tiles), K / min_k));
}

// --8<-- [start:allow_shared_memory]
// A kernel that needs more than 48 KB of shared memory must say so before its first launch on each GPU:
// the attribute belongs to the kernel on the current device, so a process that drives several GPUs (the
// data-parallel program, one thread per GPU) sets it once per (kernel, device). The first launch on a
// device is an eager step before any capture, so the call is never made inside a captured graph.
template <class Kernel>
inline void allow_shared_memory(Kernel kernel, int bytes) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;  // (kernel, device) pairs already allowed
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (done.insert({reinterpret_cast<const void*>(kernel), device}).second) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}
// --8<-- [end:allow_shared_memory]

// The blocks of conv1's and conv2's forward kernels (each writes one part of the batch-norm sums),
// and the doubles those parts need: at most 2 sms blocks of 2 x 64 channels.
inline int conv1_blocks(int N, int sms) { return std::max(1, std::min(N, sms)); }
inline int conv_blocks(int N, int sms) { return std::max(1, std::min(N, 2 * sms)); }
inline size_t bn_stat_part_doubles(int sms) { return static_cast<size_t>(2 * sms) * 2 * 64; }

// conv1 forward (28 x 28, 1 -> 32 channels) with batch-norm sums: sums[0..32) the channels' sums,
// sums[32..64) their sums of squares (written; part holds bn_stat_part_doubles(sms) doubles).
// One block per SM (its registers leave room for one), each looping over images.
inline void conv1_forward(const float* x, const float* w, float* out, int N, double* part, double* sums, int sms,
                          cudaStream_t st) {
  conv3x3_c1<<<conv1_blocks(N, sms), kConv1Threads, 0, st>>>(x, w, out, N, part);
  CUDA_CHECK_LAUNCH();
  reduce_parts(part, conv1_blocks(N, sms), 2 * 32, sums, st);
}

// conv2 forward with batch-norm sums: sums[0..COUT) and sums[COUT..2 COUT) (written), as conv1_forward.
template <int H, int CIN, int COUT, class TIn>
inline void conv_forward(const __nv_bfloat16* w, const TIn* in, float* out, int N, double* part, double* sums,
                         int sms, cudaStream_t st) {
  static_assert(COUT <= 64, "bn_stat_part_doubles holds 64 channels per block");
  constexpr int bytes = ConvShape<H, CIN, COUT>::kSmemBytes;
  allow_shared_memory(conv3x3_tc<H, CIN, COUT, false, true, TIn>, bytes);
  conv3x3_tc<H, CIN, COUT, false, true, TIn><<<conv_blocks(N, sms), kThreads, bytes, st>>>(w, in, out, N, part);
  CUDA_CHECK_LAUNCH();
  reduce_parts(part, conv_blocks(N, sms), 2 * COUT, sums, st);
}

// conv2 input gradient din (N x CIN) from dout (N x COUT); w is the forward weight [COUT][CIN][3][3].
template <int H, int CIN, int COUT>
inline void conv_backward_data(const __nv_bfloat16* w, const float* dout, float* din, int N, int sms,
                               cudaStream_t st) {
  constexpr int bytes = ConvShape<H, COUT, CIN>::kSmemBytes;
  allow_shared_memory(conv3x3_tc<H, COUT, CIN, true, false, float>, bytes);
  conv3x3_tc<H, COUT, CIN, true, false, float>
      <<<conv_blocks(N, sms), kThreads, bytes, st>>>(w, dout, din, N, nullptr);
  CUDA_CHECK_LAUNCH();
}

// The weight gradient's slices of the batch (one per block) and the floats their partial sums need.
inline int conv_wgrad_slices(int N, int sms) { return std::max(1, std::min(N, 2 * sms)); }
inline size_t conv_wgrad_partial_floats(int N, int sms, int Cin, int Cout) {
  return static_cast<size_t>(conv_wgrad_slices(N, sms)) * Cout * Cin * 9;
}

// conv2 weight gradient dw (written): partial sums per slice of the batch, then their sum in a fixed
// order. partial holds conv_wgrad_partial_floats(N, sms, CIN, COUT) floats.
template <int H, int CIN, int COUT, class TIn>
inline void conv_backward_weight(const float* dout, const TIn* in, float* dw, float* partial, int N, int sms,
                                 cudaStream_t st) {
  constexpr int bytes = WgradShape<H, CIN, COUT>::kSmemBytes, count = COUT * CIN * 9;
  allow_shared_memory(conv3x3_wgrad_tc<H, CIN, COUT, TIn>, bytes);
  const int slices = conv_wgrad_slices(N, sms);
  conv3x3_wgrad_tc<H, CIN, COUT, TIn><<<slices, kThreads, bytes, st>>>(dout, in, partial, N);
  CUDA_CHECK_LAUNCH();
  reduce_parts(partial, slices, count, dw, st);
}

// fc1's splits of k asked of gemm: the forward splits k = I so that small batches fill the GPU
// (64 x 128 tiles), the weight gradient splits k = the batch; k_slices(K, splits) is how many slices
// (parts) that gives. And the floats of the parts both need, at any batch up to max_batch (a product
// of one slice writes its output directly and needs none).
inline int linear_forward_splits(int B, int I, int O, int sms) {
  return split_for(course::ceil_div(B, 64) * course::ceil_div(O, 128), I, sms, 2 * kBK);
}
inline int linear_wgrad_splits(int B, int I, int O, int sms) {
  return split_for(course::ceil_div(O, 64) * course::ceil_div(I, 128), B, 2 * sms, 4 * kBK);
}
inline size_t linear_part_floats(int max_batch, int I, int O, int sms) {
  size_t most = 1;
  for (int b = 1; b <= max_batch; ++b) {
    const int fwd = k_slices(I, linear_forward_splits(b, I, O, sms));
    const int wgrad = k_slices(b, linear_wgrad_splits(b, I, O, sms));
    if (fwd > 1) most = std::max(most, static_cast<size_t>(fwd) * b * O);
    if (wgrad > 1) most = std::max(most, static_cast<size_t>(wgrad) * O * I);
  }
  return most;
}

// fc1 forward y (B x O, written); part holds linear_part_floats(B, I, O, sms) floats.
template <class TIn>
inline void linear_forward(const TIn* x, const __nv_bfloat16* w, float* y, float* part, int B, int I, int O, int sms,
                           cudaStream_t st) {
  const int splits = linear_forward_splits(B, I, O, sms), slices = k_slices(I, splits);
  float* dst = slices > 1 ? part : y;
  gemm<64, 128, 2, 4>(LinFwd<TIn>{x, w, dst, I, O, B}, B, O, I, splits, st);
  if (slices > 1) reduce_parts(part, slices, B * O, y, st);
}

// fc1 input gradient dx (B x I) = dy (B x O) W (O x I): K = O = 128, no split.
inline void linear_backward_data(const float* dy, const __nv_bfloat16* w, float* dx, int B, int I, int O,
                                 cudaStream_t st) {
  gemm<64, 128, 2, 4>(LinDgrad{dy, w, dx, I, O}, B, I, O, 1, st);
}

// fc1 weight gradient dw (O x I, written); part holds linear_part_floats(B, I, O, sms) floats.
template <class TIn>
inline void linear_backward_weight(const float* dy, const TIn* x, float* dw, float* part, int B, int I, int O,
                                   int sms, cudaStream_t st) {
  const int splits = linear_wgrad_splits(B, I, O, sms), slices = k_slices(B, splits);
  float* dst = slices > 1 ? part : dw;
  gemm<64, 128, 2, 4>(LinWgrad<TIn>{dy, x, dst, I, O}, O, I, B, splits, st);
  if (slices > 1) reduce_parts(part, slices, O * I, dw, st);
}

}  // namespace tc
}  // namespace mnist
