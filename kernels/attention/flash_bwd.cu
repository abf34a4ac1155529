// flash_bwd.cu: the backward pass of attention, FlashAttention-2 style: dQ, dK and dV from dO, the
// forward's output O and the logsumexp it saved, recomputing P tile by tile instead of storing it.
// Checked against a float64 reference; timed on the chapter's benchmark.
//
// Taught in docs/attention/backward.md. bf16 Q, K, V, O, dO in, head dimension 64 or 128, causal and
// key-padding masks. Two versions, both after one kernel for delta:
//   bwd_delta  delta_i = rowsum(dO_i o O_i), one warp per row
// Version 1, FP32 arithmetic, fp32 dQ, dK, dV out (the algorithm, without tensor cores):
//   bwd_dkdv   one warp per key j: loops over the query rows that see it, accumulates dK_j and dV_j
//   bwd_dq     one warp per query row i: loops over its keys, accumulates dQ_i (no atomics: P and dP
//              are recomputed once more instead)
// Version 2, tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate), bf16 dQ, dK, dV out:
//   bwd_v2     FlashAttention-2's loop: one block per 128 keys, dK and dV in registers, dQ added to
//              an fp32 buffer with atomicAdd; bwd_dq_convert scales and rounds it to bf16
// Build: nvcc -std=c++17 -O3 -arch=native -o build/attention/flash_bwd kernels/attention/flash_bwd.cu
// Run:   ./build/attention/flash_bwd --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
//        ./build/attention/flash_bwd --bench
//        ./build/attention/flash_bwd --batch 4 --heads 16 --seq 4096 --plant zeros-small   (or tile:
//        version 2's gradients corrupted after the run; passes only if the check rejects them)
// Needs compute capability 8.0 (bf16 mma.sync, ldmatrix and cp.async, in the forward pass it runs first
// and in version 2).
//
// course: gpu
// course: run --batch 3 --heads 2 --seq 127 --dim 64 --padding
// course: run --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 1 --heads 2 --seq 777 --dim 128 --causal
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --plant zeros-small
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --causal --plant tile
// course: bench --bench
// course: invariant faster causal non-causal max-ratio=0.8
#include <algorithm>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "attention_common.cuh"
#include "flash_bwd_common.cuh"
#include "flash_fwd.cuh"

using flash::bf16;

// --8<-- [start:tolerances]
// What each version is held to (attention_common.cuh's criterion: at most twice the error of the
// same computation in its precision, per element and per 16-row group). Both are given the forward's
// bf16 output O, so delta = rowsum(dO o O) carries its rounding in both rounded references.
//   version 1 (fp32 arithmetic, fp32 gradients): nothing else is rounded; dV does not use delta,
//             so its rounded reference is exact and only the tiny floor is left for fp32's error;
//   version 2: P rounded to bf16 before dV = P^T dO, dS rounded to bf16 before dQ = scale dS K and
//             dK = scale dS^T Q, and the gradients rounded to bf16 on the way out.
// --8<-- [end:tolerances]

constexpr int kWarps = 8, kTile = 32;

__device__ inline float dot_warp(const float* a, const float* b, int per_lane) {
  float x = 0.0f;
  for (int c = 0; c < per_lane; ++c) x += a[c] * b[c];
  return warp_add(x);  // softmax.cuh's butterfly: every lane gets the sum
}


// --8<-- [start:dkdv]
// One warp per key j (lane owns columns lane, lane + 32, ...); the block's kWarps keys share tiles
// of kTile query rows (Q, dO, logsumexp, delta) staged in shared memory as floats.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) bwd_dkdv(BwdParams p) {
  constexpr int kPer = D / 32;
  __shared__ float q_s[kTile][D], do_s[kTile][D], lse_s[kTile], delta_s[kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / p.heads, key0 = blockIdx.x * kWarps, j = key0 + warp;
  const long long head = 1LL * bh * p.seq;
  const int key_len = p.key_len[b];
  float kj[kPer], vj[kPer], dk[kPer] = {}, dv[kPer] = {};
  for (int c = 0; c < kPer; ++c) {
    const bool in = j < p.seq;
    kj[c] = in ? __bfloat162float(p.k[(head + j) * D + lane + 32 * c]) : 0.0f;
    vj[c] = in ? __bfloat162float(p.v[(head + j) * D + lane + 32 * c]) : 0.0f;
  }
  // Under a causal mask only rows i >= j see key j: start at the block's first key.
  const int first_row = p.causal ? (key0 / kTile) * kTile : 0;
  for (int i0 = first_row; i0 < p.seq && key0 < key_len; i0 += kTile) {
    __syncthreads();
    for (int t = threadIdx.x; t < kTile * D; t += blockDim.x) {
      const int i = i0 + t / D;
      q_s[t / D][t % D] = i < p.seq ? __bfloat162float(p.q[(head + i) * D + t % D]) : 0.0f;
      do_s[t / D][t % D] = i < p.seq ? __bfloat162float(p.d_out[(head + i) * D + t % D]) : 0.0f;
    }
    for (int t = threadIdx.x; t < kTile; t += blockDim.x) {
      lse_s[t] = i0 + t < p.seq ? p.lse[head + i0 + t] : INFINITY;
      delta_s[t] = i0 + t < p.seq ? p.delta[head + i0 + t] : 0.0f;
    }
    __syncthreads();
    for (int ii = 0; ii < kTile; ++ii) {
      const int i = i0 + ii;
      if (i >= p.seq || j >= key_len || (p.causal && j > i)) continue;  // uniform across the warp
      float qi[kPer], doi[kPer];
      for (int c = 0; c < kPer; ++c) qi[c] = q_s[ii][lane + 32 * c], doi[c] = do_s[ii][lane + 32 * c];
      const float prob = expf(dot_warp(qi, kj, kPer) * p.scale - lse_s[ii]);  // P_ij, recomputed
      const float ds = prob * (dot_warp(doi, vj, kPer) - delta_s[ii]);        // dS_ij
      for (int c = 0; c < kPer; ++c) {
        dv[c] += prob * doi[c];
        dk[c] += ds * qi[c];
      }
    }
  }
  if (j >= p.seq) return;
  for (int c = 0; c < kPer; ++c) {
    p.dk[(head + j) * D + lane + 32 * c] = dk[c] * p.scale;
    p.dv[(head + j) * D + lane + 32 * c] = dv[c];
  }
}
// --8<-- [end:dkdv]

// --8<-- [start:dq]
// One warp per query row i; the block's kWarps rows share tiles of kTile keys (K, V) in shared memory.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) bwd_dq(BwdParams p) {
  constexpr int kPer = D / 32;
  __shared__ float k_s[kTile][D], v_s[kTile][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / p.heads, row0 = blockIdx.x * kWarps, i = row0 + warp;
  const long long head = 1LL * bh * p.seq;
  const int key_len = p.key_len[b];
  const bool row_in = i < p.seq;
  float qi[kPer], doi[kPer], dq[kPer] = {};
  for (int c = 0; c < kPer; ++c) {
    qi[c] = row_in ? __bfloat162float(p.q[(head + i) * D + lane + 32 * c]) : 0.0f;
    doi[c] = row_in ? __bfloat162float(p.d_out[(head + i) * D + lane + 32 * c]) : 0.0f;
  }
  const float lse = row_in ? p.lse[head + i] : INFINITY, delta = row_in ? p.delta[head + i] : 0.0f;
  const int last_key = p.causal ? min(key_len, row0 + kWarps) : key_len;
  for (int j0 = 0; j0 < last_key; j0 += kTile) {
    __syncthreads();
    for (int t = threadIdx.x; t < kTile * D; t += blockDim.x) {
      const int j = j0 + t / D;
      k_s[t / D][t % D] = j < p.seq ? __bfloat162float(p.k[(head + j) * D + t % D]) : 0.0f;
      v_s[t / D][t % D] = j < p.seq ? __bfloat162float(p.v[(head + j) * D + t % D]) : 0.0f;
    }
    __syncthreads();
    for (int jj = 0; jj < kTile; ++jj) {
      const int j = j0 + jj;
      if (!row_in || j >= key_len || (p.causal && j > i)) continue;  // uniform across the warp
      float kj[kPer], vj[kPer];
      for (int c = 0; c < kPer; ++c) kj[c] = k_s[jj][lane + 32 * c], vj[c] = v_s[jj][lane + 32 * c];
      const float prob = expf(dot_warp(qi, kj, kPer) * p.scale - lse);
      const float ds = prob * (dot_warp(doi, vj, kPer) - delta);
      for (int c = 0; c < kPer; ++c) dq[c] += ds * kj[c];
    }
  }
  if (!row_in) return;
  for (int c = 0; c < kPer; ++c) p.dq[(head + i) * D + lane + 32 * c] = dq[c] * p.scale;
}
// --8<-- [end:dq]


// ---------------------------------------------------------------------------------------------
// v2: the same algorithm on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate), as
// FlashAttention-2 does it: one block per tile of kV2Keys keys, K_j and V_j in shared memory for the
// whole loop, dK_j and dV_j accumulated in registers, the query rows streamed by tiles of kV2Rows.
// dQ is summed over key tiles by different blocks: each adds its part to an fp32 buffer with
// atomicAdd, and a last small kernel scales and rounds it to bf16. Gradients out in bf16, as PyTorch's.

// --8<-- [start:v2_layout]
// Warp w owns keys 16w .. 16w + 15 of the block's tile: its S^T, P^T, dP^T, dS^T are 16 keys x
// kV2Rows queries, held in mma accumulators. Shared rows are padded by 8 bf16, as in the forward
// (ldmatrix's 8 rows then start in different banks).
constexpr int kV2Warps = 8, kV2Keys = 16 * kV2Warps, kV2Rows = 64;
template <int D>
struct BwdSmem {
  static constexpr int kStride = D + 8, kDsStride = kV2Rows + 8;
  bf16 k[kV2Keys][kStride], v[kV2Keys][kStride];   // this block's keys, loaded once
  bf16 q[kV2Rows][kStride], d_out[kV2Rows][kStride];  // the current query tile
  bf16 ds[kV2Keys][kDsStride];                        // dS^T of the tile, [key][query], for dQ = dS K
  float lse_log2[kV2Rows], delta[kV2Rows];
};
// --8<-- [end:v2_layout]

// --8<-- [start:fragments]
// The four ways the backward feeds mma.sync from shared memory, for a 16 x 16 operand at (r0, c0) of
// a row-major tile X (the m16n8k16 fragment layouts are in flash_fwd.cuh's mma_bf16_16816):
//   a_rows   A = X[r0.., c0..] as stored (rows are A's rows)               ldmatrix
//   a_cols   A = X^T: A's rows are X's columns c0.., its k index X's rows  ldmatrix .trans
//   b_rows   B^T stored: X's rows r0.. are B's columns n (16 of them: two n-tiles), its columns B's k
//   b_cols   B stored: X's rows r0.. are B's k, its columns c0.. B's n (two n-tiles)   .trans
// b_* fill f[0], f[1] for the n-tile at n0 and f[2], f[3] for the one at n0 + 8.
__device__ __forceinline__ const bf16* a_rows(const bf16* x, int stride, int r0, int c0, int lane) {
  return x + (r0 + (lane / 8) % 2 * 8 + lane % 8) * stride + c0 + (lane / 16) * 8;
}
__device__ __forceinline__ const bf16* a_cols(const bf16* x, int stride, int r0, int c0, int lane) {
  return x + (r0 + (lane / 16) * 8 + lane % 8) * stride + c0 + (lane / 8) % 2 * 8;
}
__device__ __forceinline__ const bf16* b_rows(const bf16* x, int stride, int r0, int c0, int lane) {
  return x + (r0 + (lane / 16) * 8 + lane % 8) * stride + c0 + (lane / 8) % 2 * 8;
}
__device__ __forceinline__ const bf16* b_cols(const bf16* x, int stride, int r0, int c0, int lane) {
  return x + (r0 + (lane / 8) % 2 * 8 + lane % 8) * stride + c0 + (lane / 16) * 8;
}
// --8<-- [end:fragments]

// Copy rows [r0, r0 + kRows) of a [seq][D] bf16 matrix into a padded shared tile (zeros past seq).
template <int D, int kRows>
__device__ __forceinline__ void load_rows(bf16 (*tile)[D + 8], const bf16* src, int r0, int seq) {
  for (int t = threadIdx.x; t < kRows * D / 8; t += kV2Warps * 32) {
    const int r = t / (D / 8), c = (t % (D / 8)) * 8, row = r0 + r;
    flash::cp_async16(&tile[r][c], src + 1LL * min(row, seq - 1) * D + c, row < seq ? 16 : 0);
  }
}

// The two products of the loop, for one warp. acc (16 x kV2Rows) = X_w Y^T: A = rows kw.. of X
// (K or V), B = Y^T with Y (Q or dO) stored [query][dim]. Used for S^T = K_w Q^T and dP^T = V_w dO^T.
template <int D>
__device__ __forceinline__ void warp_rows_by_queries(float (&acc)[kV2Rows / 8][4], const bf16* x, const bf16* y,
                                                     int kw, int lane) {
  constexpr int S = D + 8;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    unsigned a[4];
    flash::ldmatrix_x4(a, a_rows(x, S, kw, kk * 16, lane));
#pragma unroll
    for (int np = 0; np < kV2Rows / 16; ++np) {
      unsigned f[4];
      flash::ldmatrix_x4(f, b_rows(y, S, np * 16, kk * 16, lane));
      flash::mma_bf16_16816(acc[2 * np], a, f[0], f[1]);
      flash::mma_bf16_16816(acc[2 * np + 1], a, f[2], f[3]);
    }
  }
}

// acc (16 x D) += A Y: A (16 x kV2Rows, P^T or dS^T) as bf16 pairs straight from the accumulators
// (a[n-tile][row g, row g + 8], the forward's trick for P), B = Y (dO or Q) as stored, via .trans.
template <int D>
__device__ __forceinline__ void warp_add_product(float (&acc)[D / 8][4], const unsigned (&a)[kV2Rows / 8][2],
                                                 const bf16* y, int lane) {
#pragma unroll
  for (int kk = 0; kk < kV2Rows / 16; ++kk) {
    const unsigned frag[4] = {a[2 * kk][0], a[2 * kk][1], a[2 * kk + 1][0], a[2 * kk + 1][1]};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      unsigned f[4];
      flash::ldmatrix_x4_trans(f, b_cols(y, D + 8, kk * 16, dp * 16, lane));
      flash::mma_bf16_16816(acc[2 * dp], frag, f[0], f[1]);
      flash::mma_bf16_16816(acc[2 * dp + 1], frag, f[2], f[3]);
    }
  }
}

// --8<-- [start:v2]
template <int D>
__global__ void __launch_bounds__(kV2Warps * 32, 1) bwd_v2(BwdParams p) {
#ifdef FLASH_HAS_MMA
  using flash::pack_bf16;
  constexpr int S = BwdSmem<D>::kStride, SD = BwdSmem<D>::kDsStride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  BwdSmem<D>& sm = *reinterpret_cast<BwdSmem<D>*>(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int bh = blockIdx.y, b = bh / p.heads, j0 = blockIdx.x * kV2Keys, kw = 16 * warp;
  const long long head = 1LL * bh * p.seq;
  const bf16 *q = p.q + head * D, *d_out = p.d_out + head * D;
  const int key_len = p.key_len[b];
  const float scale_log2 = p.scale * flash::kLog2e;
  // Under a causal mask, query i sees key j only when i >= j: the tiles before j0 are skipped.
  const int first_row = p.causal ? j0 / kV2Rows * kV2Rows : 0;
  const int n_tiles = j0 < key_len ? course::ceil_div(p.seq - first_row, kV2Rows) : 0;

  auto load_query_tile = [&](int i0) {
    load_rows<D, kV2Rows>(sm.q, q, i0, p.seq);
    load_rows<D, kV2Rows>(sm.d_out, d_out, i0, p.seq);
    flash::cp_async_commit();
    for (int r = threadIdx.x; r < kV2Rows; r += kV2Warps * 32) {
      const bool in = i0 + r < p.seq;
      sm.lse_log2[r] = in ? p.lse[head + i0 + r] * flash::kLog2e : INFINITY;  // +inf: P = 0
      sm.delta[r] = in ? p.delta[head + i0 + r] : 0.0f;
    }
  };
  if (n_tiles > 0) {
    load_rows<D, kV2Keys>(sm.k, p.k + head * D, j0, p.seq);
    load_rows<D, kV2Keys>(sm.v, p.v + head * D, j0, p.seq);
    load_query_tile(first_row);
  }

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};  // this warp's 16 keys x D, fp32
  for (int n = 0; n < n_tiles; ++n) {
    const int i0 = first_row + n * kV2Rows;
    flash::cp_async_wait<0>();
    __syncthreads();  // the tile (and, the first time, K and V) is in shared memory for every warp

    // S^T = K_w Q^T (16 keys x the tile's queries).
    float st[kV2Rows / 8][4] = {};
    warp_rows_by_queries<D>(st, &sm.k[0][0], &sm.q[0][0], kw, lane);
    // P^T = exp(scale S^T - L), recomputed from the forward's logsumexp; 0 where masked. Element e
    // of n-tile nt is key kw + g (+8 for e >= 2), query nt * 8 + 2t (+1 for odd e).
    const bool needs_mask = j0 + kV2Keys > key_len || i0 + kV2Rows > p.seq || (p.causal && i0 < j0 + kV2Keys - 1);
#pragma unroll
    for (int nt = 0; nt < kV2Rows / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j0 + kw + g + (e / 2) * 8, row = nt * 8 + 2 * t + (e & 1);
        const bool allowed = key < key_len && i0 + row < p.seq && (!p.causal || key <= i0 + row);
        const float prob = flash::fast_exp2(st[nt][e] * scale_log2 - sm.lse_log2[row]);
        st[nt][e] = !needs_mask || allowed ? prob : 0.0f;
      }
    }
    // dV_w += P^T dO, with P rounded to bf16 (its fp32 values are still needed for dS).
    unsigned pb[kV2Rows / 8][2];
#pragma unroll
    for (int nt = 0; nt < kV2Rows / 8; ++nt)
      pb[nt][0] = pack_bf16(st[nt][0], st[nt][1]), pb[nt][1] = pack_bf16(st[nt][2], st[nt][3]);
    warp_add_product<D>(dv, pb, &sm.d_out[0][0], lane);
    // dP^T = V_w dO^T, then dS^T = P^T o (dP^T - delta), rounded to bf16 pairs (the A fragments).
    float dpt[kV2Rows / 8][4] = {};
    warp_rows_by_queries<D>(dpt, &sm.v[0][0], &sm.d_out[0][0], kw, lane);
    unsigned ds[kV2Rows / 8][2];  // [n-tile][key row g, g + 8]
#pragma unroll
    for (int nt = 0; nt < kV2Rows / 8; ++nt) {
      const int row = nt * 8 + 2 * t;
      const float d0 = sm.delta[row], d1 = sm.delta[row + 1];
      ds[nt][0] = pack_bf16(st[nt][0] * (dpt[nt][0] - d0), st[nt][1] * (dpt[nt][1] - d1));
      ds[nt][1] = pack_bf16(st[nt][2] * (dpt[nt][2] - d0), st[nt][3] * (dpt[nt][3] - d1));
      // dS^T to shared memory for dQ, where every warp needs every key's column.
      *reinterpret_cast<unsigned*>(&sm.ds[kw + g][row]) = ds[nt][0];
      *reinterpret_cast<unsigned*>(&sm.ds[kw + g + 8][row]) = ds[nt][1];
    }
    // dK_w += dS^T Q.
    warp_add_product<D>(dk, ds, &sm.q[0][0], lane);
    __syncthreads();  // dS^T is complete; Q and dO are no longer read: fetch the next tile meanwhile
    if (n + 1 < n_tiles) load_query_tile(i0 + kV2Rows);

    // dQ_tile += dS K over this block's keys. Warp w: query rows 16 (w % 4) .., columns of its part of
    // D; A = dS = (dS^T)^T (ldmatrix .trans), B = K as stored. Added to the fp32 buffer with atomics.
    constexpr int kColsPerWarp = D / (kV2Warps / (kV2Rows / 16));
    const int qw = 16 * (warp % (kV2Rows / 16)), c_first = kColsPerWarp * (warp / (kV2Rows / 16));
    float* dq_row_lo = p.dq_accum + (head + i0 + qw + g) * D;
    float* dq_row_hi = dq_row_lo + 8 * D;
    const bool lo_in = i0 + qw + g < p.seq, hi_in = i0 + qw + g + 8 < p.seq;
#pragma unroll
    for (int dp = 0; dp < kColsPerWarp / 16; ++dp) {
      const int c0 = c_first + dp * 16;
      float acc[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < kV2Keys / 16; ++kk) {
        unsigned a[4], f[4];
        flash::ldmatrix_x4_trans(a, a_cols(&sm.ds[0][0], SD, kk * 16, qw, lane));
        flash::ldmatrix_x4_trans(f, b_cols(&sm.k[0][0], S, kk * 16, c0, lane));
        flash::mma_bf16_16816(acc[0], a, f[0], f[1]);
        flash::mma_bf16_16816(acc[1], a, f[2], f[3]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = c0 + h * 8 + 2 * t;
        if (lo_in) atomicAdd(dq_row_lo + c, acc[h][0]), atomicAdd(dq_row_lo + c + 1, acc[h][1]);
        if (hi_in) atomicAdd(dq_row_hi + c, acc[h][2]), atomicAdd(dq_row_hi + c + 1, acc[h][3]);
      }
    }
  }

  // dK = scale dS^T Q and dV, rounded to bf16 (zeros for a tile of padding keys: every output written).
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int c = dt * 8 + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = j0 + kw + g + 8 * h;
      if (key >= p.seq) continue;
      const long long at = (head + key) * D + c;
      *reinterpret_cast<unsigned*>(p.dk_bf16 + at) = pack_bf16(dk[dt][2 * h] * p.scale, dk[dt][2 * h + 1] * p.scale);
      *reinterpret_cast<unsigned*>(p.dv_bf16 + at) = pack_bf16(dv[dt][2 * h], dv[dt][2 * h + 1]);
    }
  }
#else
  (void)p;
#endif
}
// --8<-- [end:v2]


// --8<-- [start:launch]
// Version 1: delta, then the dK/dV and dQ kernels (FP32). Version 2: delta, the fp32 dQ buffer
// zeroed, the tensor-core kernel, the dQ conversion. Every launch is part of the timed backward.
template <int D>
void backward_d(int version, const BwdParams& p, int batch) {
  const int bh = batch * p.heads;
  const long long rows = 1LL * bh * p.seq;
  bwd_delta<D><<<static_cast<unsigned>(course::ceil_div(rows, 1LL * kDeltaWarps)), kDeltaWarps * 32>>>(p, rows);
  CUDA_CHECK_LAUNCH();
  if (version == 1) {
    bwd_dkdv<D><<<dim3(course::ceil_div(p.seq, kWarps), bh), kWarps * 32>>>(p);
    CUDA_CHECK_LAUNCH();
    bwd_dq<D><<<dim3(course::ceil_div(p.seq, kWarps), bh), kWarps * 32>>>(p);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const int smem = static_cast<int>(sizeof(BwdSmem<D>));  // over the default 48 KB: opt in, once
  static const bool opted_in = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(bwd_v2<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)opted_in;
  CUDA_CHECK(cudaMemsetAsync(p.dq_accum, 0, rows * D * sizeof(float)));
  bwd_v2<D><<<dim3(course::ceil_div(p.seq, kV2Keys), bh), kV2Warps * 32, smem>>>(p);
  CUDA_CHECK_LAUNCH();
  bwd_dq_convert<<<2048, 256>>>(p.dq_accum, p.dq_bf16, p.scale, rows * D);
  CUDA_CHECK_LAUNCH();
}

void backward(int version, const BwdParams& p, int batch, int dim) {
  if (dim == 64) backward_d<64>(version, p, batch);
  else backward_d<128>(version, p, batch);
}
// --8<-- [end:launch]

const char* impl_name(int version) {
  return version == 1 ? "flash bwd FP32 (bf16 in, fp32 math)" : "flash bwd v2 mma.sync (bf16, fp32 acc)";
}

// Everything on the device: the inputs, the forward's O and logsumexp, dO, and both versions' outputs.
struct BwdBuffers {
  attn::DeviceInputs in;
  bf16 *o, *d_out, *dq_bf16, *dk_bf16, *dv_bf16;
  float *lse, *delta, *dq, *dk, *dv, *dq_accum;
  void release() const {
    in.release(), attn::device_free({o, d_out, dq_bf16, dk_bf16, dv_bf16, lse, delta, dq, dk, dv, dq_accum});
  }
};



// Runs the forward (v2) once, then for each version: poison its outputs, run the backward, check dQ,
// dK, dV against the float64 reference, and with repeats > 0 time the backward alone.
bool check_and_time(const attn::Shape& s, uint64_t seed, int repeats, attn::Plant plant = attn::Plant::kNone) {
  const attn::Inputs in = attn::make_inputs(s, seed);
  std::vector<float> d_out;
  std::vector<bf16> d_out_b;
  attn::fill_uniform_bf16(d_out, d_out_b, s.elements(), seed + 3, -1.0f, 1.0f);
  const size_t n = s.elements() * sizeof(bf16), nf = s.elements() * sizeof(float), nr = s.rows() * sizeof(float);
  const BwdBuffers d{attn::upload(s, in),
                     attn::device_alloc<bf16>(s.elements()),
                     attn::to_device(d_out_b),
                     attn::device_alloc<bf16>(s.elements()),
                     attn::device_alloc<bf16>(s.elements()),
                     attn::device_alloc<bf16>(s.elements()),
                     attn::device_alloc<float>(s.rows()),
                     attn::device_alloc<float>(s.rows()),
                     attn::device_alloc<float>(s.elements()),
                     attn::device_alloc<float>(s.elements()),
                     attn::device_alloc<float>(s.elements()),
                     attn::device_alloc<float>(s.elements())};
  course::poison(d.o, n);
  course::poison(d.lse, nr);
  const flash::Params fwd{d.in.q, d.in.k, d.in.v, d.o, d.lse, d.in.key_len, s.heads, s.seq,
                          static_cast<float>(s.scale()) * flash::kLog2e, s.causal};
  flash::launch(2, fwd, s.batch, s.dim);
  const BwdParams p{d.in.q, d.in.k, d.in.v, d.o, d.d_out, d.lse, d.in.key_len, d.delta, d.dq, d.dk, d.dv,
                    d.dq_bf16, d.dk_bf16, d.dv_bf16, d.dq_accum, s.heads, s.seq, static_cast<float>(s.scale()),
                    s.causal};
  const ReferenceGradients ref = reference_gradients(s, in, d_out);
  const std::string name = attn::case_name(s) + attn::padded_suffix(s);
  bool ok = true;
  for (int version : {1, 2}) {
    if (plant != attn::Plant::kNone && version == 1) continue;  // a plant corrupts version 2's gradients
    for (float* ptr : {d.delta, d.dq, d.dk, d.dv, d.dq_accum}) course::poison(ptr, ptr == d.delta ? nr : nf);
    for (bf16* ptr : {d.dq_bf16, d.dk_bf16, d.dv_bf16}) course::poison(ptr, n);
    backward(version, p, s.batch, s.dim);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (version == 1) {  // the CHECK names of version 1 predate version 2: unprefixed
      ok = check_gradient(0, "", name, s, ref, d.dq, plant) && ok;
      ok = check_gradient(1, "", name, s, ref, d.dk, plant) && ok;
      ok = check_gradient(2, "", name, s, ref, d.dv, plant) && ok;
    } else {
      ok = check_gradient(0, "v2 ", name, s, ref, d.dq_bf16, plant) && ok;
      ok = check_gradient(1, "v2 ", name, s, ref, d.dk_bf16, plant) && ok;
      ok = check_gradient(2, "v2 ", name, s, ref, d.dv_bf16, plant) && ok;
    }
    if (repeats == 0) continue;
    const int timed = version == 1 ? repeats : 4 * repeats;  // version 1 takes a large share of a second
    const double ms = course::time_kernel_ms([&] { backward(version, p, s.batch, s.dim); }, 1, timed);
    // Reads Q, K, V, O, dO (bf16) and the logsumexp; writes dQ, dK, dV (fp32 in version 1, bf16 in
    // version 2). The arithmetic is the usual count, 2.5 times the forward's (five matrix products
    // instead of two), not what an implementation spends (version 1 recomputes P and dP for dQ).
    const double bytes = 5.0 * n + nr + 3.0 * (version == 1 ? nf : n);
    // Device memory of this version: inputs, O, dO, logsumexp, delta and its own outputs (and buffer).
    const double alloc = d.in.bytes + 2.0 * n + 2.0 * nr + (version == 1 ? 3.0 * nf : 3.0 * n + nf);
    attn::print_bench_row((attn::case_name(s) + " backward").c_str(), impl_name(version), ms, bytes,
                          2.5 * s.forward_flops(), s.seq, alloc);
  }
  d.release();
  return ok;
}

int main(int argc, char** argv) {
  const attn::Options opt = attn::parse_options(argc, argv);
  course::require_compute_capability(8, 0, "bf16 mma.sync in the forward pass and in version 2");
  if (!opt.bench) return check_and_time(opt.shape, opt.seed, 0, opt.plant) ? 0 : course::kExitFail;
  bool ok = true;
  for (bool is_causal : {false, true}) ok = check_and_time(attn::bench_shape(is_causal), opt.seed, 5) && ok;
  return ok ? 0 : course::kExitFail;
}
