// w4a16_gemv.cu: a decode GEMV with weight-only INT4 weights (W4A16), y[b][n] = sum_k x[b][k] W[n][k]:
//   x   bf16 [batch][K], batch 0 to 8 (the tokens of a decode step)
//   W   4-bit unsigned q in 0..15, eight per uint32 along K, the lowest nibble first (k = 8 word + i sits in
//       bits 4i..4i+3 of word `word`), [N][K / 8] words; symmetric with zero point 8 and one bf16 scale per
//       group of 128 along K:  W[n][k] = (q - 8) * scale[n][k / 128]
//   y   bf16 [batch][N], accumulated in fp32 and rounded once.
// K must be a multiple of the group (128); N is any size from 1.
//
// Two variants (--variant; the default is fp32):
//   fp32  w4a16_gemv      CUDA cores: each nibble to an fp32 weight (shift, LOP3, FADD), one FMA per row of x
//   mma   w4a16_gemv_mma  tensor cores: nibble pairs to bf16 (LOP3, HSUB2), mma.sync m16n8k16 with the
//                         16 rows of W as M and the batch as N, so a weight costs the same at any batch
//
// Taught in docs/serving/w4a16.md; its peers are in w4a16_torch.py (the bf16 GEMV on the dequantised
// weights through cuBLAS, PyTorch's int4 kernel, torch.compile of dequantise-then-matmul).
// Build: python -m course.toolchain build-all 1 kernels/serving/w4a16_gemv.cu
// Run:   ./build/serving/w4a16_gemv --n 4096 --k 4096 --batch 1    (checks against float64)
//        ./build/serving/w4a16_gemv --variant mma                  (the tensor-core variant; all: both)
//        ./build/serving/w4a16_gemv --bench                        (checks and times both against a copy)
//
// course: gpu
// course: run --n 4096 --k 4096 --batch 1 --seed 91 --variant all
// course: run --n 11 --k 128 --batch 3 --seed 92
// course: run --n 1 --k 128 --batch 1 --seed 93
// course: run --n 14336 --k 4096 --batch 8 --seed 94
// course: run --n 4097 --k 1024 --batch 2 --seed 95
// course: run --n 4096 --k 4096 --batch 0 --seed 96
// course: run --n 257 --k 512 --batch 3 --seed 97 --plant zeros-small
// course: run --n 11 --k 128 --batch 3 --seed 102 --variant mma
// course: run --n 1 --k 128 --batch 1 --seed 103 --variant mma
// course: run --n 14336 --k 4096 --batch 8 --seed 104 --variant mma
// course: run --n 4097 --k 1024 --batch 2 --seed 105 --variant mma
// course: run --n 9001 --k 640 --batch 5 --seed 106 --variant mma
// course: run --n 4099 --k 14336 --batch 7 --seed 107 --variant mma
// course: run --n 31 --k 256 --batch 6 --seed 110 --variant mma
// course: run --n 2049 --k 384 --batch 4 --seed 111 --variant mma
// course: run --n 4096 --k 4096 --batch 0 --seed 108 --variant mma
// course: run --n 257 --k 512 --batch 3 --seed 109 --variant mma --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/mma.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "bf16_checks.cuh"
#include "bf16_vectors.cuh"

constexpr int kGroup = 128;          // weights per scale along K
constexpr int kWeightsPerLoad = 32;  // one 16-byte load of packed weights: four words of eight nibbles
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxBatch = 8;

// --8<-- [start:reference]
// float64 reference from the same packed nibbles, scales and bf16 x. sum_abs[b][n] = sum |x w|, the size
// of the terms, from which the check's tolerance for the fp32 accumulation is computed.
static int nibble(const std::vector<uint32_t>& w, size_t row_words, int n, int k) {
  return static_cast<int>((w[n * row_words + k / 8] >> (4 * (k % 8))) & 0xFu);
}

static void reference(const std::vector<uint32_t>& w, const std::vector<float>& scale, const std::vector<float>& x,
                      int batch, int n_rows, int k_len, std::vector<double>& y, std::vector<double>& sum_abs) {
  const size_t row_words = k_len / 8, groups = k_len / kGroup;
  y.assign(static_cast<size_t>(batch) * n_rows, 0.0);
  sum_abs.assign(y.size(), 0.0);
  std::vector<double> wrow(k_len);
  for (int n = 0; n < n_rows; ++n) {
    for (int k = 0; k < k_len; ++k)
      wrow[k] = (nibble(w, row_words, n, k) - 8) * double(scale[n * groups + k / kGroup]);
    for (int b = 0; b < batch; ++b) {
      double s = 0, a = 0;
      for (int k = 0; k < k_len; ++k) {
        const double t = double(x[static_cast<size_t>(b) * k_len + k]) * wrow[k];
        s += t, a += std::fabs(t);
      }
      y[static_cast<size_t>(b) * n_rows + n] = s, sum_abs[static_cast<size_t>(b) * n_rows + n] = a;
    }
  }
}
// --8<-- [end:reference]

// --8<-- [start:dequant]
// q - 8 as fp32 from nibble i of a word, without a conversion instruction: 2^23 is the power of two at
// which fp32's last mantissa bit is worth 1, so OR-ing q into the low mantissa bits of 2^23 (0x4B000000)
// gives the float 2^23 + q exactly, and subtracting 2^23 + 8 leaves q - 8 exactly: a shift, one LOP3 and
// one FADD, all full-rate, where an integer-to-float conversion (I2F) gives 16 results per clock per SM in
// the CUDA Programming Guide's throughput table: an eighth of the fp32 FMA rate on an H100, a quarter on an A100.
__device__ __forceinline__ float nibble_minus_8(uint32_t word, int i) {
  return __uint_as_float(0x4B000000u | ((word >> (4 * i)) & 0xFu)) - 8388616.0f;
}
// --8<-- [end:dequant]

// --8<-- [start:kernel]
// Each warp owns kRows consecutive output rows, for every row of x. A step: each lane loads 16 bytes
// (32 weights, all in one group of 128) of each of its rows, coalesced (the warp reads 512 contiguous
// bytes of a row), and the next step's 16 bytes are loaded before this step's are used, so that two loads
// per row are in flight. Each weight is dequantised once and used for every row of x; each 16 bytes of x
// (eight values, read through L1, where all warps of an SM find them) are used for every row of W. The
// lane's sum over its 32 weights is scaled once by the group's scale, and the warp reduces its lanes'
// sums with shuffles. A warp past the last row reads row n - 1 again and writes nothing.
template <int kBatch, int kRows>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    w4a16_gemv(const uint4* __restrict__ w, const __nv_bfloat16* __restrict__ scale,
               const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int n, int k) {
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarpsPerBlock + threadIdx.x / 32) * kRows;
  if (row0 >= n) return;
  const int loads = k / kWeightsPerLoad, groups = k / kGroup;  // per row
  size_t row[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) row[r] = static_cast<size_t>(min(row0 + r, n - 1));

  uint4 cur[kRows] = {}, next[kRows] = {};
  float cur_scale[kRows] = {}, next_scale[kRows] = {};
  auto load = [&](int u, uint4 (&packed)[kRows], float (&s)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      packed[r] = w[row[r] * loads + u];
      s[r] = __bfloat162float(scale[row[r] * groups + u / (kGroup / kWeightsPerLoad)]);
    }
  };
  if (lane < loads) load(lane, cur, cur_scale);

  float acc[kRows][kBatch] = {};
  for (int u = lane; u < loads; u += 32) {
    if (u + 32 < loads) load(u + 32, next, next_scale);
    float part[kRows][kBatch] = {};  // this step's sums, before the group's scale
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // the four words of the 16-byte load: k = 32 u + 8 j + i
      float wq[kRows][8];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint32_t word = j == 0 ? cur[r].x : j == 1 ? cur[r].y : j == 2 ? cur[r].z : cur[r].w;
#pragma unroll
        for (int i = 0; i < 8; ++i) wq[r][i] = nibble_minus_8(word, i);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        float xv[8];
        unpack8(reinterpret_cast<const uint4*>(x + static_cast<size_t>(b) * k)[4 * u + j], xv);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) part[r][b] = fmaf(xv[i], wq[r][i], part[r][b]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) acc[r][b] = fmaf(cur_scale[r], part[r][b], acc[r][b]);
      cur[r] = next[r], cur_scale[r] = next_scale[r];
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float v = acc[r][b];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0 && row0 + r < n) y[static_cast<size_t>(b) * n + row0 + r] = __float2bfloat16(v);
    }
}
// --8<-- [end:kernel]

// --8<-- [start:dequant_pairs]
// Two weights at once as a bf16 pair, for the tensor cores: nibbles 0 and 4 of `word` (bits 0-3 and
// 16-19) OR-ed into the mantissas of the bf16 pair 128, 128 (0x43004300; in bf16, 2^7 is where the last
// mantissa bit is worth 1) give 128 + q in each half, exactly, with one LOP3; one packed subtraction of
// 136, 136 (0x43084308) leaves q - 8, exact in bf16 (four significant bits). Shifting the word by 4 p
// first gives nibbles p and p + 4. The scale is not applied here: (q - 8) s needs up to twelve
// significant bits, more than bf16's eight, so the kernel multiplies a group's fp32 sum by it instead.
__device__ __forceinline__ uint32_t nibble_pair_minus_8(uint32_t word, int shift) {
  const uint32_t biased = ((word >> shift) & 0x000F000Fu) | 0x43004300u, bias = 0x43084308u;
  const __nv_bfloat162 pair = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased),
                                      *reinterpret_cast<const __nv_bfloat162*>(&bias));
  return *reinterpret_cast<const uint32_t*>(&pair);
}
// --8<-- [end:dequant_pairs]

// --8<-- [start:kernel_mma]
// The tensor-core variant. A block owns 16 output rows (the mma's M) and its kWarps warps split K
// between them: warp w takes the groups w, w + kWarps, ... The batch (up to 8 rows of x) is the
// mma's N, so each weight is read, dequantised and multiplied once whatever the batch. Lane (g, t)
// loads 16 bytes of row g and 16 of row g + 8 per group (32 weights each; the four lanes of a row read
// its group's 64 contiguous bytes), two groups ahead of the one it multiplies, and 64 bytes of x's row g
// (through L1, where every block of the SM finds x) when it multiplies. The mma's k order is free as
// long as A and B agree, so the lane puts the pair of nibbles (p, p + 4) that one LOP3 gives where the
// mma expects k = 2t, 2t + 1, and permutes x to match (PRMT). A group's 128 products are summed in fp32
// by eight mmas, then multiplied by the row's scale; the warps' sums meet in shared memory. Lanes past
// the batch read x's last row: they only feed columns of D that are never written.
template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    w4a16_gemv_mma(const uint4* __restrict__ w, const __nv_bfloat16* __restrict__ scale,
                   const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int batch, int n, int k) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int groups = k / kGroup, loads = k / kWeightsPerLoad;  // per row
  // This lane's two rows of A (a block past the last row reads row n - 1 again and writes nothing).
  const size_t row_a = static_cast<size_t>(min(blockIdx.x * 16 + g, n - 1));
  const size_t row_b = static_cast<size_t>(min(blockIdx.x * 16 + g + 8, n - 1));
  const uint4* x_row = reinterpret_cast<const uint4*>(x + static_cast<size_t>(min(g, batch - 1)) * k);

  struct Packed {  // one group's weights and scales for this lane
    uint4 lo, hi;
    float scale_lo, scale_hi;
  };
  auto load = [&](int u, Packed& s) {
    if (u >= groups) return;
    s.lo = w[row_a * loads + 4 * u + t];
    s.hi = w[row_b * loads + 4 * u + t];
    s.scale_lo = __bfloat162float(scale[row_a * groups + u]);
    s.scale_hi = __bfloat162float(scale[row_b * groups + u]);
  };

  float acc[4] = {};  // D's (row g, batch 2t), (row g, 2t + 1), (row g + 8, 2t), (row g + 8, 2t + 1)
  Packed cur{}, ahead1{}, ahead2{};
  load(warp, cur);
  load(warp + kWarps, ahead1);
  for (int u = warp; u < groups; u += kWarps) {
    load(u + 2 * kWarps, ahead2);
    uint4 xv[4];  // x at k = 128 u + 32 t + 8 j + 0..7: (x0, x1), (x2, x3), (x4, x5), (x6, x7)
#pragma unroll
    for (int j = 0; j < 4; ++j) xv[j] = x_row[16 * u + 4 * t + j];
    float d[4] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // word j of the lane's 16 bytes
      const uint32_t lo = j == 0 ? cur.lo.x : j == 1 ? cur.lo.y : j == 2 ? cur.lo.z : cur.lo.w;
      const uint32_t hi = j == 0 ? cur.hi.x : j == 1 ? cur.hi.y : j == 2 ? cur.hi.z : cur.hi.w;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // nibbles (2h, 2h + 4) at k = 2t, 2t + 1; (2h + 1, 2h + 5) at 2t + 8, 2t + 9
        const uint32_t a[4] = {nibble_pair_minus_8(lo, 8 * h), nibble_pair_minus_8(hi, 8 * h),
                               nibble_pair_minus_8(lo, 8 * h + 4), nibble_pair_minus_8(hi, 8 * h + 4)};
        const uint32_t x_first = h == 0 ? xv[j].x : xv[j].y, x_second = h == 0 ? xv[j].z : xv[j].w;
        course::mma_bf16_16816(d, a, __byte_perm(x_first, x_second, 0x5410),
                               __byte_perm(x_first, x_second, 0x7632));
      }
    }
    acc[0] = fmaf(cur.scale_lo, d[0], acc[0]), acc[1] = fmaf(cur.scale_lo, d[1], acc[1]);
    acc[2] = fmaf(cur.scale_hi, d[2], acc[2]), acc[3] = fmaf(cur.scale_hi, d[3], acc[3]);
    cur = ahead1, ahead1 = ahead2;
  }

  __shared__ float partial[kWarps][32][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) partial[warp][lane][i] = acc[i];
  __syncthreads();
  if (threadIdx.x >= 128) return;  // one thread per output of the block's 16 x 8 tile
  const int from = threadIdx.x / 4, i = threadIdx.x % 4;  // output i of lane `from`
  float sum = 0;
#pragma unroll
  for (int v = 0; v < kWarps; ++v) sum += partial[v][from][i];
  const int row = blockIdx.x * 16 + from / 4 + 8 * (i / 2), b = 2 * (from % 4) + i % 2;
  if (row < n && b < batch) y[static_cast<size_t>(b) * n + row] = __float2bfloat16(sum);
}
// --8<-- [end:kernel_mma]

static void launch_mma(const uint32_t* w, const __nv_bfloat16* scale, const __nv_bfloat16* x, __nv_bfloat16* y,
                       int batch, int n, int k) {
  if (batch == 0) return;
  if (batch < 0 || batch > kMaxBatch) {
    std::fprintf(stderr, "error: batch must be 0 to %d, got %d\n", kMaxBatch, batch);
    std::exit(course::kExitFail);
  }
  // One block per 16 rows. Eight warps a block where there are few blocks (N = 4096: 256 blocks, about
  // two per SM of an H100), so that enough loads are in flight; four where eight would not fit on the
  // GPU at once (N = 14336: 896 blocks, which fit in one wave of up to seven four-warp blocks per SM).
  static int sms = 0;
  if (sms == 0) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  }
  const int blocks = course::ceil_div(n, 16);
  const uint4* packed = reinterpret_cast<const uint4*>(w);
  if (blocks < 4 * sms)
    w4a16_gemv_mma<8><<<static_cast<unsigned>(blocks), 8 * 32>>>(packed, scale, x, y, batch, n, k);
  else
    w4a16_gemv_mma<4><<<static_cast<unsigned>(blocks), 4 * 32>>>(packed, scale, x, y, batch, n, k);
  CUDA_CHECK_LAUNCH();
}

// Two rows per warp: 2,048 warps for N = 4096, enough to keep two loads per row in flight on every SM of
// an H100 (132 SMs, about 15 warps each). Zero rows of x launch nothing: an empty grid is a launch error.
constexpr int kRowsPerWarp = 2;

template <int kBatch>
static void launch_batch(const uint32_t* w, const __nv_bfloat16* scale, const __nv_bfloat16* x, __nv_bfloat16* y,
                         int n, int k) {
  const int warps = course::ceil_div(n, kRowsPerWarp);
  const unsigned blocks = static_cast<unsigned>(course::ceil_div(warps, kWarpsPerBlock));
  w4a16_gemv<kBatch, kRowsPerWarp>
      <<<blocks, kWarpsPerBlock * 32>>>(reinterpret_cast<const uint4*>(w), scale, x, y, n, k);
  CUDA_CHECK_LAUNCH();
}

static void launch(const uint32_t* w, const __nv_bfloat16* scale, const __nv_bfloat16* x, __nv_bfloat16* y,
                   int batch, int n, int k) {
  switch (batch) {
    case 0: return;
    case 1: return launch_batch<1>(w, scale, x, y, n, k);
    case 2: return launch_batch<2>(w, scale, x, y, n, k);
    case 3: return launch_batch<3>(w, scale, x, y, n, k);
    case 4: return launch_batch<4>(w, scale, x, y, n, k);
    case 5: return launch_batch<5>(w, scale, x, y, n, k);
    case 6: return launch_batch<6>(w, scale, x, y, n, k);
    case 7: return launch_batch<7>(w, scale, x, y, n, k);
    case 8: return launch_batch<8>(w, scale, x, y, n, k);
    default:
      std::fprintf(stderr, "error: batch must be 0 to %d, got %d\n", kMaxBatch, batch);
      std::exit(course::kExitFail);
  }
}

// The two variants, chosen with --variant: fp32 (w4a16_gemv, the CUDA cores), mma (w4a16_gemv_mma) or
// all (each in turn; --bench checks and times all of them).
using Launcher = void (*)(const uint32_t*, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int, int, int);
struct Variant {
  const char* name;    // --variant's value
  const char* checks;  // its checks' names begin with this
  const char* bench;   // its benchmark row
  Launcher launch;
};
constexpr Variant kVariants[] = {
    {"fp32", "w4a16", "w4a16_gemv (int4 g128, bf16 x)", launch},
    {"mma", "w4a16_mma", "w4a16_gemv_mma (int4 g128, bf16 x, tensor cores)", launch_mma},
};

// Random nibbles (every value 0..15 equally likely), scales uniform in [0.005, 0.015] rounded to bf16.
struct Weights {
  std::vector<uint32_t> packed;  // [N][K / 8]
  std::vector<float> scale;      // [N][K / 128], bf16 values
  std::vector<__nv_bfloat16> scale_b;
};

static Weights random_weights(int n, int k, uint64_t seed) {
  Weights wt;
  wt.packed.resize(static_cast<size_t>(n) * (k / 8));
  std::mt19937_64 rng(seed);
  for (uint32_t& word : wt.packed) word = static_cast<uint32_t>(rng());
  wt.scale.resize(static_cast<size_t>(n) * (k / kGroup));
  course::fill_uniform(wt.scale, seed + 1, 0.005f, 0.015f);
  wt.scale_b.resize(wt.scale.size());
  for (size_t i = 0; i < wt.scale.size(); ++i) {
    wt.scale_b[i] = __float2bfloat16(wt.scale[i]);
    wt.scale[i] = __bfloat162float(wt.scale_b[i]);
  }
  return wt;
}

// Zero rows of x: the launcher must return without touching y (a sentinel pattern stays) and without a
// launch error.
static bool check_empty(const Variant& v, int n, int k) {
  const size_t ny = static_cast<size_t>(n);
  uint32_t* d_w = course::device_alloc<uint32_t>(static_cast<size_t>(n) * (k / 8));
  __nv_bfloat16* d_scale = course::device_alloc<__nv_bfloat16>(static_cast<size_t>(n) * (k / kGroup));
  __nv_bfloat16* d_x = course::device_alloc<__nv_bfloat16>(k);
  __nv_bfloat16* d_y = course::device_alloc<__nv_bfloat16>(ny);
  CUDA_CHECK(cudaMemset(d_y, 0x5A, ny * sizeof(__nv_bfloat16)));
  v.launch(d_w, d_scale, d_x, d_y, 0, n, k);
  CUDA_CHECK(cudaDeviceSynchronize());
  char name[64];
  std::snprintf(name, sizeof(name), "%s_b0_n%d_k%d_launches_nothing", v.checks, n, k);
  const bool ok = check_sentinel_unchanged(name, d_y, ny);
  course::device_free({d_w, d_scale, d_x, d_y});
  return ok;
}

// x uniform in [-1, 1] rounded to bf16, every third row of x 2^-20 times smaller (its outputs are small and
// must be held to their own size), and with three or more rows a NaN in the last row (its outputs must all
// be NaN); y poisoned with NaN before the run. Each output must lie within one bf16 rounding (2^-8
// relative, and a little for the fp32 arithmetic before it) of the float64 value, plus the fp32
// accumulation's error bound computed from its own terms, sum_atol(sum |x w|): the kernel adds at most
// 32 + K / 1024 + 6 roundings along any path, fewer than 8 sqrt(K) for every K from 128.
static bool check(const Variant& v, int batch, int n, int k, uint64_t seed, bool plant) {
  const Weights wt = random_weights(n, k, seed);
  std::vector<float> x(static_cast<size_t>(batch) * k);
  course::fill_uniform(x, seed + 2);
  course::quiet_rows(x, batch, k);
  if (batch >= 3) x[static_cast<size_t>(batch - 1) * k + k / 2] = NAN;
  std::vector<__nv_bfloat16> x_b(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_b[i] = __float2bfloat16(x[i]), x[i] = __bfloat162float(x_b[i]);

  std::vector<double> want, sum_abs;
  reference(wt.packed, wt.scale, x, batch, n, k, want, sum_abs);
  const std::vector<double> atol = course::sum_atol(sum_abs, k, 0x1p-23);

  uint32_t* d_w = course::to_device(wt.packed);
  __nv_bfloat16* d_scale = course::to_device(wt.scale_b);
  __nv_bfloat16* d_x = course::to_device(x_b);
  __nv_bfloat16* d_y = course::device_alloc<__nv_bfloat16>(want.size());
  course::poison(d_y, want.size() * sizeof(__nv_bfloat16));
  v.launch(d_w, d_scale, d_x, d_y, batch, n, k);
  const std::vector<__nv_bfloat16> got_b = course::to_host(d_y, want.size());
  course::device_free({d_w, d_scale, d_x, d_y});

  char name[96];
  std::snprintf(name, sizeof(name), "%s_b%d_n%d_k%d", v.checks, batch, n, k);
  return check_bf16_with_nans(name, got_b, want, atol, 0x1.04p-8, plant ? 1e-3 : 0.0);
}

// --8<-- [start:bench]
// Bytes: the packed weights (half a byte each), the scales (2 bytes per 128 weights), x read and y written.
// The copy reference copies half of those bytes into the other half of one buffer: the same bytes moved. Every
// variant the GPU runs is a row (the tensor-core one needs compute capability 8.0).
static void bench_case(int batch, int n, int k, bool has_mma) {
  const size_t words = static_cast<size_t>(n) * (k / 8), scales = static_cast<size_t>(n) * (k / kGroup);
  const double bytes = 4.0 * words + 2.0 * scales + 2.0 * batch * k + 2.0 * batch * n;
  uint32_t* d_w = course::device_alloc<uint32_t>(words);
  __nv_bfloat16* d_scale = course::device_alloc<__nv_bfloat16>(scales);
  __nv_bfloat16* d_x = course::device_alloc<__nv_bfloat16>(static_cast<size_t>(batch) * k);
  __nv_bfloat16* d_y = course::device_alloc<__nv_bfloat16>(static_cast<size_t>(batch) * n);
  CUDA_CHECK(cudaMemset(d_w, 0x5A, 4 * words));
  CUDA_CHECK(cudaMemset(d_scale, 0x3C, 2 * scales));  // 0x3C3C: a bf16 near 0.01
  CUDA_CHECK(cudaMemset(d_x, 0x3C, 2 * static_cast<size_t>(batch) * k));
  const size_t half_bytes = static_cast<size_t>(bytes / 2);
  char* copy_buf = course::device_alloc<char>(2 * half_bytes);
  char case_name[48];
  std::snprintf(case_name, sizeof(case_name), "b%d n%d k%d", batch, n, k);
  for (const Variant& v : kVariants) {
    if (v.launch == launch_mma && !has_mma) continue;
    const float ms = course::time_kernel_ms([&] { v.launch(d_w, d_scale, d_x, d_y, batch, n, k); });
    course::print_bench(case_name, v.bench, ms, bytes, 2.0 * batch * n * k, false,
                        {{"batch", batch}, {"n", n}, {"k", k}});
  }
  const float copy_ms = course::time_kernel_ms([&] {
    CUDA_CHECK(cudaMemcpy(copy_buf + half_bytes, copy_buf, half_bytes, cudaMemcpyDeviceToDevice));
  });
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * half_bytes, 0.0, true,
                      {{"batch", batch}, {"n", n}, {"k", k}});
  course::device_free({d_w, d_scale, d_x, d_y, copy_buf});
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int n = static_cast<int>(args.get_int("--n", 4096, 1, 1 << 17));
  const int k = static_cast<int>(args.get_int("--k", 4096, 1, 1 << 16));
  const int batch = static_cast<int>(args.get_int("--batch", 1, 0, kMaxBatch));
  const std::string variant_name = args.get_str("--variant", "fp32");
  const course::RunOptions run(args);
  args.finish();
  std::vector<const Variant*> variants;
  bool known = variant_name == "all";
  for (const Variant& v : kVariants) {
    known |= variant_name == v.name;
    if (variant_name == v.name || variant_name == "all" || run.bench) variants.push_back(&v);
  }
  if (!known) {
    std::fprintf(stderr, "error: --variant must be fp32, mma or all, got '%s'\n", variant_name.c_str());
    return course::kExitFail;
  }
  course::require_multiple("--k", k, kGroup, "the quantisation group: one scale per 128 weights along K");
  if (static_cast<double>(n) * k > (1LL << 30)) {
    std::fprintf(stderr, "error: --n x --k must be at most 2^30 weights\n");
    return course::kExitFail;
  }
  if (run.plant && batch < 2) {
    std::fprintf(stderr, "error: --plant needs a quiet row of x to plant zeros in (--batch of at least 2)\n");
    return course::kExitFail;
  }
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (variant_name == "mma")
    course::require_compute_capability(8, 0, "the mma variant multiplies on bf16 tensor cores (mma.sync m16n8k16)");
  bool ok = true;
  for (const Variant* v : variants) {
    if (v->launch == launch_mma && major < 8) {
      std::printf("NOTE the mma variant needs compute capability 8.0 (bf16 mma.sync); not run on this GPU\n");
      continue;
    }
    ok &= batch == 0 ? check_empty(*v, n, k) : check(*v, batch, n, k, run.seed, run.plant);
  }
  if (ok && run.bench && !run.plant)
    for (const int b : {1, 4})
      for (const auto& [bn, bk] : {std::pair{4096, 4096}, std::pair{14336, 4096}, std::pair{4096, 14336}})
        bench_case(b, bn, bk, major >= 8);
  return ok ? 0 : course::kExitFail;
}
