// flash_hopper_bwd.cu: the backward pass of attention on Hopper (sm_90a): dQ, dK and dV from dO, the
// forward's O and its logsumexp, with TMA, mbarriers and wgmma: the first two rungs of FlashAttention-3's
// backward, checked against the chapter's float64 reference and timed on the chapter's benchmark.
//
// Taught in docs/attention/hopper-backward.md, after docs/attention/backward.md (the algorithm and
// version 2 on mma.sync) and docs/attention/hopper-kernel.md (the Hopper forward). Layout and masks as
// in attention_common.cuh: bf16 Q, K, V, O, dO of [batch][heads][seq][dim], dim 64 or 128, key padding
// per batch entry, optional causal mask. Gradients out in bf16, as PyTorch's.
//   bwd_delta (flash_bwd_common.cuh)  delta_i = rowsum(dO_i o O_i)
//   bwd v3    one block per 128 keys: a producer warpgroup (one thread issuing TMA for the Q and dO
//             tiles of 64 query rows, 2 stages) and two consumer warpgroups of 64 keys each. Per query
//             tile: S^T = K Q^T and dP^T = V dO^T (wgmma, both operands in shared memory), P^T and
//             dS^T in registers, dV += P^T dO and dK += dS^T Q (wgmma with A from registers, B
//             transposed by the instruction), dS^T to shared memory and dQ = dS K (wgmma, both operands
//             transposed) added to an fp32 buffer with atomics
//   bwd_dq_convert (flash_bwd_common.cuh)  dQ = scale * the fp32 buffer, rounded to bf16
//   bwd v4    the same block, three changes: each consumer's dQ tile goes to shared memory and one thread
//             adds it to a tiled fp32 buffer with one bulk reduction (cp.reduce.async.bulk .add.f32);
//             dV = P^T dO is issued before dP^T is waited for; the blocks run in groups of heads whose
//             Q, dO and dQ stay in L2
//   bwd_dq_convert_tiled  version 4's dQ = scale * the tiled buffer, rounded to bf16
//   bwd v4 ordered  version 4 with a deterministic dQ: the key blocks of a head add their parts of a
//             query tile in key order, each waiting for its turn on a counter per tile; blocks take
//             their place in that order from a ticket, so a block only ever waits for one that runs
// Every run checks versions 3, 4 and 4 ordered on the same inputs (the ordered one twice: the same bits);
// --bench times all three.
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o build/attention/flash_hopper_bwd
//        kernels/attention/flash_hopper_bwd.cu
// Run:   ./build/attention/flash_hopper_bwd --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
//        ./build/attention/flash_hopper_bwd --bench     (b4 h16 s4096 d128, causal and not)
//        ./build/attention/flash_hopper_bwd --profile v4   (or v3, ordered: one unchecked backward of the
//        benchmark's non-causal case, for hopper_attention_ncu.py --part backward)
//        ./build/attention/flash_hopper_bwd --batch 4 --heads 16 --seq 4096 --plant zeros-small   (or
//        tile: the gradients corrupted after the run; passes only if the check rejects them)
// It runs only on compute capability 9.0 (H100, H200) and waives itself elsewhere: wgmma and setmaxnreg
// are sm_90a instructions. The device code exists only in the compute_90a pass, so the file also builds
// for sm_75 to sm_100, where the kernel is an empty stub that main never launches.
//
// course: gpu
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --batch 3 --heads 2 --seq 127 --dim 64 --padding
// course: run --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 2 --heads 2 --seq 1 --dim 64 --padding
// course: run --batch 1 --heads 2 --seq 777 --dim 128 --causal
// course: run --batch 2 --heads 2 --seq 1000 --dim 64 --causal --padding
// course: run --batch 1 --heads 2 --seq 4097 --dim 128 --causal --padding
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --plant zeros-small
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --causal --plant tile
// course: bench --bench
// course: invariant faster causal non-causal max-ratio=0.8
#include <cuda.h>
#include <cuda_bf16.h>

#include <string>

#include "../common/check.cuh"
#include "../common/hopper.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "attention_common.cuh"
#include "flash_bwd_common.cuh"  // BwdParams, bwd_delta, bwd_dq_convert, the reference and its check
#include "flash_fwd.cuh"         // the forward (O, logsumexp), pack_bf16, fast_exp2, kLog2e

using bf16 = __nv_bfloat16;

// --8<-- [start:sizes]
// A block owns 128 keys: consumer warpgroup w (0 or 1) owns keys 64w..64w+63, the m = 64 of one wgmma.
// The query rows stream past in tiles of 64 (Q and dO, two stages). Every tile is stored by TMA as D / 64
// panels of rows x 64 columns with the 128-byte swizzle (64 bf16 = 128 bytes, the widest swizzled row).
// dS^T, written by the consumers, is one 128-key x 64-query panel in the same layout, double-buffered.
constexpr int kBlockKeys = 128, kBlockRows = 64, kStages = 2, kConsumers = 2, kThreads = (kConsumers + 1) * 128;
// Version 4 adds one fp32 64 x 64 dQ tile per consumer: the staging buffer of its bulk reduction.
constexpr size_t kDqTileFloats = 64 * 64;
template <int D, bool kBulkDq>  // K, V, 2 stages of Q and of dO, 2 dS^T buffers, + 1 KiB for the alignment
constexpr size_t kSmemBytes = (2 * kBlockKeys * D + 2 * kStages * kBlockRows * D + 2 * kBlockKeys * kBlockRows) *
                                  sizeof(bf16) +
                              (kBulkDq ? kConsumers * kDqTileFloats * sizeof(float) : 0) + 1024;
// Registers per thread after setmaxnreg: 128 x 24 + 256 x 240 = 64512 of the SM's 65536 (FlashAttention-3's
// split). A consumer thread holds dK and dV (D / 2 fp32 each), S^T and dP^T (32 fp32 each), then P^T and
// dS^T as bf16 pairs (16 registers each) and its part of dQ (32 fp32).
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
static_assert(128 * kProducerRegs + kConsumers * 128 * kConsumerRegs <= 65536, "more registers than an SM has");
// --8<-- [end:sizes]

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace course::hopper;
using flash::fast_exp2;
using flash::pack_bf16;

constexpr int kPanelCols = kSwizzleElems;  // the columns of one 128-byte-swizzled panel

// --8<-- [start:wgmma_ss]
// D (64 x 64, fp32: 32 registers per thread) = A (64 x 16) B (64 x 16)^T, + D when `accumulate`, both from
// shared memory. kTransA / kTransB = 0: the operand is K-major (smem_desc); 1: MN-major (smem_desc_mn),
// and the instruction transposes it on the way in (imm-trans). S^T = K Q^T and dP^T = V dO^T use 0, 0;
// dQ = dS K reads dS^T and K as stored, 1, 1.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_64x64x16_ss(float* d, uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" HOPPER_REGS_0_31 "}, %32, %33, p, 1, 1, %35, %36;\n"
      "}\n"
      : HOPPER_ACC32(d, 0)
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransA), "n"(kTransB));
}
// --8<-- [end:wgmma_ss]

__device__ __forceinline__ void fence_registers(unsigned* r, int n) {  // see fence_accumulators
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// --8<-- [start:bulk_reduce]
// Adds `bytes` of fp32 from shared memory to global memory, element by element, as one bulk copy of the
// TMA engine (both addresses 16-byte aligned, the size a multiple of 16). Tracked in the issuing thread's
// bulk groups like a TMA store: tma_store_commit, then tma_store_wait_read before the source is reused.
__device__ __forceinline__ void bulk_reduce_add_f32(float* global_dst, const float* smem_src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(global_dst),
               "r"(smem_u32(smem_src)), "r"(bytes)
               : "memory");
}
// --8<-- [end:bulk_reduce]

// --8<-- [start:turns]
// The ordered dQ's turns: one counter per dQ tile, zeroed before the launch. The key block whose turn it
// is adds its part and passes the turn on. The reduction is the async proxy's write and the counter an
// ordinary one: the reduction must have completed (wait_group 0, not .read) and the proxies be fenced
// before the release, and the next block fences again after its acquire before it issues its own.
__device__ __forceinline__ void wait_turn(const int* turn, int mine) {
  int seen;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(turn) : "memory");
  } while (seen != mine);
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
__device__ __forceinline__ void pass_turn(int* turn) {
  tma_store_wait_all();
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(turn) : "memory");
}
// --8<-- [end:turns]

// --8<-- [start:consumer]
// One consumer warpgroup: keys j0 + 64 cw .. + 63 against the block's query tiles. Every 64 x 64
// accumulator has wgmma's layout (mma.sync's, repeated): warp w holds rows 16w..16w+15; for each 8-column
// block j, lane l holds row l/4, columns 8j + 2(l%4) and +1 in d[4j], d[4j+1], and 8 rows down in d[4j+2],
// d[4j+3]. Here rows are keys and columns query rows: S^T, P^T, dP^T, dS^T are the transposes of the
// forward's tiles, so that P^T and dS^T are already the A operands of dV = P^T dO and dK = dS^T Q.
template <int D, bool kBulkDq, bool kOrderedDq>
__device__ __forceinline__ void consume(const BwdParams& p, const bf16* sK, const bf16* sV, const bf16* sQ,
                                        const bf16* sdO, bf16* sdS, float* sdQ, float (*lse_s)[kBlockRows],
                                        float (*delta_s)[kBlockRows], uint64_t* kv_full, uint64_t* full,
                                        uint64_t* empty, int* dq_turns, int cw, int bh, int j0, int key_len,
                                        int first_row, int n_tiles) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long head = 1LL * bh * p.seq;
  const float scale_log2 = p.scale * flash::kLog2e;
  constexpr int kKeyPanel = kBlockKeys * kPanelCols, kRowPanel = kBlockRows * kPanelCols;  // elements
  const bf16* k_w = sK + cw * 64 * kPanelCols;  // this warpgroup's 64 keys: 8 KiB into each K, V panel
  const bf16* v_w = sV + cw * 64 * kPanelCols;
  // dQ = dS K: at D = 128 warpgroup w computes output columns 64w.. (K's panel w) over all 128 keys; at
  // D = 64 (one panel) it takes its own 64 keys and both add their parts.
  constexpr int kDqKeys = D == 128 ? kBlockKeys : 64;
  const int dq_panel = D == 128 ? cw : 0, dq_key0 = D == 128 ? 0 : 64 * cw;
  const bool dq_issuer = threadIdx.x % 128 == 0;  // version 4: the thread that issues the bulk reduction
  float dk[D / 2], dv[D / 2];  // 64 keys x D, fp32
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = 0.0f, dv[i] = 0.0f;

  // Each query tile's logsumexp (times log2 e; +inf past the sequence: P = 0) and delta, staged in shared
  // memory by the first consumer warpgroup (warps 0-1 L, 2-3 delta, a row per thread), double-buffered:
  // tile n + 1's are written while tile n is computed, and the consumers' named barrier of each tile
  // orders the writes and the reads. Each thread loads its value one tile earlier still, into a
  // register, so that the load's latency passes during a whole tile instead of stalling the store.
  auto load_row = [&](int n) {
    const int row = first_row + n * kBlockRows + threadIdx.x % 64;
    if (warp < 2) return row < p.seq ? p.lse[head + row] * flash::kLog2e : INFINITY;
    return row < p.seq ? p.delta[head + row] : 0.0f;
  };
  auto store_row = [&](int n, float value) {
    if (warp < 2) lse_s[n % 2][threadIdx.x % 64] = value;
    else delta_s[n % 2][threadIdx.x % 64] = value;
  };
  float next_row = 0.0f;  // the first warpgroup's: its value for tile n + 1, loaded during tile n - 1
  if (n_tiles > 0) {
    if (cw == 0) {
      store_row(0, load_row(0));
      if (n_tiles > 1) next_row = load_row(1);
    }
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    mbar_wait(kv_full, 0);
  }
  for (int n = 0; n < n_tiles; ++n) {
    const int st = n % kStages, i0 = first_row + n * kBlockRows;
    const bf16* q = sQ + st * kBlockRows * D;
    const bf16* d_out = sdO + st * kBlockRows * D;
    bf16* ds_t = sdS + (n % 2) * kBlockKeys * kBlockRows;  // [key][query], swizzled like a TMA panel
    mbar_wait(&full[st], (n / kStages) & 1);

    // S^T = K_w Q^T and dP^T = V_w dO^T: both operands K-major (rows of keys or queries along D).
    float s[32], dp[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_64x64x16_ss<0, 0>(s, smem_desc(k_w + (kk / 4) * kKeyPanel + (kk % 4) * 16),
                              smem_desc(q + (kk / 4) * kRowPanel + (kk % 4) * 16), kk > 0);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_64x64x16_ss<0, 0>(dp, smem_desc(v_w + (kk / 4) * kKeyPanel + (kk % 4) * 16),
                              smem_desc(d_out + (kk / 4) * kRowPanel + (kk % 4) * 16), kk > 0);
    wgmma_commit();
    if (cw == 0 && n + 1 < n_tiles) {  // the next tile's L and delta, while the products run
      store_row(n + 1, next_row);
      if (n + 2 < n_tiles) next_row = load_row(n + 2);
    }
    const float* lse_log2 = lse_s[n % 2];
    const float* delta = delta_s[n % 2];

    // P^T = exp2(S^T scale log2(e) - L log2(e)) while dP^T is still on the tensor cores; 0 where masked
    // (a fully masked row, and a row past the sequence, has L = +inf: P = 0 without a test).
    wgmma_wait<1>();
    fence_accumulators<32>(s);
    const bool needs_mask = j0 + kBlockKeys > key_len || (p.causal && i0 < j0 + kBlockKeys - 1);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j0 + 64 * cw + 16 * warp + g + 8 * (e / 2), col = 8 * j + 2 * t + (e & 1);
        const float prob = fast_exp2(fmaf(s[4 * j + e], scale_log2, -lse_log2[col]));
        const bool allowed = key < key_len && (!p.causal || key <= i0 + col);
        s[4 * j + e] = !needs_mask || allowed ? prob : 0.0f;
      }
    }
    unsigned pb[16], dsb[16];  // P^T and dS^T as bf16 pairs: the A fragments of 4 k-steps of 16 queries
#pragma unroll
    for (int i = 0; i < 16; ++i) pb[i] = pack_bf16(s[2 * i], s[2 * i + 1]);
    // --8<-- [start:early_dv]
    // Version 4: dV += P^T dO goes to the tensor cores now, while dP^T may still be running and while
    // dS^T is computed; the wait below (at most one batch pending: this one) is then for dP^T alone.
    if constexpr (kBulkDq) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockRows / 16; ++kk)
        wgmma_64xNx16_rs<D>(dv, &pb[4 * kk], smem_desc_mn(d_out + kk * 16 * kPanelCols, kRowPanel * sizeof(bf16)));
      wgmma_commit();
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    // --8<-- [end:early_dv]
    // dS^T = P^T o (dP^T - delta), rounded to bf16, and stored to shared memory for dQ: key row r, query
    // columns 8j + 2t, +1 go to 16-byte chunk j ^ (r % 8) of the row's 128 bytes (the 128-byte swizzle).
    fence_accumulators<32>(dp);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int col = 8 * (i / 2) + 2 * t;
      dsb[i] = pack_bf16(s[2 * i] * (dp[2 * i] - delta[col]), s[2 * i + 1] * (dp[2 * i + 1] - delta[col + 1]));
      const int r = 64 * cw + 16 * warp + g + 8 * (i % 2), j = i / 2;
      *reinterpret_cast<unsigned*>(reinterpret_cast<char*>(ds_t) + r * 128 + ((j ^ (r % 8)) * 16) + 4 * t) = dsb[i];
    }

    // dV += P^T dO (version 3 here) and dK += dS^T Q: A from registers, B (dO, Q) stored [query][dim],
    // i.e. MN-major.
    wgmma_fence();
    if constexpr (!kBulkDq) {
#pragma unroll
      for (int kk = 0; kk < kBlockRows / 16; ++kk)
        wgmma_64xNx16_rs<D>(dv, &pb[4 * kk], smem_desc_mn(d_out + kk * 16 * kPanelCols, kRowPanel * sizeof(bf16)));
    }
#pragma unroll
    for (int kk = 0; kk < kBlockRows / 16; ++kk)
      wgmma_64xNx16_rs<D>(dk, &dsb[4 * kk], smem_desc_mn(q + kk * 16 * kPanelCols, kRowPanel * sizeof(bf16)));
    wgmma_commit();

    // dQ_tile = dS K: every consumer's dS^T must be in shared memory (and visible to the tensor cores'
    // async proxy) first. A = dS^T (query-major), B = K (dim-major): both transposed by the instruction.
    // Version 4's issuing thread also waits here until its previous bulk reduction has read the dQ
    // staging tile, so that the barrier frees the tile for this query tile's stores.
    fence_proxy_async_smem();
    if (kBulkDq && dq_issuer) tma_store_wait_read<0>();
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    float dq[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDqKeys / 16; ++kk) {
      const int key = dq_key0 + 16 * kk;
      wgmma_64x64x16_ss<1, 1>(dq, smem_desc_mn(ds_t + key * kPanelCols, kKeyPanel * sizeof(bf16)),
                              smem_desc_mn(sK + dq_panel * kKeyPanel + key * kPanelCols, kKeyPanel * sizeof(bf16)),
                              kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators<D / 2>(dv);
    fence_accumulators<D / 2>(dk);
    fence_accumulators<32>(dq);
    fence_registers(pb, 16);
    fence_registers(dsb, 16);
    if (lane == 0) mbar_arrive(&empty[st]);  // this warp's wgmma no longer read the stage's Q and dO

    if constexpr (kBulkDq) {
      // --8<-- [start:bulk_dq]
      // Version 4: the warpgroup's 64 x 64 part of dQ goes to its fp32 staging tile in the order the
      // registers hold it (thread x's float4 i at float4 index 128 i + x: consecutive threads, consecutive
      // 16 bytes, no bank conflicts), and one thread adds the whole tile, 16 KiB, to the fp32 buffer with
      // one bulk reduction. The buffer uses the same order, tile by tile; bwd_dq_convert_tiled undoes it.
      float4* tile = reinterpret_cast<float4*>(sdQ + cw * kDqTileFloats);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        tile[128 * i + threadIdx.x % 128] = make_float4(dq[4 * i], dq[4 * i + 1], dq[4 * i + 2], dq[4 * i + 3]);
      fence_proxy_async_smem();  // the stores, visible to the bulk copy's async proxy
      asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
      if (dq_issuer) {
        const long long row_tiles = (p.seq + kBlockRows - 1) / kBlockRows;
        const long long tile_index = (bh * row_tiles + i0 / kBlockRows) * (D / 64) + dq_panel;
        float* out = p.dq_accum + tile_index * kDqTileFloats;
        // The ordered variant: at D = 128 each tile has one part per key block, at D = 64 two (both
        // consumers add to the one panel), taken in key order, consumer 0 first.
        const int turn = D == 128 ? j0 / kBlockKeys : 2 * (j0 / kBlockKeys) + cw;
        if constexpr (kOrderedDq) wait_turn(dq_turns + tile_index, turn);
        bulk_reduce_add_f32(out, sdQ + cw * kDqTileFloats, kDqTileFloats * sizeof(float));
        tma_store_commit();
        if constexpr (kOrderedDq) pass_turn(dq_turns + tile_index);
      }
      // --8<-- [end:bulk_dq]
    } else {
      // Add this warpgroup's part of dQ to the fp32 buffer: 8-byte atomic adds (red.global.add.v2.f32).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = i0 + 16 * warp + g + 8 * h;
        if (row >= p.seq) continue;
        float* out = p.dq_accum + (head + row) * D + dq_panel * kPanelCols + 2 * t;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          atomicAdd(reinterpret_cast<float2*>(out + 8 * j), make_float2(dq[4 * j + 2 * h], dq[4 * j + 2 * h + 1]));
      }
    }
  }
  if (kBulkDq && dq_issuer) tma_store_wait_all();  // the last reduction has finished with shared memory

  // dK = scale dS^T Q and dV, rounded to bf16; keys past the padding get zeros (every output is written).
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = j0 + 64 * cw + 16 * warp + g + 8 * h;
      if (key >= p.seq) continue;
      const long long at = (head + key) * D + 8 * j + 2 * t;
      *reinterpret_cast<unsigned*>(p.dk_bf16 + at) =
          pack_bf16(dk[4 * j + 2 * h] * p.scale, dk[4 * j + 2 * h + 1] * p.scale);
      *reinterpret_cast<unsigned*>(p.dv_bf16 + at) = pack_bf16(dv[4 * j + 2 * h], dv[4 * j + 2 * h + 1]);
    }
  }
}
// --8<-- [end:consumer]
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// --8<-- [start:order]
// Version 4's block order: the (batch x head)s in groups of a few, each group's blocks together, and
// inside a group version 3's order (every head's first keys first). Version 3 runs the first key block
// of all the heads at once, so the blocks in flight read the Q, dO and dQ rows of every head, more
// than L2 holds, and each key block fetches them from DRAM again. A group's heads (4 MB each at
// s4096 d128: Q and dO in bf16, dQ's fp32 buffer) stay in L2 while all their key blocks pass. Under the
// causal mask the group is larger, so that the long first blocks of the last group still start early
// enough not to finish alone.
__device__ __forceinline__ void block_order_grouped(int block, int& bh, int& j0, int bh_count, int seq, bool causal) {
  const int group_heads = causal ? 8 : 4, key_blocks = (seq + kBlockKeys - 1) / kBlockKeys;
  const int group = block / (group_heads * key_blocks);
  const int first_head = group * group_heads, heads_here = min(group_heads, bh_count - first_head);
  const int within = block - first_head * key_blocks;
  bh = first_head + within % heads_here;
  j0 = within / heads_here * kBlockKeys;
}
// --8<-- [end:order]

// --8<-- [start:kernel]
// One block per (128 keys, batch x head). Block b takes key block b / bh_count: every head's first keys
// first, which under a causal mask see the most query rows, so that the short blocks fill the gaps at the
// end (version 3; version 4 takes the same order inside groups of heads: block_order_grouped). Under a
// causal mask the query tiles before j0 see none of the block's keys and are skipped.
// The ordered variant (kOrderedDq) takes its place in version 4's order from a ticket, not from blockIdx:
// the blocks are not promised to start in blockIdx order, and a block that waited for the turn of one not
// yet started could wait for ever. A ticket is taken by a running block, so every block before it in the
// order is running or done, and the first unfinished block never waits.
// Producer warpgroup: thread 0 loads K and V once and then walks Q and dO through the ring (wait until a
// stage is empty, announce its bytes, issue the copies; TMA zero-fills rows past the sequence).
template <int D, bool kBulkDq, bool kOrderedDq>
__global__ void __launch_bounds__(kThreads, 1)
    flash_bwd_hopper(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                     const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                     const BwdParams p, int bh_count, int* dq_turns) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  bf16* sK = align_1k(smem_raw);
  bf16* sV = sK + kBlockKeys * D;
  bf16* sQ = sV + kBlockKeys * D;           // kStages tiles
  bf16* sdO = sQ + kStages * kBlockRows * D;  // kStages tiles
  bf16* sdS = sdO + kStages * kBlockRows * D;  // 2 buffers
  float* sdQ = reinterpret_cast<float*>(sdS + 2 * kBlockKeys * kBlockRows);  // version 4: a tile per consumer
  __shared__ float lse_s[2][kBlockRows], delta_s[2][kBlockRows];  // per query tile, double-buffered
  __shared__ __align__(8) uint64_t kv_full, full[kStages], empty[kStages];
  __shared__ int ticket;

  int block = static_cast<int>(blockIdx.x);
  if constexpr (kOrderedDq) {  // dq_turns[0] hands out the tickets; the tiles' turns follow it
    if (threadIdx.x == 0) ticket = atomicAdd(dq_turns, 1);
    __syncthreads();
    block = ticket;
  }
  int bh = block % bh_count, j0 = block / bh_count * kBlockKeys;
  if constexpr (kBulkDq) block_order_grouped(block, bh, j0, bh_count, p.seq, p.causal);
  const int key_len = p.key_len[bh / p.heads];
  const int first_row = p.causal ? j0 : 0;  // j0 is a multiple of the 64-row tile
  const int n_tiles = j0 < key_len ? (p.seq - first_row + kBlockRows - 1) / kBlockRows : 0;
  constexpr unsigned kKeyTileBytes = kBlockKeys * D * sizeof(bf16), kRowTileBytes = kBlockRows * D * sizeof(bf16);

  if (threadIdx.x == 0) {
    mbar_init(&kv_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);                // the producer's arrive (+ the TMA bytes)
      mbar_init(&empty[s], kConsumers * 4);  // one arrive per consumer warp
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0 && n_tiles > 0) {
      mbar_expect_bytes(&kv_full, 2 * kKeyTileBytes);
      for (int c = 0; c < D; c += kPanelCols) {
        tma_load_3d(sK + c * kBlockKeys, &tm_k, c, j0, bh, &kv_full);
        tma_load_3d(sV + c * kBlockKeys, &tm_v, c, j0, bh, &kv_full);
      }
      for (int n = 0; n < n_tiles; ++n) {
        const int st = n % kStages, i0 = first_row + n * kBlockRows;
        mbar_wait(&empty[st], ((n / kStages) & 1) ^ 1);  // passes at once in the first round
        mbar_expect_bytes(&full[st], 2 * kRowTileBytes);
        for (int c = 0; c < D; c += kPanelCols) {
          tma_load_3d(sQ + st * kBlockRows * D + c * kBlockRows, &tm_q, c, i0, bh, &full[st]);
          tma_load_3d(sdO + st * kBlockRows * D + c * kBlockRows, &tm_do, c, i0, bh, &full[st]);
        }
      }
    }
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    consume<D, kBulkDq, kOrderedDq>(p, sK, sV, sQ, sdO, sdS, sdQ, lse_s, delta_s, &kv_full, full, empty,
                                    dq_turns + 1, wg - 1, bh, j0, key_len, first_row, n_tiles);
  }
#else
  (void)tm_q, (void)tm_k, (void)tm_v, (void)tm_do, (void)p, (void)bh_count, (void)dq_turns;
#endif
}
// --8<-- [end:kernel]

// --8<-- [start:launch]
// The tensor maps TMA reads Q, K, V and dO through, built once per problem, outside the timed launches.
struct Maps {
  CUtensorMap q, k, v, d_out;
};

// Shared memory beyond the default 48 KB: opt in once per kernel, outside any timing.
template <int D>
void opt_in() {
  CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_hopper<D, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes<D, false>)));
  CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_hopper<D, true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes<D, true>)));
  CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_hopper<D, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes<D, true>)));
}

// Version 4's fp32 dQ buffer: per (batch x head, 64-row query tile, 64-column panel) one 64 x 64 tile in
// the consumers' register order (see bulk_dq), the rows past the sequence included, then dQ = scale *
// the buffer in bf16: each thread reads one float4 (two rows, two columns) and writes two bf16 pairs.
long long tiled_dq_tiles(int bh, int seq, int dim) {
  return 1LL * bh * course::ceil_div(seq, kBlockRows) * (dim / 64);
}
long long tiled_dq_floats(int bh, int seq, int dim) { return tiled_dq_tiles(bh, seq, dim) * kDqTileFloats; }
__global__ void bwd_dq_convert_tiled(const float4* __restrict__ dq_accum, bf16* __restrict__ dq, float scale,
                                     int seq, int dim, long long n4) {
  const int row_tiles = (seq + kBlockRows - 1) / kBlockRows, panels = dim / 64;
  for (long long e = blockIdx.x * 1LL * blockDim.x + threadIdx.x; e < n4; e += 1LL * gridDim.x * blockDim.x) {
    const long long tile = e / (kDqTileFloats / 4);
    const int in_tile = static_cast<int>(e % (kDqTileFloats / 4)), i = in_tile / 128, x = in_tile % 128;
    const int panel = static_cast<int>(tile % panels), row_tile = static_cast<int>(tile / panels % row_tiles);
    const long long bh = tile / panels / row_tiles;
    const int lane = x % 32, row = row_tile * kBlockRows + 16 * (x / 32) + lane / 4;
    const int col = panel * 64 + 8 * i + 2 * (lane % 4);
    const float4 v = dq_accum[e];
    if (row < seq)
      *reinterpret_cast<unsigned*>(dq + (bh * seq + row) * dim + col) = flash::pack_bf16(v.x * scale, v.y * scale);
    if (row + 8 < seq)
      *reinterpret_cast<unsigned*>(dq + (bh * seq + row + 8) * dim + col) =
          flash::pack_bf16(v.z * scale, v.w * scale);
  }
}

// delta, the fp32 dQ buffer zeroed, the main kernel, the dQ conversion: every launch is part of the
// timed backward. Version 3 (bulk_dq false) adds dQ with atomics into a [row][dim] buffer, version 4
// (true) with bulk reductions into the tiled one; the ordered variant also zeroes its ticket and turns.
template <int D, bool kBulkDq, bool kOrderedDq>
void backward_d(const BwdParams& p, const Maps& m, int batch, int* dq_turns) {
  const int bh = batch * p.heads;
  const long long rows = 1LL * bh * p.seq;
  bwd_delta<D><<<static_cast<unsigned>(course::ceil_div(rows, 1LL * kDeltaWarps)), kDeltaWarps * 32>>>(p, rows);
  CUDA_CHECK_LAUNCH();
  const long long accum_floats = kBulkDq ? tiled_dq_floats(bh, p.seq, D) : rows * D;
  CUDA_CHECK(cudaMemsetAsync(p.dq_accum, 0, accum_floats * sizeof(float)));
  if constexpr (kOrderedDq)
    CUDA_CHECK(cudaMemsetAsync(dq_turns, 0, (1 + tiled_dq_tiles(bh, p.seq, D)) * sizeof(int)));
  const unsigned blocks = static_cast<unsigned>(course::ceil_div(p.seq, kBlockKeys) * bh);
  constexpr size_t smem = kSmemBytes<D, kBulkDq>;
  flash_bwd_hopper<D, kBulkDq, kOrderedDq><<<blocks, kThreads, smem>>>(m.q, m.k, m.v, m.d_out, p, bh, dq_turns);
  CUDA_CHECK_LAUNCH();
  if constexpr (kBulkDq)
    bwd_dq_convert_tiled<<<2048, 256>>>(reinterpret_cast<const float4*>(p.dq_accum), p.dq_bf16, p.scale, p.seq, D,
                                        accum_floats / 4);
  else
    bwd_dq_convert<<<2048, 256>>>(p.dq_accum, p.dq_bf16, p.scale, rows * D);
  CUDA_CHECK_LAUNCH();
}

enum class Version { kV3, kV4, kV4Ordered };
template <bool kBulkDq, bool kOrderedDq>
void backward_any_dim(const BwdParams& p, const Maps& m, int batch, int dim, int* dq_turns) {
  if (dim == 64) backward_d<64, kBulkDq, kOrderedDq>(p, m, batch, dq_turns);
  else backward_d<128, kBulkDq, kOrderedDq>(p, m, batch, dq_turns);
}
void backward(Version v, const BwdParams& p, const Maps& m, int batch, int dim, int* dq_turns) {
  if (v == Version::kV3) backward_any_dim<false, false>(p, m, batch, dim, nullptr);
  else if (v == Version::kV4) backward_any_dim<true, false>(p, m, batch, dim, nullptr);
  else backward_any_dim<true, true>(p, m, batch, dim, dq_turns);
}
// --8<-- [end:launch]

constexpr Version kVersions[] = {Version::kV3, Version::kV4, Version::kV4Ordered};
constexpr const char* kPrefix[] = {"v3 ", "v4 ", "v4ordered "};
constexpr const char* kImpl[] = {"flash bwd v3 wgmma (bf16, fp32 acc)",
                                  "flash bwd v4 wgmma, bulk-reduce dQ (bf16, fp32 acc)",
                                  "flash bwd v4 wgmma, ordered (deterministic) dQ (bf16, fp32 acc)"};

// One problem on the device: the inputs and dO (bf16), the forward's O and logsumexp (flash_fwd.cuh's
// v2, run once), every version's buffers, the backward's parameters and tensor maps; the host copies of
// the inputs and dO stay for the reference.
struct Problem {
  attn::Inputs in;
  std::vector<float> d_out;  // bf16 values held as floats
  attn::DeviceInputs din;
  bf16 *o, *d_out_dev, *dq, *dk, *dv;
  float *lse, *delta, *dq_accum;
  int* dq_turns;
  size_t accum_bytes;
  BwdParams p;
  Maps maps;
  void release() const {
    din.release();
    attn::device_free({o, d_out_dev, dq, dk, dv, lse, delta, dq_accum, dq_turns});
  }
};

Problem make_problem(const attn::Shape& s, uint64_t seed) {
  Problem pr;
  pr.in = attn::make_inputs(s, seed);
  std::vector<bf16> d_out_b;
  attn::fill_uniform_bf16(pr.d_out, d_out_b, s.elements(), seed + 3, -1.0f, 1.0f);
  const int bh = s.batch * s.heads;
  pr.accum_bytes = std::max<long long>(s.elements(), tiled_dq_floats(bh, s.seq, s.dim)) * sizeof(float);
  pr.din = attn::upload(s, pr.in);
  pr.o = attn::device_alloc<bf16>(s.elements());
  pr.d_out_dev = attn::to_device(d_out_b);
  pr.dq = attn::device_alloc<bf16>(s.elements());
  pr.dk = attn::device_alloc<bf16>(s.elements());
  pr.dv = attn::device_alloc<bf16>(s.elements());
  pr.lse = attn::device_alloc<float>(s.rows());
  pr.delta = attn::device_alloc<float>(s.rows());
  pr.dq_accum = attn::device_alloc<float>(pr.accum_bytes / sizeof(float));
  pr.dq_turns = attn::device_alloc<int>(1 + tiled_dq_tiles(bh, s.seq, s.dim));
  course::poison(pr.o, s.elements() * sizeof(bf16));
  course::poison(pr.lse, s.rows() * sizeof(float));
  const flash::Params fwd{pr.din.q, pr.din.k, pr.din.v, pr.o, pr.lse, pr.din.key_len, s.heads, s.seq,
                          static_cast<float>(s.scale()) * flash::kLog2e, s.causal};
  flash::launch(2, fwd, s.batch, s.dim);
  pr.p = BwdParams{pr.din.q, pr.din.k, pr.din.v, pr.o,     pr.d_out_dev, pr.lse,      pr.din.key_len,
                   pr.delta, nullptr,   nullptr,  nullptr, pr.dq,        pr.dk,       pr.dv,
                   pr.dq_accum, s.heads, s.seq,   static_cast<float>(s.scale()), s.causal};
  pr.maps = Maps{course::hopper::make_kmajor_map_3d(pr.din.q, bh, s.seq, s.dim, kBlockRows),
                 course::hopper::make_kmajor_map_3d(pr.din.k, bh, s.seq, s.dim, kBlockKeys),
                 course::hopper::make_kmajor_map_3d(pr.din.v, bh, s.seq, s.dim, kBlockKeys),
                 course::hopper::make_kmajor_map_3d(pr.d_out_dev, bh, s.seq, s.dim, kBlockRows)};
  return pr;
}

// For each version in turn: poisons the outputs, runs the backward, checks dQ, dK, dV against the
// float64 reference (rounded as version 2 rounds: P and dS to bf16 before their products, the gradients
// on the way out), and with repeats > 0 times the backward alone. The ordered version runs a second time
// and must give the same bits of dQ.
bool check_and_time(const attn::Shape& s, uint64_t seed, int repeats, attn::Plant plant = attn::Plant::kNone) {
  const Problem pr = make_problem(s, seed);
  const size_t n = s.elements() * sizeof(bf16), nr = s.rows() * sizeof(float);
  // At the benchmark's size a quarter of flash_bwd.cu's reference budget (2 of the 64 (batch, head)s
  // without the mask, 4 with it, first and last included) keeps the run short; checked runs keep it all.
  const ReferenceGradients ref = reference_gradients(s, pr.in, pr.d_out, repeats > 0 ? 5e9 : 2e10);
  const std::string name = attn::case_name(s) + attn::padded_suffix(s);

  bool ok = true;
  for (int i = 0; i < 3; ++i) {
    const Version version = kVersions[i];
    auto run = [&] {
      course::poison(pr.delta, nr);
      course::poison(pr.dq_accum, pr.accum_bytes);
      for (bf16* ptr : {pr.dq, pr.dk, pr.dv}) course::poison(ptr, n);
      backward(version, pr.p, pr.maps, s.batch, s.dim, pr.dq_turns);
      CUDA_CHECK(cudaDeviceSynchronize());
    };
    run();
    bool version_ok = check_gradient(0, kPrefix[i], name, s, ref, pr.dq, plant);
    version_ok = check_gradient(1, kPrefix[i], name, s, ref, pr.dk, plant) && version_ok;
    version_ok = check_gradient(2, kPrefix[i], name, s, ref, pr.dv, plant) && version_ok;
    if (version == Version::kV4Ordered && plant == attn::Plant::kNone) {
      std::vector<bf16> first(s.elements()), second(s.elements());
      CUDA_CHECK(cudaMemcpy(first.data(), pr.dq, n, cudaMemcpyDeviceToHost));
      run();
      CUDA_CHECK(cudaMemcpy(second.data(), pr.dq, n, cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(first.data(), second.data(), n) == 0;
      const std::string label = attn::check_label("v4ordered dQ_same_bits_twice " + name);
      const char* detail = same ? "" : "(two runs on the same inputs gave different dQ)";
      version_ok = course::check_true(label.c_str(), same, s.elements(), detail) && version_ok;
    }
    if (repeats > 0 && version_ok) {
      const double ms = course::time_kernel_ms(
          [&] { backward(version, pr.p, pr.maps, s.batch, s.dim, pr.dq_turns); }, 1, 4 * repeats);
      // The same counts as flash_bwd.cu's version 2: reads Q, K, V, O, dO and the logsumexp, writes bf16
      // dQ, dK, dV; 2.5 times the forward's arithmetic (five matrix products instead of two).
      const double bytes = 5.0 * n + nr + 3.0 * n;
      const double alloc = pr.din.bytes + 2.0 * n + 2.0 * nr + 3.0 * n + pr.accum_bytes;
      attn::print_bench_row((attn::case_name(s) + " backward").c_str(), kImpl[i], ms, bytes,
                            2.5 * s.forward_flops(), s.seq, alloc);
    }
    ok = version_ok && ok;
  }
  pr.release();
  return ok;
}

void profile_once(int i, uint64_t seed) {
  const attn::Shape s = attn::bench_shape(false);
  const Problem pr = make_problem(s, seed);
  backward(kVersions[i], pr.p, pr.maps, s.batch, s.dim, pr.dq_turns);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("profiled one backward of %s on %s\n", kImpl[i], attn::case_name(s).c_str());
  pr.release();
}

int main(int argc, char** argv) {
  // --profile v3|v4|ordered: one unchecked backward of that version on the benchmark's non-causal case
  // (hopper_attention_ncu.py --part backward).
  const int profile = attn::take_profile_option(argc, argv, {"v3", "v4", "ordered"});
  const attn::Options opt = attn::parse_options(argc, argv);
  course::require_compute_capability(9, 0, "wgmma, setmaxnreg and TMA");
  course::hopper::require_sm90a("wgmma and setmaxnreg are sm_90a instructions");
  opt_in<64>();
  opt_in<128>();
  if (profile >= 0) {
    profile_once(profile, opt.seed);
    return 0;
  }
  if (!opt.bench) return check_and_time(opt.shape, opt.seed, 0, opt.plant) ? 0 : course::kExitFail;
  // The chapter's benchmark, the same cases as flash_bwd.cu's backward rows and sdpa_torch_backward.py's: bf16,
  // batch 4 x 16 heads, sequence 4096, head dimension 128, causal and not; then head dimension 64, and
  // sequence 16384 at batch 2 (sdpa_torch_backward.py times both too).
  bool ok = true;
  for (bool is_causal : {false, true}) ok = check_and_time(attn::bench_shape(is_causal), opt.seed, 5) && ok;
  for (bool is_causal : {false, true}) {
    ok = check_and_time(attn::make_shape(4, 16, 4096, 64, is_causal, false), opt.seed, 5) && ok;
    ok = check_and_time(attn::make_shape(2, 16, 16384, 128, is_causal, false), opt.seed, 5) && ok;
  }
  return ok ? 0 : course::kExitFail;
}
