// layers_tc.cuh: version 4 of the MNIST CNN: the matrix products on the tensor cores, in bf16 with
// fp32 accumulation (mma.sync.m16n8k16, compute capability 8.0 or newer).
//
// Taught in docs/mnist/tensor-cores.md. One GEMM kernel, gemm_bf16, serves five products of the step:
// conv2 forward (with batch-norm statistics in its epilogue), conv2's input and weight gradients,
// fc1 forward, and fc1's input and weight gradients. What differs between them is only where the
// operands come from and where the result goes, so each is a small "operand" struct (ConvFwd,
// ConvDgrad, ConvWgrad, LinFwd, LinDgrad, LinWgrad) that the kernel calls element by element while
// it stages a tile in shared memory: the implicit GEMM's im2col gather happens there, and so does
// the fp32 -> bf16 rounding of the activations. The weights come from a bf16 copy of the fp32
// master weights that the SGD kernel writes (sgd_update_bf16), once per step.
// Around the GEMMs: fc2, softmax, the loss, fc2's backward and fc1's bias, ReLU, ReLU mask and bias
// gradient in one kernel (fc2_loss_and_backward). conv1 (one input channel: K = 9) stays
// on the CUDA cores (conv_igemm.cuh), as do batch norm, ReLU and pooling (layers_fused.cuh).
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "layers_fused.cuh"

namespace mnist {
namespace tc {

constexpr int kBK = 32, kThreads = 256, kPad = 8;  // k-tile; 8 warps; row padding (bf16) against bank conflicts

// bf16 mma.sync exists from compute capability 8.0 on. Device code compiled for sm_75 gets a stub that
// traps; mnist_cnn.cu waives version 4 on such a GPU before it launches anything of this file.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MNIST_HAS_BF16_MMA 0
#else
#define MNIST_HAS_BF16_MMA 1
#endif

// --8<-- [start:mma]
// d (16 x 8, fp32) += a (16 x 16, bf16, row-major) * b (16 x 8, bf16, column-major), one warp.
// Fragment layout (PTX ISA, "mma.m16n8k16"): with g = lane / 4 and t = lane % 4, a[0] holds
// A[g][2t..2t+1], a[1] A[g+8][2t..], a[2] A[g][2t+8..], a[3] A[g+8][2t+8..]; b[0] holds
// B[2t..2t+1][g], b[1] B[2t+8..][g]; d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1].
__device__ inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if MNIST_HAS_BF16_MMA
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d;
  (void)a;
  (void)b;
  __trap();
#endif
}
// --8<-- [end:mma]

__device__ inline uint32_t ld_pair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// --8<-- [start:gemm]
// C[M][N] = sum over k of A(m, k) B(k, n), A and B rounded to bf16, sums in fp32. Op supplies
// op.a(m, k), op.b(k, n) (fp32 values, read from wherever the layer keeps them) and op.store(m, n, v),
// and says which index is contiguous in memory (kAKFast, kBKFast), so that consecutive threads load
// consecutive addresses. Shared memory holds the tile as As[m][k] and Bs[n][k] (k contiguous), the
// layout the mma fragments read with one 32-bit load per register.
// Grid: x loops over column tiles (grid-stride: with STATS a small grid makes few atomics), y = row
// tiles, z = slices of k of length k_split (split-K; Op::store then adds with atomicAdd).
// STATS: each row's sum and sum of squares of C (a conv's output channel) into sum[m], sumsq[m].
template <int BM, int BN, int WARPS_M, int WARPS_N, bool STATS, class Op>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_bf16(const Op op, int M, int N, int K, int k_split, double* __restrict__ sum, double* __restrict__ sumsq) {
  static_assert(WARPS_M * WARPS_N * 32 == kThreads, "8 warps");
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N, MF = WTM / 16, NF = WTN / 8, LD = kBK + kPad;
  static_assert(MF * 16 == WTM && NF * 8 == WTN, "warp tile: whole 16 x 8 fragments");
  constexpr int kAPer = BM * kBK / kThreads, kBPer = BN * kBK / kThreads;
  static_assert(kAPer * kThreads == BM * kBK && kBPer * kThreads == BN * kBK, "whole tiles per thread");
  __shared__ __align__(16) __nv_bfloat16 As[BM][LD];
  __shared__ __align__(16) __nv_bfloat16 Bs[BN][LD];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N, g = lane >> 2, t4 = lane & 3;
  const int m0 = blockIdx.y * BM, n_tiles = (N + BN - 1) / BN;
  const int kbegin = blockIdx.z * k_split, kend = min(K, kbegin + k_split);
  float s1[MF][2] = {}, s2[MF][2] = {};  // STATS: this thread's sums for its 2 * MF rows

  // Element t of this thread's share of a tile: (row, k) of A, (column, k) of B. 256 is a multiple
  // of BM, BN and kBK, so along the contiguous index a thread keeps the same position for every t:
  // what depends on it only (an image's base address, a pixel's coordinates) is computed once.
  static_assert(kThreads % BM == 0 && kThreads % BN == 0 && kThreads % kBK == 0, "fixed positions");
  auto a_at = [&](int t, int& mm, int& kk) {
    if constexpr (Op::kAKFast) { kk = tid % kBK; mm = tid / kBK + t * (kThreads / kBK); }
    else { mm = tid % BM; kk = tid / BM + t * (kThreads / BM); }
  };
  auto b_at = [&](int t, int& nn, int& kk) {
    if constexpr (Op::kBKFast) { kk = tid % kBK; nn = tid / kBK + t * (kThreads / kBK); }
    else { nn = tid % BN; kk = tid / BN + t * (kThreads / BN); }
  };

  for (int tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int n0 = tile * BN;
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
          for (int j = 0; j < NF; ++j) mma_bf16_16816(acc[i][j], af[i], bf[j]);
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
          if (m < M && n < N) {
            const float v = acc[i][j][e];
            op.store(m, n, v);
            if constexpr (STATS) {
              s1[i][e >> 1] += v;
              s2[i][e >> 1] += v * v;
            }
          }
        }
  }
  if constexpr (STATS) {
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the 4 lanes of a quad share a row: add across them, one atomic
        float a = s1[i][h], b = s2[i][h];
        for (int o = 1; o < 4; o <<= 1) {
          a += __shfl_xor_sync(0xffffffffu, a, o);
          b += __shfl_xor_sync(0xffffffffu, b, o);
        }
        const int m = m0 + wm * WTM + i * 16 + g + h * 8;
        if (t4 == 0 && m < M) {
          atomicAdd(&sum[m], static_cast<double>(a));
          atomicAdd(&sumsq[m], static_cast<double>(b));
        }
      }
  }
}
// --8<-- [end:gemm]

// --8<-- [start:operands]
// col(q, j) of a 3x3, padding-1 convolution's input: q = (c, r, s), j = (n, y, x). H is a compile-time
// constant, so the divisions below are multiplications and shifts.
template <int H, class T>
__device__ inline float im2col(const T* __restrict__ in, int C, int q, int j) {
  constexpr int HW = H * H;
  const int n = j / HW, p = j % HW, y = p / H, x = p % H;
  const int c = q / 9, rs = q % 9, iy = y + rs / 3 - 1, ix = x + rs % 3 - 1;
  return (iy >= 0 && iy < H && ix >= 0 && ix < H) ? to_float(in[(static_cast<size_t>(n) * C + c) * HW + iy * H + ix])
                                                  : 0.0f;
}

// Forward: out[n][m][y][x] = sum_q w[m][q] col(q, j). M = Cout, N = batch * H * H, K = Cin * 9.
template <int H, class TIn>
struct ConvFwd {
  static constexpr bool kAKFast = true, kBKFast = false;
  const __nv_bfloat16* w;
  const TIn* in;
  float* out;
  int Cin, Cout;
  __device__ float a(int m, int q) const { return __bfloat162float(w[m * Cin * 9 + q]); }
  __device__ float b(int q, int j) const { return im2col<H>(in, Cin, q, j); }
  __device__ void store(int m, int j, float v) const {
    out[(static_cast<size_t>(j / (H * H)) * Cout + m) * (H * H) + j % (H * H)] = v;
  }
};

// Input gradient: din[n][c] = sum over (k, r, s) of w[k][c][2-r][2-s] col_dout((k, r, s), j):
// the same product with the weights transposed and flipped. M = Cin, N = batch * H * H, K = Cout * 9.
template <int H>
struct ConvDgrad {
  static constexpr bool kAKFast = true, kBKFast = false;
  const __nv_bfloat16* w;  // the forward weight [Cout][Cin][3][3]
  const float* dout;
  float* din;
  int Cin, Cout;
  __device__ float a(int c, int q) const { return __bfloat162float(w[((q / 9) * Cin + c) * 9 + 8 - q % 9]); }
  __device__ float b(int q, int j) const { return im2col<H>(dout, Cout, q, j); }
  __device__ void store(int c, int j, float v) const {
    din[(static_cast<size_t>(j / (H * H)) * Cin + c) * (H * H) + j % (H * H)] = v;
  }
};

// Weight gradient: dw[m][q] = sum over j of dout[n][m][y][x] col(q, j): K = batch * H * H is long,
// the result small (Cout x Cin * 9), so k is split over blocks that add with atomicAdd (dw zeroed).
template <int H, class TIn>
struct ConvWgrad {
  static constexpr bool kAKFast = true, kBKFast = true;
  const float* dout;
  const TIn* in;
  float* dw;
  int Cin, Cout;
  __device__ float a(int m, int j) const {
    return dout[(static_cast<size_t>(j / (H * H)) * Cout + m) * (H * H) + j % (H * H)];
  }
  __device__ float b(int j, int q) const { return im2col<H>(in, Cin, q, j); }
  __device__ void store(int m, int q, float v) const { atomicAdd(&dw[m * Cin * 9 + q], v); }
};

// Linear forward without bias: y[b][o] += sum_i x[b][i] w[o][i] (split-K: y zeroed; the bias and
// ReLU are applied by the next kernel, fc2_loss_and_backward). M = batch, N = O, K = I.
template <class TIn>
struct LinFwd {
  static constexpr bool kAKFast = true, kBKFast = true;
  const TIn* x;
  const __nv_bfloat16* w;
  float* y;
  int I, O;
  __device__ float a(int b, int i) const { return to_float(x[static_cast<size_t>(b) * I + i]); }
  __device__ float b(int i, int o) const { return __bfloat162float(w[static_cast<size_t>(o) * I + i]); }
  __device__ void store(int b, int o, float v) const { atomicAdd(&y[b * O + o], v); }
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

// Weight gradient: dw[o][i] += sum over b of dy[b][o] x[b][i] (split over the batch; dw zeroed).
// M = O, N = I, K = batch.
template <class TIn>
struct LinWgrad {
  static constexpr bool kAKFast = false, kBKFast = false;
  const float* dy;
  const TIn* x;
  float* dw;
  int I, O;
  __device__ float a(int o, int b) const { return dy[b * O + o]; }
  __device__ float b(int b, int i) const { return to_float(x[static_cast<size_t>(b) * I + i]); }
  __device__ void store(int o, int i, float v) const { atomicAdd(&dw[static_cast<size_t>(o) * I + i], v); }
};
// --8<-- [end:operands]

// --8<-- [start:around]
// fc2 forward and backward, with fc1's bias and ReLU in front and fc1's ReLU mask behind, one warp
// per row: h = relu(h_pre + b3), logits = h W4^T + b4, dlogits = (softmax - onehot) / N, the batch's
// mean loss at loss_hist[step % cap]; then, while the row is still in registers, fc2's backward:
// dh_pre = (dlogits W4) where h > 0, else 0, and, added into zeroed gradients, dW4 = dlogits^T h,
// db4 = sum dlogits, db3 = sum dh_pre (each block sums its rows in shared memory first).
// Tiny (10 x 128 per row), so on the CUDA cores, W4 in shared memory. Several blocks share the rows;
// each writes its partial loss, and the last block to finish (a counter in global memory, reset by
// that block) adds them up in a fixed order: the loss is the same from run to run.
// Grid: fc2_loss_blocks(N) blocks of kLossThreads threads.
constexpr int kLossBlocks = 128, kLossThreads = 256;
inline int fc2_loss_blocks(int N) { return std::min(kLossBlocks, (N + kLossThreads / 32 - 1) / (kLossThreads / 32)); }

__global__ void __launch_bounds__(kLossThreads)
    fc2_loss_and_backward(const float* __restrict__ h_pre, const float* __restrict__ b3, const float* __restrict__ w4,
                          const float* __restrict__ b4, const int* __restrict__ labels, float* __restrict__ h,
                          float* __restrict__ logits, float* __restrict__ dlogits, float* __restrict__ dh_pre,
                          float* __restrict__ db3, float* __restrict__ dw4, float* __restrict__ db4, int N,
                          const int* __restrict__ step, float* __restrict__ loss_hist, int cap,
                          float* __restrict__ loss_part, unsigned* __restrict__ blocks_done) {
  __shared__ float w[10][128];
  __shared__ float bias3[128];
  __shared__ float sum_dw4[10][128], sum_db3[128], sum_db4[10];  // this block's share of the gradients
  __shared__ bool last;
  for (int i = threadIdx.x; i < 1280; i += blockDim.x) {
    w[i / 128][i % 128] = w4[i];
    sum_dw4[i / 128][i % 128] = 0.0f;
  }
  for (int i = threadIdx.x; i < 128; i += blockDim.x) {
    bias3[i] = b3[i];
    sum_db3[i] = 0.0f;
    if (i < 10) sum_db4[i] = 0.0f;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  float total = 0.0f, gw[10][4] = {}, gb3[4] = {}, gb4 = 0.0f;
  for (int n = blockIdx.x * warps + threadIdx.x / 32; n < N; n += gridDim.x * warps) {
    float hv[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = lane + 32 * u;
      hv[u] = fmaxf(h_pre[n * 128 + i] + bias3[i], 0.0f);
      h[n * 128 + i] = hv[u];
    }
    float z[10], m = -INFINITY, mine = 0.0f;
#pragma unroll
    for (int k = 0; k < 10; ++k) {
      float p = 0.0f;
#pragma unroll
      for (int u = 0; u < 4; ++u) p += hv[u] * w[k][lane + 32 * u];
      for (int o = 16; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
      z[k] = p + b4[k];
      m = fmaxf(m, z[k]);
      if (k == lane) mine = z[k];
    }
    float s = 0.0f, zl = 0.0f;
    const int label = labels[n];
#pragma unroll
    for (int k = 0; k < 10; ++k) {
      s += expf(z[k] - m);
      zl = k == label ? z[k] : zl;
    }
    if (lane == 0) total += logf(s) + m - zl;
    const float dl_mine = lane < 10 ? (expf(mine - m) / s - (lane == label ? 1.0f : 0.0f)) / N : 0.0f;
    if (lane < 10) {
      logits[n * 10 + lane] = mine;
      dlogits[n * 10 + lane] = dl_mine;
      gb4 += dl_mine;
    }
    float dl[10];
#pragma unroll
    for (int k = 0; k < 10; ++k) dl[k] = __shfl_sync(0xffffffffu, dl_mine, k);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float d = 0.0f;
#pragma unroll
      for (int k = 0; k < 10; ++k) {
        d += dl[k] * w[k][lane + 32 * u];
        gw[k][u] += dl[k] * hv[u];
      }
      d = hv[u] > 0.0f ? d : 0.0f;  // fc1's ReLU: the gradient passes where its output was positive
      dh_pre[n * 128 + lane + 32 * u] = d;
      gb3[u] += d;
    }
  }
  // The block's gradient sums: its warps add in shared memory, then one global atomic per value.
#pragma unroll
  for (int u = 0; u < 4; ++u) {
#pragma unroll
    for (int k = 0; k < 10; ++k) atomicAdd(&sum_dw4[k][lane + 32 * u], gw[k][u]);
    atomicAdd(&sum_db3[lane + 32 * u], gb3[u]);
  }
  if (lane < 10) atomicAdd(&sum_db4[lane], gb4);
  total = block_sum(total);  // its __syncthreads also order the shared-memory sums before the reads below
  for (int i = threadIdx.x; i < 1280; i += blockDim.x) atomicAdd(&dw4[i], sum_dw4[i / 128][i % 128]);
  for (int i = threadIdx.x; i < 128; i += blockDim.x) atomicAdd(&db3[i], sum_db3[i]);
  for (int i = threadIdx.x; i < 10; i += blockDim.x) atomicAdd(&db4[i], sum_db4[i]);
  if (threadIdx.x == 0) {
    loss_part[blockIdx.x] = total;
    __threadfence();  // the partial is visible to every block before the counter says so
    last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {  // block-uniform
    float t = 0.0f;
    for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) t += __ldcg(&loss_part[b]);
    t = block_sum(t);
    if (threadIdx.x == 0) {
      loss_hist[*step % cap] = t / N;
      *blocks_done = 0;  // ready for the next launch (the next graph replay)
    }
  }
}

// SGD on the fp32 master weights, and their bf16 copy for the next step's tensor-core products, in
// one pass. The first thread also advances the step counter (as naive::sgd_update does).
__global__ void sgd_update_bf16(float* __restrict__ params, const float* __restrict__ grads,
                                __nv_bfloat16* __restrict__ params_bf16, float lr, int n, int* __restrict__ step) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float p = params[i] - lr * grads[i];
    params[i] = p;
    params_bf16[i] = __float2bfloat16_rn(p);
  }
  if (i == 0) *step += 1;
}

// Everything version 4's step adds into (the batch-norm sums of both directions, fc1's k-slices, the
// gradients from conv2's weight on) zeroed by one kernel instead of four memsets: at batch 64 the
// step is short enough that each node of the graph counts.
__global__ void zero_accumulators(double* __restrict__ stats, int n_stats, float* __restrict__ h_pre, int n_h,
                                  float* __restrict__ grads, int n_grads) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_stats + n_h + n_grads; i += gridDim.x * blockDim.x) {
    if (i < n_stats) stats[i] = 0.0;
    else if (i < n_stats + n_h) h_pre[i - n_stats] = 0.0f;
    else grads[i - n_stats - n_h] = 0.0f;
  }
}

// The bf16 copy of weights that were uploaded or restored (the first step of a run needs it too).
__global__ void to_bf16(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}
// --8<-- [end:around]

// --- launchers ------------------------------------------------------------------------------------

// A grid of `splits` slices of k (each a whole number of k-tiles) and, with STATS, at most
// `max_col_blocks` column blocks, each looping over column tiles.
template <int BM, int BN, int WARPS_M, int WARPS_N, bool STATS = false, class Op>
inline void gemm(const Op& op, int M, int N, int K, int splits, cudaStream_t st, double* sum = nullptr,
                 double* sumsq = nullptr, int max_col_blocks = 0) {
  const int k_split = course::ceil_div(course::ceil_div(K, std::max(1, splits)), kBK) * kBK;
  const int n_tiles = course::ceil_div(N, BN);
  const dim3 grid(max_col_blocks > 0 ? std::min(n_tiles, max_col_blocks) : n_tiles, course::ceil_div(M, BM),
                  course::ceil_div(K, k_split));
  gemm_bf16<BM, BN, WARPS_M, WARPS_N, STATS><<<grid, kThreads, 0, st>>>(op, M, N, K, k_split, sum, sumsq);
  CUDA_CHECK_LAUNCH();
}

// How many slices of k give about `target` blocks when there are `tiles` output tiles, each slice
// at least `min_k` long.
inline int split_for(int tiles, int K, int target, int min_k) {
  return std::max(1, std::min(target / std::max(1, tiles), K / min_k));
}

// conv2 forward (64 x Cin*9 weights) with batch-norm sums: 64 x 128 tiles (2 x 4 warps of 32 x 32).
template <int H, class TIn>
inline void conv_forward(const __nv_bfloat16* w, const TIn* in, float* out, int N, int Cin, int Cout, double* sum,
                         double* sumsq, int sms, cudaStream_t st) {
  gemm<64, 128, 2, 4, true>(ConvFwd<H, TIn>{w, in, out, Cin, Cout}, Cout, N * H * H, Cin * 9, 1, st, sum, sumsq,
                            4 * sms);
}

// conv2 input gradient: 32 x 128 tiles (1 x 8 warps of 32 x 16): M = Cin = 32.
template <int H>
inline void conv_backward_data(const __nv_bfloat16* w, const float* dout, float* din, int N, int Cin, int Cout,
                               cudaStream_t st) {
  gemm<32, 128, 1, 8>(ConvDgrad<H>{w, dout, din, Cin, Cout}, Cin, N * H * H, Cout * 9, 1, st);
}

// conv2 weight gradient (dw zeroed by the caller): 64 x 64 tiles, k split to fill the GPU.
template <int H, class TIn>
inline void conv_backward_weight(const float* dout, const TIn* in, float* dw, int N, int Cin, int Cout, int sms,
                                 cudaStream_t st) {
  const int tiles = course::ceil_div(Cout, 64) * course::ceil_div(Cin * 9, 64), K = N * H * H;
  gemm<64, 64, 2, 4>(ConvWgrad<H, TIn>{dout, in, dw, Cin, Cout}, Cout, Cin * 9, K,
                     split_for(tiles, K, 2 * sms, 8 * kBK), st);
}

// fc1 forward into zeroed y (B x O): 64 x 128 tiles, k = I split so that small batches fill the GPU.
template <class TIn>
inline void linear_forward(const TIn* x, const __nv_bfloat16* w, float* y, int B, int I, int O, int sms,
                           cudaStream_t st) {
  const int tiles = course::ceil_div(B, 64) * course::ceil_div(O, 128);
  gemm<64, 128, 2, 4>(LinFwd<TIn>{x, w, y, I, O}, B, O, I, split_for(tiles, I, sms, 2 * kBK), st);
}

// fc1 input gradient dx (B x I) = dy (B x O) W (O x I): K = O = 128, no split.
inline void linear_backward_data(const float* dy, const __nv_bfloat16* w, float* dx, int B, int I, int O,
                                 cudaStream_t st) {
  gemm<64, 128, 2, 4>(LinDgrad{dy, w, dx, I, O}, B, I, O, 1, st);
}

// fc1 weight gradient (dw zeroed by the caller): O x I, k = batch split.
template <class TIn>
inline void linear_backward_weight(const float* dy, const TIn* x, float* dw, int B, int I, int O, int sms,
                                   cudaStream_t st) {
  const int tiles = course::ceil_div(O, 64) * course::ceil_div(I, 128);
  gemm<64, 128, 2, 4>(LinWgrad<TIn>{dy, x, dw, I, O}, O, I, B, split_for(tiles, B, 2 * sms, 4 * kBK), st);
}

}  // namespace tc
}  // namespace mnist
