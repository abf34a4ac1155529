// conv_igemm.cuh: version 2's convolutions as implicit GEMMs: the im2col matrix is never stored,
// each tile of it is gathered from the activations straight into shared memory.
//
// Taught in docs/mnist/libraries.md. A 3x3 convolution with padding 1 is a matrix product
//   out[m][j] = sum_q A[m][q] * col[q][j],   q = (c, r, s) over Cin*9,  j = (n, y, x) over N*H*W,
// where col[q][j] = in[n][c][y+r-1][x+s-1] (0 outside the image). The forward pass has A = the
// weights; the input gradient is the same product with A = the weights transposed and flipped,
// applied to the output gradient; the weight gradient is a product that reduces over j instead,
// split over many blocks (split-K) because j is long (N*H*W) and the result small (Cout x Cin*9).
// Plain FP32 FMA on CUDA cores: 64 x 64 (or 32 x 64) tiles, 256 threads, 4 x 4 (or 2 x 4) outputs each.
// With TF32 = true the same tiles are multiplied by the tensor cores instead (WMMA, TF32 inputs,
// FP32 accumulation; compute capability 8.0 or newer), the precision PyTorch allows cuDNN's
// convolutions by default.
//
// course: header
#pragma once

#include <mma.h>

#include "../common/check.cuh"
#include "layers_naive.cuh"

namespace mnist {
namespace igemm {

constexpr int kBN = 64, kBK = 16, kThreads = 256;

// TF32 tensor-core instructions exist from compute capability 8.0 (Ampere) on. Device code compiled
// for an older GPU (sm_75) gets a stub in their place: the TF32 kernels still compile there, and
// the MNIST programs never launch them on such a GPU (they skip TF32 and version 4 with a message); the
// stub traps if one runs anyway.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MNIST_HAS_TF32_MMA 0
#else
#define MNIST_HAS_TF32_MMA 1
#endif

#if MNIST_HAS_TF32_MMA
// --8<-- [start:tf32]
// C[BM][64] (row-major, in shared memory) = A B for one k-tile of 16, on the tensor cores: A is
// stored k-major (As[k][m], so "column-major" for WMMA), B row-major (Bs[k][j]). Each of the 8
// warps owns (BM/16 * 4) / 8 of the 16 x 16 output fragments and keeps them in registers across
// k-tiles. TF32 keeps 10 bits of mantissa: products are rounded, sums are FP32.
template <int BM>
struct Tf32Tile {
  static constexpr int kFrags = (BM / 16) * (kBN / 16) / 8;  // per warp
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> acc[kFrags];
  __device__ void zero() {
    for (int f = 0; f < kFrags; ++f) nvcuda::wmma::fill_fragment(acc[f], 0.0f);
  }
  __device__ void mma(const float* As, int lda, const float* Bs) {
    using namespace nvcuda;
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int k = 0; k < kBK; k += 8)
#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
        const int frag = warp * kFrags + f, fm = frag / (kBN / 16), fn = frag % (kBN / 16);
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
        wmma::load_matrix_sync(a, As + k * lda + fm * 16, lda);
        wmma::load_matrix_sync(b, Bs + k * kBN + fn * 16, kBN);
        for (int t = 0; t < a.num_elements; ++t) a.x[t] = wmma::__float_to_tf32(a.x[t]);
        for (int t = 0; t < b.num_elements; ++t) b.x[t] = wmma::__float_to_tf32(b.x[t]);
        wmma::mma_sync(acc[f], a, b, acc[f]);
      }
  }
  __device__ void store(float* Cs, int ldc) {
    const int warp = threadIdx.x / 32;
    for (int f = 0; f < kFrags; ++f) {
      const int frag = warp * kFrags + f, fm = frag / (kBN / 16), fn = frag % (kBN / 16);
      nvcuda::wmma::store_matrix_sync(Cs + fm * 16 * ldc + fn * 16, acc[f], ldc, nvcuda::wmma::mem_row_major);
    }
  }
};
// --8<-- [end:tf32]
#else
template <int BM>
struct Tf32Tile {  // sm_75 and older: no TF32 tensor cores (see above)
  __device__ void zero() {}
  __device__ void mma(const float*, int, const float*) { __trap(); }
  __device__ void store(float*, int) { __trap(); }
};
#endif

// --8<-- [start:igemm]
// out[n][m][y][x] = sum_q A(m, q) col(q, n, y, x). FLIP selects A for the input gradient:
// A(m = c, q = (k, r, s)) = w[k][c][2-r][2-s], where w is the forward weight [Cin][M][3][3].
// STATS adds each output channel's sum and sum of squares (for batch norm) into sum[] and sumsq[].
// Each block loops over column tiles (grid-stride), so that with STATS a small grid makes few atomics.
template <int BM, bool FLIP, bool STATS, bool TF32>
__global__ void __launch_bounds__(kThreads)
    conv3x3(const float* __restrict__ in, const float* __restrict__ w, float* __restrict__ out, int N, int Cin,
            int M, int H, int W, double* __restrict__ sum, double* __restrict__ sumsq) {
  constexpr int TM = BM / 16, LDA = BM + 4;  // padding: fewer bank conflicts; WMMA needs a multiple of 4
  __shared__ __align__(32) float As[kBK][LDA];
  __shared__ __align__(32) float Bs[kBK][kBN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int HW = H * W, J = N * HW, Q = Cin * 9;
  const int m0 = blockIdx.y * BM, tiles = (J + kBN - 1) / kBN;
  float s1[TM] = {}, s2[TM] = {};  // STATS: this thread's running sums for its TM channels

  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int j0 = tile * kBN;
    // This thread always loads the same column j of col: find its image and pixel once per tile.
    const int jl = tid % kBN, j = j0 + jl;
    const bool jvalid = j < J;
    const int n = jvalid ? j / HW : 0, p = jvalid ? j % HW : 0, y = p / W, x = p % W;
    const float* img = in + static_cast<size_t>(n) * Cin * HW;

    float acc[TM][4] = {};
    Tf32Tile<BM> tc;
    if constexpr (TF32) tc.zero();
    // Software pipelining: the next k-tile's global loads go to registers while this one is
    // multiplied from shared memory, so their latency hides behind the arithmetic.
    constexpr int kAPer = BM * kBK / kThreads, kBPer = kBK * kBN / kThreads;
    float ra[kAPer], rb[kBPer];
    auto load = [&](int q0) {
#pragma unroll
      for (int t = 0; t < kAPer; ++t) {  // weights: consecutive threads, consecutive q
        const int e = tid + t * kThreads, kk = e % kBK, mm = e / kBK, m = m0 + mm, q = q0 + kk;
        float v = 0.0f;
        if (m < M && q < Q) {
          if (FLIP) {
            const int k = q / 9, rs = q % 9;
            v = w[(k * M + m) * 9 + (8 - rs)];
          } else {
            v = w[m * Q + q];
          }
        }
        ra[t] = v;
      }
#pragma unroll
      for (int t = 0; t < kBPer; ++t) {  // im2col: consecutive threads, consecutive pixels
        const int q = q0 + tid / kBN + t * (kThreads / kBN), c = q / 9, r = (q % 9) / 3, s = q % 3;
        const int iy = y + r - 1, ix = x + s - 1;
        rb[t] = (jvalid && q < Q && iy >= 0 && iy < H && ix >= 0 && ix < W) ? img[c * HW + iy * W + ix] : 0.0f;
      }
    };
    load(0);
    for (int q0 = 0; q0 < Q; q0 += kBK) {
#pragma unroll
      for (int t = 0; t < kAPer; ++t) As[(tid + t * kThreads) % kBK][(tid + t * kThreads) / kBK] = ra[t];
#pragma unroll
      for (int t = 0; t < kBPer; ++t) Bs[tid / kBN + t * (kThreads / kBN)][jl] = rb[t];
      __syncthreads();
      if (q0 + kBK < Q) load(q0 + kBK);
      if constexpr (TF32) {
        tc.mma(&As[0][0], LDA, &Bs[0][0]);
      } else {
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
          const float4 b = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
#pragma unroll
          for (int i = 0; i < TM; ++i) {
            const float a = As[k][ty * TM + i];
            acc[i][0] += a * b.x;
            acc[i][1] += a * b.y;
            acc[i][2] += a * b.z;
            acc[i][3] += a * b.w;
          }
        }
      }
      __syncthreads();
    }
    if constexpr (TF32) {  // the fragments' layout is opaque: go through shared memory to this thread's 4 x TM
      __shared__ __align__(32) float Cs[BM][kBN + 4];
      tc.store(&Cs[0][0], kBN + 4);
      __syncthreads();
      for (int i = 0; i < TM; ++i)
        for (int t = 0; t < 4; ++t) acc[i][t] = Cs[ty * TM + i][tx * 4 + t];
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + ty * TM + i;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int jc = j0 + tx * 4 + t;
        if (m < M && jc < J) {
          out[(static_cast<size_t>(jc / HW) * M + m) * HW + jc % HW] = acc[i][t];
          s1[i] += acc[i][t];
          s2[i] += acc[i][t] * acc[i][t];
        }
      }
    }
  }
  if (STATS) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {  // the 16 threads of a row are 16 consecutive lanes of one warp
      const int m = m0 + ty * TM + i;
      float a = s1[i], b = s2[i];
      for (int o = 8; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
      }
      if (tx == 0 && m < M) {
        atomicAdd(&sum[m], static_cast<double>(a));
        atomicAdd(&sumsq[m], static_cast<double>(b));
      }
    }
  }
}
// --8<-- [end:igemm]

// --8<-- [start:wgrad]
// dw[m][q] += sum over j in this block's slice of dout[n][m][y][x] * col(q, n, y, x).
// Grid: (Q tiles, M tiles, slices of j). dw must be zeroed first: slices add with atomicAdd.
template <bool TF32>
__global__ void __launch_bounds__(kThreads)
    conv3x3_wgrad(const float* __restrict__ dout, const float* __restrict__ in, float* __restrict__ dw, int N,
                  int Cin, int M, int H, int W, int slice) {
  constexpr int BM = 64, BQ = 64, BJ = 16;
  __shared__ __align__(32) float As[BJ][BM + 4];
  __shared__ __align__(32) float Bs[BJ][BQ];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int HW = H * W, J = N * HW, Q = Cin * 9;
  const int q0 = blockIdx.x * BQ, m0 = blockIdx.y * BM;
  const int jbegin = blockIdx.z * slice, jend = min(J, jbegin + slice);

  float acc[4][4] = {};
  Tf32Tile<64> tc;
  if constexpr (TF32) tc.zero();
  const int jj = tid % BJ;  // this thread's j within each step; it loads rows tid/16 + 16t
  float ra[4], rb[4];        // the next step's values, loaded while this step is multiplied
  auto load = [&](int js) {
    const int j = js + jj;
    const bool jvalid = j < jend;
    const int n = jvalid ? j / HW : 0, p = jvalid ? j % HW : 0, y = p / W, x = p % W;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int m = m0 + tid / BJ + t * (kThreads / BJ);
      ra[t] = (jvalid && m < M) ? dout[(static_cast<size_t>(n) * M + m) * HW + p] : 0.0f;
      const int q = q0 + tid / BJ + t * (kThreads / BJ), c = q / 9, r = (q % 9) / 3, s = q % 3;
      const int iy = y + r - 1, ix = x + s - 1;
      rb[t] = (jvalid && q < Q && iy >= 0 && iy < H && ix >= 0 && ix < W)
                  ? in[(static_cast<size_t>(n) * Cin + c) * HW + iy * W + ix]
                  : 0.0f;
    }
  };
  if (jbegin < jend) load(jbegin);
  for (int js = jbegin; js < jend; js += BJ) {
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      As[jj][tid / BJ + t * (kThreads / BJ)] = ra[t];
      Bs[jj][tid / BJ + t * (kThreads / BJ)] = rb[t];
    }
    __syncthreads();
    if (js + BJ < jend) load(js + BJ);
    if constexpr (TF32) {
      tc.mma(&As[0][0], BM + 4, &Bs[0][0]);
    } else {
#pragma unroll
      for (int k = 0; k < BJ; ++k) {
        const float4 b = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float a = As[k][ty * 4 + i];
          acc[i][0] += a * b.x;
          acc[i][1] += a * b.y;
          acc[i][2] += a * b.z;
          acc[i][3] += a * b.w;
        }
      }
    }
    __syncthreads();
  }
  if constexpr (TF32) {
    __shared__ __align__(32) float Cs[BM][BQ + 4];
    tc.store(&Cs[0][0], BQ + 4);
    __syncthreads();
    for (int i = 0; i < 4; ++i)
      for (int t = 0; t < 4; ++t) acc[i][t] = Cs[ty * 4 + i][tx * 4 + t];
  }
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < 4; ++t) {
      const int m = m0 + ty * 4 + i, q = q0 + tx * 4 + t;
      if (m < M && q < Q) atomicAdd(&dw[m * Q + q], acc[i][t]);
    }
}
// --8<-- [end:wgrad]

// --8<-- [start:wgrad_c1]
// The first convolution has one input channel, so its weight gradient is a 32 x 9 matrix: a GEMM
// tile of 64 x 64 would waste most of its work. Each thread takes one pixel at a time, reads its 3x3
// neighbourhood once and multiplies it with the gradient of kC1Group output channels there, keeping
// kC1Group x 9 sums in registers (one channel per block re-read the neighbourhood, and re-did the index
// arithmetic, for every channel). Blocks: (slice of images, group of channels), 256 threads; each
// writes its sums to part[slice][m][9], and reduce_parts adds the slices in a fixed order (no atomics:
// the same bits in every run).
constexpr int kC1Group = 8;

__global__ void __launch_bounds__(256) conv3x3_wgrad_c1(const float* __restrict__ dout, const float* __restrict__ in,
                                                        float* __restrict__ part, int N, int M, int H, int W,
                                                        int images_per_block) {
  const int m0 = blockIdx.y * kC1Group, HW = H * W;
  const int nbegin = blockIdx.x * images_per_block, nend = min(N, nbegin + images_per_block);
  float acc[kC1Group][9] = {};
  for (int j = nbegin * HW + threadIdx.x; j < nend * HW; j += blockDim.x) {
    const int n = j / HW, p = j - n * HW, y = p / W, x = p - y * W;
    const float* img = in + static_cast<size_t>(n) * HW;
    float around[9];
#pragma unroll
    for (int rs = 0; rs < 9; ++rs) {
      const int iy = y + rs / 3 - 1, ix = x + rs % 3 - 1;
      around[rs] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? img[iy * W + ix] : 0.0f;
    }
    const float* g = dout + (static_cast<size_t>(n) * M + m0) * HW + p;
#pragma unroll
    for (int k = 0; k < kC1Group; ++k) {
      const float gk = g[static_cast<size_t>(k) * HW];
#pragma unroll
      for (int rs = 0; rs < 9; ++rs) acc[k][rs] += gk * around[rs];
    }
  }
  // The block's sums: each warp's by shuffles, then the eight warps' in shared memory, in a fixed order.
  __shared__ float warp_sums[8][kC1Group * 9];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int k = 0; k < kC1Group; ++k) {
#pragma unroll
    for (int rs = 0; rs < 9; ++rs) {
      float v = acc[k][rs];
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) warp_sums[warp][k * 9 + rs] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x < kC1Group * 9) {
    float total = 0.0f;
    for (int w = 0; w < 8; ++w) total += warp_sums[w][threadIdx.x];
    part[(static_cast<size_t>(blockIdx.x) * M + m0) * 9 + threadIdx.x] = total;  // threadIdx.x = k * 9 + rs
  }
}
// --8<-- [end:wgrad_c1]

// --- launchers ------------------------------------------------------------------------------------

inline int sm_count() {
  static int sms = 0;
  if (!sms) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  }
  return sms;
}

template <int BM, bool FLIP, bool STATS>
inline void launch_conv(bool tf32, const float* in, const float* w, float* out, int N, int Cin, int M, int H, int W,
                        cudaStream_t st, double* sum, double* sumsq) {
  // With STATS every block adds its sums with one atomic per channel: a grid of a few blocks per SM,
  // each looping over many tiles, keeps those atomics (all on the same few addresses) few.
  const int tiles = course::ceil_div(N * H * W, kBN);
  const dim3 grid(STATS ? std::min(tiles, 4 * sm_count()) : tiles, course::ceil_div(M, BM));
  if (tf32) conv3x3<BM, FLIP, STATS, true><<<grid, kThreads, 0, st>>>(in, w, out, N, Cin, M, H, W, sum, sumsq);
  else conv3x3<BM, FLIP, STATS, false><<<grid, kThreads, 0, st>>>(in, w, out, N, Cin, M, H, W, sum, sumsq);
  CUDA_CHECK_LAUNCH();
}

template <bool STATS = false>
inline void forward(const float* in, const float* w, float* out, int N, int Cin, int M, int H, int W,
                    cudaStream_t st, double* sum = nullptr, double* sumsq = nullptr, bool tf32 = false) {
  if (M <= 32) launch_conv<32, false, STATS>(tf32, in, w, out, N, Cin, M, H, W, st, sum, sumsq);
  else launch_conv<64, false, STATS>(tf32, in, w, out, N, Cin, M, H, W, st, sum, sumsq);
}

// din[n][c] from dout[n][k]: w is the forward weight [K][C][3][3].
inline void backward_data(const float* dout, const float* w, float* din, int N, int C, int K, int H, int W,
                          cudaStream_t st, bool tf32 = false) {
  if (C <= 32) launch_conv<32, true, false>(tf32, dout, w, din, N, K, C, H, W, st, nullptr, nullptr);
  else launch_conv<64, true, false>(tf32, dout, w, din, N, K, C, H, W, st, nullptr, nullptr);
}

// conv3x3_wgrad_c1's slices of the batch (about 64, fewer than 128) and the floats of their parts.
inline int wgrad_c1_slices(int N) { return course::ceil_div(N, std::max(1, N / 64)); }
inline size_t wgrad_c1_part_floats(int max_batch, int K) {
  int most = 1;
  for (int n = 1; n <= max_batch; ++n) most = std::max(most, wgrad_c1_slices(n));
  return static_cast<size_t>(most) * K * 9;
}

// dw[k][c][3][3] (written) from dout[n][k] and in[n][c]. With one input channel (C == 1), part holds
// wgrad_c1_part_floats(N, K) floats.
inline void backward_weight(const float* dout, const float* in, float* dw, int N, int C, int K, int H, int W,
                            cudaStream_t st, bool tf32 = false, float* part = nullptr) {
  if (C == 1) {
    if (!part) {
      std::fprintf(stderr, "error: igemm::backward_weight with one input channel needs its part buffer\n");
      std::exit(course::kExitFail);
    }
    if (K % kC1Group != 0) {
      std::fprintf(stderr, "error: igemm::backward_weight with one input channel needs a multiple of %d output "
                   "channels, got %d\n", kC1Group, K);
      std::exit(course::kExitFail);
    }
    const int per_block = std::max(1, N / 64), slices = wgrad_c1_slices(N);
    conv3x3_wgrad_c1<<<dim3(slices, K / kC1Group), 256, 0, st>>>(dout, in, part, N, K, H, W, per_block);
    CUDA_CHECK_LAUNCH();
    reduce_parts(part, slices, K * 9, dw, st);
  } else {
    CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(float) * K * C * 9, st));
    const int J = N * H * W, tiles = course::ceil_div(C * 9, 64) * course::ceil_div(K, 64);
    const int slices = std::max(1, std::min(course::ceil_div(J, 256), 640 / tiles));
    const int slice = course::ceil_div(course::ceil_div(J, slices), 16) * 16;
    const dim3 grid(course::ceil_div(C * 9, 64), course::ceil_div(K, 64), course::ceil_div(J, slice));
    if (tf32) conv3x3_wgrad<true><<<grid, kThreads, 0, st>>>(dout, in, dw, N, C, K, H, W, slice);
    else conv3x3_wgrad<false><<<grid, kThreads, 0, st>>>(dout, in, dw, N, C, K, H, W, slice);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace igemm
}  // namespace mnist
