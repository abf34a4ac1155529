// flash_fwd.cuh: FlashAttention-2-style fused attention forward, O = softmax(scale * Q K^T + mask) V,
// and the logsumexp of each row's scaled scores (the backward pass needs it).
//
// Taught in docs/attention/flash-forward.md. Included by flash_fwd.cu (checks and times both
// versions) and flash_bwd.cu (runs v2 to get O and the logsumexp). Inputs Q, K, V and output O are
// bf16, [batch][heads][seq][dim] with dim 64 or 128; key_len (one int per batch entry) masks the
// padding keys; `causal` masks keys after the query. A fully masked row gets zeros and logsumexp +inf.
//   v1 flash_fwd_v1   plain FP32 arithmetic: one warp per query row, K and V tiles in shared memory,
//                     the online softmax tile by tile (the algorithm, without tensor cores)
//   v2 flash_fwd_v2   tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate): 64 query rows per
//                     block of 4 warps (v3: the same kernel, 128 rows per block of 8 warps), Q in
//                     registers, K/V tiles of 64 keys double-buffered in shared memory with cp.async,
//                     P kept in registers as the next mma's A operand
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include "../common/check.cuh"
#include "../common/mma.cuh"
#include "../memory-model/softmax.cuh"  // the -inf rules (softmax_base, softmax_inv_sum), warp_max/warp_add

namespace flash {

using bf16 = __nv_bfloat16;

struct Params {
  const bf16 *q, *k, *v;
  bf16* o;
  float* lse;          // natural-log logsumexp of each row's scaled scores, +inf for a fully masked row
  const int* key_len;  // per batch entry
  int heads, seq;
  float scale_log2;    // scale * log2(e): exp(scale * s - m) = exp2(s * scale_log2 - m') with m' in log2 units
  bool causal;
};

constexpr float kLn2 = 0.693147180559945309f;
constexpr float kLog2e = 1.44269504088896341f;

// --8<-- [start:v1]
// v1: plain FP32. Each warp owns one query row; the block's kV1Rows rows share K and V tiles of
// kV1Tile keys, staged in shared memory as floats. Per tile, lane j computes key j's score
// (kV1Tile == 32), the warp takes the tile's maximum, rescales what it has so far once, and adds the
// tile's contribution: the online softmax, a tile at a time.
constexpr int kV1Rows = 8, kV1Tile = 32;

template <int D>
__global__ void __launch_bounds__(kV1Rows * 32) flash_fwd_v1(Params p) {
  __shared__ float q_s[kV1Rows][D];
  __shared__ float k_s[kV1Tile][D + 1];  // +1: lane j reads row j, column c: stride D + 1 spreads the banks
  __shared__ float v_s[kV1Tile][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / p.heads;
  const int row0 = blockIdx.x * kV1Rows, i = row0 + warp;  // this warp's query row
  const long long head = 1LL * bh * p.seq * D;
  const int key_len = p.key_len[b];
  for (int t = threadIdx.x; t < kV1Rows * D; t += blockDim.x) {
    const int r = row0 + t / D;
    q_s[t / D][t % D] = r < p.seq ? __bfloat162float(p.q[head + 1LL * r * D + t % D]) : 0.0f;
  }
  constexpr int kPerLane = D / 32;  // lane owns output columns lane, lane + 32, ...
  float acc[kPerLane] = {};
  float m = SOFTMAX_NEG_INF, l = 0.0f;  // running maximum (log2 units) and sum of exp2(score - m)
  // Keys a row of this block can see: with a causal mask, none after the block's last row.
  const int last_key = p.causal ? min(key_len, row0 + kV1Rows) : key_len;
  for (int j0 = 0; j0 < last_key; j0 += kV1Tile) {
    __syncthreads();  // the previous tile is no longer read
    for (int t = threadIdx.x; t < kV1Tile * D; t += blockDim.x) {
      const int j = j0 + t / D;
      const bool in = j < p.seq;
      k_s[t / D][t % D] = in ? __bfloat162float(p.k[head + 1LL * j * D + t % D]) : 0.0f;
      v_s[t / D][t % D] = in ? __bfloat162float(p.v[head + 1LL * j * D + t % D]) : 0.0f;
    }
    __syncthreads();
    const int j = j0 + lane;
    float s = SOFTMAX_NEG_INF;  // masked keys keep -inf
    if (j < key_len && (!p.causal || j <= i)) {
      float dot = 0.0f;
      for (int c = 0; c < D; ++c) dot += q_s[warp][c] * k_s[lane][c];
      s = dot * p.scale_log2;
    }
    const float m_new = fmaxf(m, warp_max(s));
    const float base = softmax_base(m_new);  // the -inf rule: a row with nothing unmasked yet stays 0
    const float alpha = exp2f(m - base);     // rescales everything accumulated at the old maximum
    const float pj = exp2f(s - base);        // 0 for a masked key
    l = l * alpha + warp_add(pj);
    for (int c = 0; c < kPerLane; ++c) acc[c] *= alpha;
    for (int jj = 0; jj < kV1Tile; ++jj) {
      const float pjj = __shfl_sync(0xffffffffu, pj, jj);
      for (int c = 0; c < kPerLane; ++c) acc[c] += pjj * v_s[jj][lane + 32 * c];
    }
    m = m_new;
  }
  if (i >= p.seq) return;
  const float inv = softmax_inv_sum(l);  // fully masked row: l == 0, output zeros
  for (int c = 0; c < kPerLane; ++c) p.o[head + 1LL * i * D + lane + 32 * c] = __float2bfloat16(acc[c] * inv);
  if (lane == 0) p.lse[1LL * bh * p.seq + i] = l == 0.0f ? INFINITY : (m + log2f(l)) * kLn2;
}
// --8<-- [end:v1]

// ---------------------------------------------------------------------------------------------
// v2's building blocks: PTX wrappers for Ampere's cp.async, ldmatrix and mma.sync (sm_80 and newer).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define FLASH_HAS_MMA 1
#endif

// --8<-- [start:ptx]
// cp.async copies 16 bytes global -> shared asynchronously; src_bytes = 0 fills zeros instead
// (rows past the sequence's end: zeros keep 0 * V finite where garbage could be NaN).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
#ifdef FLASH_HAS_MMA
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifdef FLASH_HAS_MMA
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifdef FLASH_HAS_MMA
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ldmatrix.x4: the warp loads four 8x8 bf16 matrices; lane l supplies the address of row l % 8 of
// matrix l / 8 and receives, from each matrix, the two elements of row l / 4, columns 2 (l % 4) and
// 2 (l % 4) + 1 (with .trans: of column l / 4, rows 2 (l % 4) and + 1): exactly mma's fragments.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem_row) {
#ifdef FLASH_HAS_MMA
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem_row) {
#ifdef FLASH_HAS_MMA
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#endif
}

// --8<-- [end:ptx]

// The tensor-core product itself, mma.sync m16n8k16, is kernels/common/mma.cuh's.
using course::mma_bf16_16816;

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

// exp2 on the special-function unit (ex2.approx: about 2 ulp, exp2(-inf) = +0), what exp2f becomes
// under --use_fast_math; the softmax's accuracy is bounded by bf16 P anyway.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The four lanes of a quad (same lane / 4) hold parts of the same two rows' sums, in mma's accumulator
// layout (v2 here, the wgmma kernels of flash_hopper.cu): add them up, and give each row's 1 / sum
// (0 for a fully masked row, whose sum is 0: its output is zeros).
__device__ __forceinline__ void quad_row_sums(float (&l)[2], float (&inv)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    inv[h] = softmax_inv_sum(l[h]);
  }
}

// --8<-- [start:v2_layout]
// v2's tiles. Each warp owns 16 query rows (one mma row-tile); a block of kWarps warps owns
// 16 * kWarps rows (64 or 128: more rows share each K/V tile, fewer blocks fit on an SM). K and V
// stream in tiles of 64 keys through shared memory, two stages of each so that tile n + 1 loads
// while tile n is used. Rows of the shared tiles are padded by 8 bf16 (16 bytes): ldmatrix reads
// 8 rows at one column, and with a row stride of D + 8 elements those rows start 16 bytes apart
// across the 32 banks instead of all in the same 4: no bank conflicts.
constexpr int kBlockN = 64;
template <int D>
struct V2Smem {
  static constexpr int kStride = D + 8;
  bf16 k[2][kBlockN][kStride];
  bf16 v[2][kBlockN][kStride];
};
// --8<-- [end:v2_layout]

// Copy keys [j0, j0 + kBlockN) of K and V into stage `buf` (zeros past seq), then commit the group.
template <int D, int kThreads>
__device__ __forceinline__ void load_kv_tile(V2Smem<D>& sm, int buf, const bf16* k, const bf16* v, int j0, int seq) {
  constexpr int kChunks = kBlockN * D / 8;  // 16-byte chunks per tile
  for (int t = threadIdx.x; t < kChunks; t += kThreads) {
    const int r = t / (D / 8), c = (t % (D / 8)) * 8;
    const int j = j0 + r;
    const int src_bytes = j < seq ? 16 : 0;
    const long long off = 1LL * min(j, seq - 1) * D + c;  // a valid address even when nothing is read
    cp_async16(&sm.k[buf][r][c], k + off, src_bytes);
    cp_async16(&sm.v[buf][r][c], v + off, src_bytes);
  }
  cp_async_commit();
}

// --8<-- [start:v2]
template <int D, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) flash_fwd_v2(Params p) {
#ifdef FLASH_HAS_MMA
  constexpr int kBlockM = 16 * kWarps;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  V2Smem<D>& sm = *reinterpret_cast<V2Smem<D>*>(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int bh = blockIdx.y, b = bh / p.heads;
  // Under a causal mask the last query blocks have the most keys: start them first, so that the
  // short blocks fill the gaps at the end instead of the long ones running alone.
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  const long long head = 1LL * bh * p.seq * D;
  const bf16 *q = p.q + head, *k = p.k + head, *v = p.v + head;
  const int key_len = p.key_len[b];
  const int kv_end = p.causal ? min(key_len, row0 + kBlockM) : key_len;  // no tile wholly above the diagonal
  const int n_tiles = (kv_end + kBlockN - 1) / kBlockN;
  if (n_tiles > 0) load_kv_tile<D, kWarps * 32>(sm, 0, k, v, 0, p.seq);

  // Q stays in registers for the whole loop, already in the A-operand layout (rows past seq: 0).
  const int r_lo = row0 + warp * 16 + g, r_hi = r_lo + 8;  // the two rows this thread holds
  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int c = kk * 16 + half * 8 + 2 * t;
      qf[kk][2 * half] = r_lo < p.seq ? *reinterpret_cast<const unsigned*>(q + 1LL * r_lo * D + c) : 0u;
      qf[kk][2 * half + 1] = r_hi < p.seq ? *reinterpret_cast<const unsigned*>(q + 1LL * r_hi * D + c) : 0u;
    }
  }
  float o[D / 8][4] = {};                               // O accumulator: 16 rows x D, fp32
  float m[2] = {SOFTMAX_NEG_INF, SOFTMAX_NEG_INF};      // running maxima of rows r_lo, r_hi (log2 units)
  float l[2] = {0.0f, 0.0f};                            // this thread's part of the running sums

  for (int n = 0; n < n_tiles; ++n) {
    const int buf = n & 1, j0 = n * kBlockN;
    if (n + 1 < n_tiles) {  // fetch the next tile into the other stage, then wait for this one only
      load_kv_tile<D, kWarps * 32>(sm, buf ^ 1, k, v, j0 + kBlockN, p.seq);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys. K is stored [key][dim], which is
    // B = K^T in the column-major layout mma wants: plain ldmatrix, no transpose.
    float s[kBlockN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        unsigned kf[4];
        ldmatrix_x4(kf, &sm.k[buf][np * 16 + (lane / 16) * 8 + lane % 8][kk * 16 + (lane / 8) % 2 * 8]);
        mma_bf16_16816(s[2 * np], qf[kk], kf[0], kf[1]);
        mma_bf16_16816(s[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    }

    // Scale into log2 units and mask. Only tiles that cross the padding or the diagonal need the
    // per-element test; the rest (most of them) skip it.
    const bool needs_mask = j0 + kBlockN > key_len || (p.causal && j0 + kBlockN - 1 > row0);
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e < 2 ? r_lo : r_hi, key = j0 + nt * 8 + 2 * t + (e & 1);
        float x = s[nt][e] * p.scale_log2;
        if (needs_mask && (key >= key_len || (p.causal && key > row))) x = SOFTMAX_NEG_INF;
        s[nt][e] = x;
        mx[e / 2] = fmaxf(mx[e / 2], x);
      }
    }
    // The four lanes of a quad (same g) hold the same two rows: combine their maxima.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float base = softmax_base(mx[h]);  // the -inf rule: nothing unmasked yet -> base 0, p = 0
      alpha[h] = fast_exp2(m[h] - base);       // rescale what was accumulated at the old maximum
      m[h] = mx[h];
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = fast_exp2(s[nt][e] - softmax_base(m[e / 2]));  // P, still fp32
        sum[e / 2] += s[nt][e];
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= alpha[0], o[dt][1] *= alpha[0];
      o[dt][2] *= alpha[1], o[dt][3] *= alpha[1];
    }

    // O += P V. P never leaves registers: the accumulator fragments of two neighbouring 8-key
    // n-tiles are, element for element, the A fragment of one 16-key k-step; only a conversion
    // to bf16 is needed. V is stored [key][dim], row-major B: ldmatrix .trans gives the fragments.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const unsigned pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        unsigned vf[4];
        ldmatrix_x4_trans(vf, &sm.v[buf][kk * 16 + (lane / 8) % 2 * 8 + lane % 8][dp * 16 + (lane / 16) * 8]);
        mma_bf16_16816(o[2 * dp], pa, vf[0], vf[1]);
        mma_bf16_16816(o[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with stage buf before the next iteration refills it
  }

  // The output is divided by the row sum once, here, not at every tile.
  float inv[2];
  quad_row_sums(l, inv);
  bf16* o_head = p.o + head;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int c = dt * 8 + 2 * t;
    if (r_lo < p.seq)
      *reinterpret_cast<unsigned*>(o_head + 1LL * r_lo * D + c) = pack_bf16(o[dt][0] * inv[0], o[dt][1] * inv[0]);
    if (r_hi < p.seq)
      *reinterpret_cast<unsigned*>(o_head + 1LL * r_hi * D + c) = pack_bf16(o[dt][2] * inv[1], o[dt][3] * inv[1]);
  }
  if (t == 0) {
    if (r_lo < p.seq) p.lse[1LL * bh * p.seq + r_lo] = l[0] == 0.0f ? INFINITY : (m[0] + log2f(l[0])) * kLn2;
    if (r_hi < p.seq) p.lse[1LL * bh * p.seq + r_hi] = l[1] == 0.0f ? INFINITY : (m[1] + log2f(l[1])) * kLn2;
  }
#else
  (void)p;
#endif
}
// --8<-- [end:v2]

// --8<-- [start:launch]
// Version 1 (FP32), 2 (tensor cores, 4 warps = 64 rows per block) or 3 (the same kernel with
// 8 warps = 128 rows per block); D is 64 or 128 (the callers check).
template <int D>
void launch_d(int version, const Params& p, int batch) {
  const int bh = batch * p.heads;
  if (version == 1) {
    flash_fwd_v1<D><<<dim3(course::ceil_div(p.seq, kV1Rows), bh), kV1Rows * 32>>>(p);
    CUDA_CHECK_LAUNCH();
    return;
  }
  // V2Smem is over the default 48 KB for D = 128: opt in, once per kernel (outside any timing).
  const int smem = static_cast<int>(sizeof(V2Smem<D>));
  static const bool opted_in = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_v2<D, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_v2<D, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)opted_in;
  if (version == 2) flash_fwd_v2<D, 4><<<dim3(course::ceil_div(p.seq, 64), bh), 128, smem>>>(p);
  else flash_fwd_v2<D, 8><<<dim3(course::ceil_div(p.seq, 128), bh), 256, smem>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline void launch(int version, const Params& p, int batch, int dim) {
  if (dim == 64) launch_d<64>(version, p, batch);
  else launch_d<128>(version, p, batch);
}
// --8<-- [end:launch]

}  // namespace flash
