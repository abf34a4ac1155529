// flash_hopper.cu: fused attention forward for Hopper (sm_90a), O = softmax(scale * Q K^T + mask) V
// and each row's logsumexp, built on TMA, mbarriers and wgmma: FlashAttention-3's warp specialisation,
// the softmax overlapped with the tensor cores, and its persistent grid with a TMA store of O, checked
// against the chapter's float64 reference and timed on the chapter's benchmark.
//
// Taught in docs/attention/hopper-kernel.md, after docs/attention/hopper.md, docs/attention/flash-forward.md
// (the mma.sync kernels, v1 to v3) and docs/fast-matmul-fft/hopper-gemm.md (TMA, mbarriers, wgmma,
// setmaxnreg); kernels/attention/hopper_attention_ncu.py profiles v4 ping-pong and v5 (both tile orders).
// Layout and masks as in attention_common.cuh: bf16 Q, K, V, O of [batch][heads][seq][dim], dim 64 or 128,
// key padding per batch entry, optional causal mask; a fully masked row gets zeros and logsumexp +inf.
//   v4 plain     one block = 128 query rows: a producer warpgroup (one thread issuing TMA) and two
//                consumer warpgroups of 64 rows; K and V tiles of 128 keys in a 2-stage ring; per tile
//                S = Q K^T (wgmma, both operands in shared memory), softmax in registers, O += P V
//                (wgmma with P from registers)
//   v4 overlap   the same, software-pipelined inside each warpgroup: S of tile n+1 is issued before
//                P V of tile n, and the softmax of tile n+1 runs while P V of tile n is on the tensor cores
//   v4 ping-pong the overlapped loop, and the two consumer warpgroups take turns issuing their wgmma
//                (named barriers), so that one's softmax runs while the other's products do
//   v5 persistent the ping-pong consumers in a persistent grid: one block per SM walks the query tiles
//                (static schedule, head after head so that K and V stay in L2; under the causal mask in
//                pairs of a long and a short tile), the producer loads the next tile's Q (its own
//                full/empty barriers) and K/V while the consumers finish the current one, O is rescaled
//                outside the ping-pong turn, and O goes out through shared memory by TMA store
//   v5 interleaved the same kernel in v5's first tile order, every head at once (longest tiles first),
//                kept to measure the L2-aware order against
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o build/attention/flash_hopper
//        kernels/attention/flash_hopper.cu
// Run:   ./build/attention/flash_hopper --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
//        ./build/attention/flash_hopper --bench     (b4 h16 s4096 d128, causal and not)
//        ./build/attention/flash_hopper --batch 4 --heads 16 --seq 4096 --plant zeros-small   (or tile:
//        the ping-pong kernel's output corrupted after the run; passes only if the check rejects it)
//        ./build/attention/flash_hopper --profile persistent   (or interleaved, pingpong: one unchecked
//        launch on the benchmark's non-causal case, for ncu)
// It runs only on compute capability 9.0 (H100, H200) and waives itself elsewhere: wgmma and setmaxnreg
// are sm_90a instructions. The device code exists only in the compute_90a pass, so the file also builds
// for sm_75 to sm_100, where the kernels are empty stubs that main never launches.
//
// course: gpu
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --batch 3 --heads 2 --seq 77 --dim 128 --causal --padding
// course: run --batch 3 --heads 2 --seq 1000 --dim 128 --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 3 --heads 2 --seq 333 --dim 64 --causal --padding
// course: run --batch 2 --heads 2 --seq 1000 --dim 64
// course: run --batch 1 --heads 2 --seq 4097 --dim 128 --causal
// course: run --batch 2 --heads 1 --seq 4097 --dim 128
// course: run --batch 6 --heads 8 --seq 700 --dim 128 --causal --padding
// course: run --batch 6 --heads 8 --seq 500 --dim 64 --padding
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --plant zeros-small
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --causal --plant tile
// course: bench --bench
// course: invariant faster causal non-causal max-ratio=0.8
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "../common/check.cuh"
#include "../common/hopper.cuh"
#include "../common/planted.cuh"
#include "attention_common.cuh"
#include "flash_fwd.cuh"  // flash::fast_exp2, pack_bf16, quad_row_sums, kLog2e, kLn2, and (through it) the -inf rules

// CPU reference: attn::forward_reference (attention_common.cuh), float64 from the bf16 inputs.

using bf16 = __nv_bfloat16;

// --8<-- [start:sizes]
// A block owns 128 query rows: consumer warpgroup w (0 or 1) computes rows 64w..64w+63, the m = 64
// of one wgmma. K and V stream past in tiles of 128 keys, two stages each. Every tile (Q, a K stage, a
// V stage) is 128 rows x D, stored by TMA as D / 64 panels of 128 rows x 64 columns: 64 bf16 = 128 bytes
// is the widest row the 128-byte swizzle takes.
constexpr int kBlockM = 128, kBlockN = 128, kStages = 2, kConsumers = 2, kThreads = (kConsumers + 1) * 128;
template <int D>
constexpr int kTileElems = 128 * D;
template <int D>  // Q + 2 stages of K + 2 of V, + 1 KiB: swizzled tiles start on a 1 KiB boundary
constexpr size_t kSmemBytes = (1 + 2 * kStages) * kTileElems<D> * sizeof(bf16) + 1024;
// Registers per thread after setmaxnreg: 128 x 40 + 256 x 232 = 64512 of the SM's 65536 (gemm_hopper.cu's
// split). A consumer thread holds S (64 fp32), O (D / 2 fp32) and P (32 registers of bf16 pairs).
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
static_assert(128 * kProducerRegs + kConsumers * 128 * kConsumerRegs <= 65536, "more registers than an SM has");
// --8<-- [end:sizes]

// v5 (kPersistent) runs the ping-pong consumers inside a persistent block with a TMA-store epilogue;
// kInterleaved is the same kernel walking the tiles in its first order (every head at once), kept to
// measure the L2-aware order against.
enum class Schedule { kPlain, kOverlap, kPingPong, kPersistent, kInterleaved };
__host__ __device__ constexpr bool takes_turns(Schedule s) {
  return s == Schedule::kPingPong || s == Schedule::kPersistent;
}

struct Params {
  bf16* o;
  float* lse;          // natural-log logsumexp of each row's scaled scores, +inf for a fully masked row
  const int* key_len;  // per batch entry
  int heads, seq, bh_count, q_tiles;  // q_tiles: 128-row query tiles per sequence
  float scale_log2;    // scale * log2(e): the scores go straight into exp2
  bool causal;
  bool by_head;        // v5's tile order: head after head (else every head at once, v5's first order)
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace course::hopper;
using flash::fast_exp2;
using flash::kLn2;
using flash::pack_bf16;

constexpr int kPanelCols = kSwizzleElems, kPanelElems = 128 * kPanelCols;  // one 128 x 64 panel: 16 KiB

__device__ __forceinline__ void fence_registers(unsigned* r, int n) {  // see fence_accumulators
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// --8<-- [start:consumer]
// O *= alpha, row by row (the rescale before the next P V).
template <int N>
__device__ __forceinline__ void scale_rows(float (&o)[N], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] *= alpha[(i / 2) % 2];
}
// P to bf16 in the A-operand layout: the accumulator registers of two neighbouring 8-key blocks are,
// element for element, the A fragment of one 16-key k-step (rows l/4 and +8, keys 2(l%4), +1, +8, +9).
__device__ __forceinline__ void to_bf16_pairs(const float (&s)[64], unsigned (&pf)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) pf[i] = pack_bf16(s[2 * i], s[2 * i + 1]);
}
// Wait for the Q tile (its phase: how many Q tiles this block has loaded before, mod 2); in ping-pong,
// warpgroup 0 takes the block's first turn.
template <Schedule kSchedule>
__device__ __forceinline__ void wait_for_q(uint64_t* q_full, unsigned q_phase, int cw, bool first_turn) {
  mbar_wait(q_full, q_phase);
  if constexpr (takes_turns(kSchedule))
    if (cw == 1 && first_turn) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
}
// Ping-pong: warpgroup cw may issue its wgmma once the other has issued theirs. Named barrier 1 + cw
// counts 256 threads: this warpgroup's 128 waiting and the other's 128 arriving.
template <Schedule kSchedule>
__device__ __forceinline__ void pingpong_turn_begin(int cw) {
  if constexpr (takes_turns(kSchedule))
    asm volatile("bar.sync %0, 256;\n" ::"r"(1 + cw) : "memory");
}
template <Schedule kSchedule>
__device__ __forceinline__ void pingpong_turn_end(int cw, bool last) {
  // warpgroup 1's last turn in the block has no one to hand over to
  if constexpr (takes_turns(kSchedule))
    if (!(cw == 1 && last)) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - cw) : "memory");
}

// The end of a consumer: the output is divided by the row sum once, here, and written with the
// logsumexp (natural log). Rows past the sequence are not stored.
template <int D>
__device__ __forceinline__ void store_rows(const Params& p, const float (&o)[D / 2], float (&l)[2],
                                           const float (&m)[2], int bh, int r_lo, int r_hi, int t) {
  float inv[2];
  flash::quad_row_sums(l, inv);  // fully masked row: l == 0, output zeros
  bf16* out = p.o + 1LL * bh * p.seq * D;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int c = 8 * j + 2 * t;
    if (r_lo < p.seq)
      *reinterpret_cast<unsigned*>(out + 1LL * r_lo * D + c) = pack_bf16(o[4 * j] * inv[0], o[4 * j + 1] * inv[0]);
    if (r_hi < p.seq)
      *reinterpret_cast<unsigned*>(out + 1LL * r_hi * D + c) =
          pack_bf16(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]);
  }
  if (t == 0) {
    if (r_lo < p.seq) p.lse[1LL * bh * p.seq + r_lo] = l[0] == 0.0f ? INFINITY : (m[0] + log2f(l[0])) * kLn2;
    if (r_hi < p.seq) p.lse[1LL * bh * p.seq + r_hi] = l[1] == 0.0f ? INFINITY : (m[1] + log2f(l[1])) * kLn2;
  }
}

// The online softmax of key tile n for this thread's rows r_lo and r_hi (wg_row0: their warpgroup's first
// row, for the causal test), in place: S becomes P = exp2(S * scale_log2 - m) in fp32; m, l and alpha (the
// factor O must be multiplied by before this tile's P V) are updated. The maximum is taken over the raw
// scores (the scale is positive, so it commutes with max) and the scale is folded into one fused
// multiply-add per score: exp2(fma(s, scale_log2, -m)).
__device__ __forceinline__ void online_softmax(const Params& p, int n, int key_len, int wg_row0, int r_lo, int r_hi,
                                               int t, float (&s)[64], float (&m)[2], float (&l)[2],
                                               float (&alpha)[2]) {
  const int j0 = n * kBlockN;
  // Only tiles that cross the padding or the diagonal need the per-element test.
  const bool needs_mask = j0 + kBlockN > key_len || (p.causal && j0 + kBlockN - 1 > wg_row0);
  float mx[2] = {SOFTMAX_NEG_INF, SOFTMAX_NEG_INF};
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = e < 2 ? r_lo : r_hi, key = j0 + 8 * j + 2 * t + (e & 1);
      if (needs_mask && (key >= key_len || (p.causal && key > row))) s[4 * j + e] = SOFTMAX_NEG_INF;
      mx[e / 2] = fmaxf(mx[e / 2], s[4 * j + e]);
    }
  }
  float neg_base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // the four lanes of a quad hold the same two rows
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m[h], mx[h] * p.scale_log2);  // -inf stays -inf
    neg_base[h] = -softmax_base(m_new);           // the -inf rule: nothing unmasked yet -> base 0
    alpha[h] = fast_exp2(m[h] + neg_base[h]);     // rescales what was accumulated at the old maximum
    m[h] = m_new;
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    s[i] = fast_exp2(fmaf(s[i], p.scale_log2, neg_base[(i / 2) % 2]));  // masked: exp2(-inf) = 0
    sum[(i / 2) % 2] += s[i];
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
}

// Where one query tile's work sits in the block's sequence of tiles: v4 blocks have one tile; a persistent
// block (v5) runs many, and its K/V rings, its Q barrier and the ping-pong turns carry on from tile to tile.
struct TileTurns {
  unsigned ring;     // K/V tiles this block has consumed before this query tile: the rings' position
  unsigned q_phase;  // Q tiles loaded before this one, mod 2
  bool first;        // the block's first query tile with work (warpgroup 1 hands warpgroup 0 the first turn)
  bool last;         // the block's last query tile with work (warpgroup 1's last turn hands over to no one)
};

// One consumer warpgroup: 64 query rows (rows row0 + 64 cw ...) against the tile's n_tiles K/V tiles,
// then `epilogue(o, l, m, r_lo, r_hi)` writes them. q_empty (v5 only, else null) is released as soon
// as the last S = Q K^T is done, so that the producer can load the next tile's Q during the last P V.
// Thread layout of every 64 x N wgmma accumulator (mma.sync's, repeated): warp w holds rows 16w..16w+15;
// for each 8-column block j, lane l holds row l/4 columns 8j + 2(l%4) and +1 in d[4j], d[4j+1], and the
// same columns 8 rows down in d[4j+2], d[4j+3].
template <int D, Schedule kSchedule, typename Epilogue>
__device__ __forceinline__ void consume(const Params& p, const bf16* sQ, const bf16* sK, const bf16* sV,
                                        uint64_t* q_full, uint64_t* q_empty, uint64_t* k_full, uint64_t* k_empty,
                                        uint64_t* v_full, uint64_t* v_empty, int cw, int row0, int key_len,
                                        int n_tiles, const TileTurns& turns, const Epilogue& epilogue) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int r_lo = row0 + cw * 64 + warp * 16 + g, r_hi = r_lo + 8;  // the two rows this thread holds
  const int wg_row0 = row0 + cw * 64;                                 // this warpgroup's first row
  float s[64];      // S (then P in fp32): 64 x 128 fp32
  float o[D / 2];   // O: 64 x D fp32
  unsigned pf[32];  // P in bf16, the A operand of O += P V: 8 k-steps of 16 keys x 4 registers
  float m[2] = {SOFTMAX_NEG_INF, SOFTMAX_NEG_INF};  // running maxima of rows r_lo, r_hi (log2 units)
  float l[2] = {0.0f, 0.0f};        // this thread's part of the running sums
  float alpha[2] = {1.0f, 1.0f};    // the rescale the next P V needs first
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;

  // S = Q K^T for stage `st`: D / 16 wgmma of k = 16, the first one overwriting S (scale-d 0).
  auto issue_s = [&](int st) {
    const bf16* q = sQ + cw * 64 * kPanelCols;  // this warpgroup's 64 rows: 8 KiB into each Q panel
    const bf16* k = sK + st * kTileElems<D>;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int off = (kk / 4) * kPanelElems + (kk % 4) * 16;  // panel, then +32 bytes inside the rows
      wgmma_64x128x16_ss(s, smem_desc(q + off), smem_desc(k + off), kk > 0);
    }
    wgmma_commit();
  };
  // O += P V for stage `st`: 8 wgmma of k = 16 keys, A = P from registers, B = V (N-major, see below).
  auto issue_pv = [&](int st) {
    const bf16* v = sV + st * kTileElems<D>;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      wgmma_64xNx16_rs<D>(o, &pf[4 * kk], smem_desc_mn(v + kk * 16 * kPanelCols, kPanelElems * sizeof(bf16)));
    wgmma_commit();
  };
  // K/V tile n of this query tile sits in stage (ring + n) % kStages, in that stage's phase below.
  auto stage = [&](int n) { return static_cast<int>((turns.ring + n) % kStages); };
  auto phase = [&](int n) { return ((turns.ring + n) / kStages) & 1; };
  // This warp no longer reads stage `st` of a ring: one arrival per consumer warp.
  auto release = [&](uint64_t* empty) {
    if (lane == 0) mbar_arrive(empty);
  };
  auto release_k = [&](int n) {  // after S_n; after the last S, Q is free too
    release(&k_empty[stage(n)]);
    if (q_empty != nullptr && n == n_tiles - 1) release(q_empty);
  };
  auto softmax = [&](int n) { online_softmax(p, n, key_len, wg_row0, r_lo, r_hi, t, s, m, l, alpha); };
  auto rescale_o = [&] { scale_rows<D / 2>(o, alpha); };
  auto convert_p = [&] { to_bf16_pairs(s, pf); };
  auto turn_begin = [&] { pingpong_turn_begin<kSchedule>(cw); };
  // v5 rescales O as soon as P_{n-1} V_{n-1} is done, outside the turn, so that the other warpgroup's
  // products do not wait for it; v4 rescales it inside the turn, just before P_{n-1} V_{n-1} is issued.
  constexpr bool kRescaleAfterWait = kSchedule == Schedule::kPersistent;
  auto turn_end = [&](int n) { pingpong_turn_end<kSchedule>(cw, turns.last && n == n_tiles - 1); };
  if (n_tiles > 0) wait_for_q<kSchedule>(q_full, turns.q_phase, cw, turns.first);
  if constexpr (kSchedule == Schedule::kPlain) {
    for (int n = 0; n < n_tiles; ++n) {
      mbar_wait(&k_full[stage(n)], phase(n));
      issue_s(stage(n));
      wgmma_wait<0>();
      fence_accumulators<64>(s);
      release_k(n);
      softmax(n);
      rescale_o();
      convert_p();
      mbar_wait(&v_full[stage(n)], phase(n));
      issue_pv(stage(n));
      wgmma_wait<0>();
      fence_accumulators<D / 2>(o);
      fence_registers(pf, 32);
      release(&v_empty[stage(n)]);
    }
  } else if (n_tiles > 0) {
    // --8<-- [start:overlap]
    // Tile 0's scores first; then for each next tile n: issue S_n, rescale O, issue O += P_{n-1} V_{n-1},
    // and compute tile n's softmax while that product runs. P_{n-1} is still being read by the tensor
    // cores until the second wait, so the new P goes to the bf16 registers only after it.
    turn_begin();
    mbar_wait(&k_full[stage(0)], phase(0));
    issue_s(stage(0));
    turn_end(0);
    wgmma_wait<0>();
    fence_accumulators<64>(s);
    release_k(0);
    softmax(0);
    convert_p();
    for (int n = 1; n < n_tiles; ++n) {
      turn_begin();
      mbar_wait(&k_full[stage(n)], phase(n));
      issue_s(stage(n));
      if constexpr (!kRescaleAfterWait) rescale_o();  // O holds the tiles before n - 1, at the maximum before n - 1's
      mbar_wait(&v_full[stage(n - 1)], phase(n - 1));
      issue_pv(stage(n - 1));
      turn_end(n);
      wgmma_wait<1>();  // S_n is done (P_{n-1} V_{n-1} may still run)
      fence_accumulators<64>(s);
      release_k(n);
      softmax(n);
      wgmma_wait<0>();  // P_{n-1} V_{n-1} is done: its V stage and the bf16 P registers are free
      fence_accumulators<D / 2>(o);
      fence_registers(pf, 32);
      release(&v_empty[stage(n - 1)]);
      if constexpr (kRescaleAfterWait) rescale_o();  // O holds the tiles before n, now at tile n's maximum
      convert_p();
    }
    const int last = n_tiles - 1;
    if constexpr (!kRescaleAfterWait) rescale_o();
    mbar_wait(&v_full[stage(last)], phase(last));
    issue_pv(stage(last));
    wgmma_wait<0>();
    fence_accumulators<D / 2>(o);
    fence_registers(pf, 32);
    release(&v_empty[stage(last)]);
    // --8<-- [end:overlap]
  }

  epilogue(o, l, m, r_lo, r_hi);
}
// --8<-- [end:consumer]
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// --8<-- [start:kernel]
// The work of query tile q_tile of head bh (tile_work_at), and of the tile numbered `tile` in v4's order
// (tile_work): tile t is query tile q_tiles - 1 - t / bh_count of head t % bh_count, every head's last
// tiles first, which under a causal mask are the longest, so that the short ones fill the gaps at the end.
struct TileWork {
  int bh, row0, key_len, n_tiles;  // n_tiles: K/V tiles to visit, 0 for an empty sequence
};
__device__ __forceinline__ TileWork tile_work_at(const Params& p, int bh, int q_tile) {
  TileWork w;
  w.bh = bh;
  w.row0 = q_tile * kBlockM;
  w.key_len = p.key_len[w.bh / p.heads];
  const int kv_end = p.causal ? min(w.key_len, w.row0 + kBlockM) : w.key_len;  // no tile wholly above the diagonal
  w.n_tiles = (kv_end + kBlockN - 1) / kBlockN;
  return w;
}
__device__ __forceinline__ TileWork tile_work(const Params& p, int tile) {
  return tile_work_at(p, tile % p.bh_count, p.q_tiles - 1 - tile / p.bh_count);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The producer's part of one query tile (one thread): Q, then the K and V tiles through the rings: wait
// until a stage is empty, announce its bytes on the stage's full barrier, issue the copies. TMA zero-fills
// rows past the sequence. q_empty (v5 only, else null): wait until the consumers are done with the last Q.
template <int D>
__device__ __forceinline__ void produce(const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                        bf16* sQ, bf16* sK, bf16* sV, uint64_t* q_full, uint64_t* q_empty,
                                        uint64_t* k_full, uint64_t* k_empty, uint64_t* v_full, uint64_t* v_empty,
                                        const TileWork& w, const TileTurns& turns) {
  constexpr unsigned kTileBytes = kTileElems<D> * sizeof(bf16);
  if (q_empty != nullptr) mbar_wait(q_empty, turns.q_phase ^ 1);  // passes at once for the first Q
  mbar_expect_bytes(q_full, kTileBytes);
  for (int c = 0; c < D; c += kPanelCols) tma_load_3d(sQ + c * 128, tm_q, c, w.row0, w.bh, q_full);
  for (int n = 0; n < w.n_tiles; ++n) {
    const int st = (turns.ring + n) % kStages;
    const unsigned free_phase = (((turns.ring + n) / kStages) & 1) ^ 1;  // passes at once in the first round
    bf16* k = sK + st * kTileElems<D>;
    bf16* v = sV + st * kTileElems<D>;
    mbar_wait(&k_empty[st], free_phase);
    mbar_expect_bytes(&k_full[st], kTileBytes);
    for (int c = 0; c < D; c += kPanelCols) tma_load_3d(k + c * 128, tm_k, c, n * kBlockN, w.bh, &k_full[st]);
    mbar_wait(&v_empty[st], free_phase);
    mbar_expect_bytes(&v_full[st], kTileBytes);
    for (int c = 0; c < D; c += kPanelCols) tma_load_3d(v + c * 128, tm_v, c, n * kBlockN, w.bh, &v_full[st]);
  }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// v4: one block per query tile (tile = blockIdx.x). The producer warpgroup gives its registers to the
// consumers; one of its threads loads Q once and then walks the K and V tiles through the ring.
template <int D, Schedule kSchedule>
__global__ void __launch_bounds__(kThreads, 1)
    flash_fwd_hopper(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                     const __grid_constant__ CUtensorMap tm_v, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  bf16* sQ = align_1k(smem_raw);
  bf16* sK = sQ + kTileElems<D>;            // kStages tiles
  bf16* sV = sK + kStages * kTileElems<D>;  // kStages tiles
  __shared__ __align__(8) uint64_t q_full, k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];

  const TileWork w = tile_work(p, blockIdx.x);
  const TileTurns one_tile{0, 0, true, true};

  if (threadIdx.x == 0) {
    mbar_init(&q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&k_full[s], 1);  // the producer's arrive (+ the TMA bytes)
      mbar_init(&v_full[s], 1);
      mbar_init(&k_empty[s], kConsumers * 4);  // one arrive per consumer warp
      mbar_init(&v_empty[s], kConsumers * 4);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0 && w.n_tiles > 0)
      produce<D>(&tm_q, &tm_k, &tm_v, sQ, sK, sV, &q_full, nullptr, k_full, k_empty, v_full, v_empty, w, one_tile);
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    consume<D, kSchedule>(p, sQ, sK, sV, &q_full, nullptr, k_full, k_empty, v_full, v_empty, wg - 1, w.row0,
                          w.key_len, w.n_tiles, one_tile, [&](auto& o, auto& l, auto& m, int r_lo, int r_hi) {
                            store_rows<D>(p, o, l, m, w.bh, r_lo, r_hi, threadIdx.x % 4);
                          });
  }
#else
  (void)tm_q, (void)tm_k, (void)tm_v, (void)p;
#endif
}
// --8<-- [end:kernel]

// --8<-- [start:persistent]
// v5 adds a staging tile for O to the shared memory: 128 rows x D, each consumer warpgroup's 64 rows stored
// as D / 64 panels of 64 x 64 with the 128-byte swizzle, the layout its TMA store reads.
template <int D>
constexpr size_t kPersistentSmemBytes = kSmemBytes<D> + kTileElems<D> * sizeof(bf16);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A TMA store of the box at (c0, c1, c2) of a 3-D tensor from shared memory: hopper.cuh's tma_store_2d
// with one more coordinate. Rows past the map's sequence length are not written.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(src))
               : "memory");
}
// The 128 threads of consumer warpgroup cw (named barriers 3 and 4; 1 and 2 are the ping-pong's).
__device__ __forceinline__ void warpgroup_sync(int cw) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(3 + cw) : "memory");
}

// v5's epilogue for one warpgroup's 64 rows: O / l as bf16 into the staging tile (swizzled: 16-byte chunk
// j of row r goes to chunk j ^ (r % 8), so the 32 lanes of a warp hit 32 different banks), then one
// thread stores it with TMA, which writes whole 128-byte rows and skips rows past the sequence. The
// staging tile is reused by the next query tile: that thread first waits until its previous store has
// read it. The logsumexp is written as in v4.
template <int D>
__device__ __forceinline__ void store_tile_tma(const Params& p, const CUtensorMap* tm_o, bf16* sO,
                                               const float (&o)[D / 2], float (&l)[2], const float (&m)[2],
                                               int cw, int bh, int row0, int r_lo, int r_hi) {
  const int tid = threadIdx.x % 128, warp = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  float inv[2];
  flash::quad_row_sums(l, inv);  // fully masked row: l == 0, output zeros
  unsigned char* half = reinterpret_cast<unsigned char*>(sO + cw * 64 * D);  // this warpgroup's D / 64 panels
  if (tid == 0) tma_store_wait_read<0>();  // the previous tile's store has read the staging tile
  warpgroup_sync(cw);
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {  // columns 8j + 2t, +1: panel j / 8, 16-byte chunk j % 8 of the row
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp * 16 + g + 8 * h;  // row % 8 == g
      unsigned char* dst = half + (j / 8) * 64 * 128 + row * 128 + (((j % 8) ^ g) * 16) + 4 * t;
      *reinterpret_cast<unsigned*>(dst) = pack_bf16(o[4 * j + 2 * h] * inv[h], o[4 * j + 2 * h + 1] * inv[h]);
    }
  }
  fence_proxy_async_smem();  // make the ordinary stores visible to the TMA engine
  warpgroup_sync(cw);
  if (tid == 0 && row0 + 64 * cw < p.seq) {
#pragma unroll
    for (int c = 0; c < D; c += kPanelCols) tma_store_3d(tm_o, half + c * 128, c, row0 + 64 * cw, bh);
    tma_store_commit();
  }
  if (t == 0) {
    if (r_lo < p.seq) p.lse[1LL * bh * p.seq + r_lo] = l[0] == 0.0f ? INFINITY : (m[0] + log2f(l[0])) * kLn2;
    if (r_hi < p.seq) p.lse[1LL * bh * p.seq + r_hi] = l[1] == 0.0f ? INFINITY : (m[1] + log2f(l[1])) * kLn2;
  }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// v5's tile order: the k-th query tile of this block (bh = kPastLast past its last). Head after head, so
// that the blocks in flight share the K and V of a few heads, which stay in L2. Without a mask every tile
// costs the same and block b runs tiles b, b + gridDim.x, ... of that order. Under the causal mask the
// tiles' costs run from 1 to q_tiles K/V tiles, so the order deals out pairs: pair j of a head is its
// tile q_tiles - 1 - j (the longest) and tile j (the shortest), together about q_tiles + 1 K/V tiles,
// and block b runs pair b, then pair b + gridDim.x, ..., the long tile first; the blocks move in step.
// With an odd q_tiles the middle tile has no partner: bh = kNoTile marks the missing one. The interleaved
// order (v5's first, kept to measure against) runs tiles b, b + gridDim.x, ... of tile_work's numbering.
constexpr int kPastLast = -2, kNoTile = -1;
__device__ __forceinline__ TileWork block_tile(const Params& p, int k) {
  if (!p.by_head || !p.causal) {
    const int tile = blockIdx.x + k * gridDim.x;
    if (tile >= p.q_tiles * p.bh_count) return TileWork{kPastLast, 0, 0, 0};
    return p.by_head ? tile_work_at(p, tile / p.q_tiles, tile % p.q_tiles) : tile_work(p, tile);
  }
  const int pairs_per_head = (p.q_tiles + 1) / 2, pair = blockIdx.x + (k / 2) * gridDim.x;
  if (pair >= pairs_per_head * p.bh_count) return TileWork{kPastLast, 0, 0, 0};
  const int j = pair % pairs_per_head, long_tile = p.q_tiles - 1 - j;
  if (k % 2 == 1 && j == long_tile) return TileWork{kNoTile, 0, 0, 0};
  return tile_work_at(p, pair / pairs_per_head, k % 2 == 0 ? long_tile : j);
}

// v5: a persistent grid, one block per SM, each walking its tiles in block_tile's order (a static
// schedule). The rings, the Q barriers and the ping-pong turns run
// on across tiles: the producer loads the next tile's Q as soon as the consumers' last S = Q K^T is done
// (q_empty) and its first K/V tiles as stages free up, while the consumers still run the last P V and
// the epilogue of the current tile.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_fwd_persistent(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_o,
                         const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  bf16* sQ = align_1k(smem_raw);
  bf16* sK = sQ + kTileElems<D>;            // kStages tiles
  bf16* sV = sK + kStages * kTileElems<D>;  // kStages tiles
  bf16* sO = sV + kStages * kTileElems<D>;  // the staging tile of the epilogue
  __shared__ __align__(8) uint64_t q_full, q_empty, k_full[kStages], k_empty[kStages], v_full[kStages],
      v_empty[kStages];

  if (threadIdx.x == 0) {
    mbar_init(&q_full, 1);
    mbar_init(&q_empty, kConsumers * 4);  // one arrive per consumer warp
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&k_full[s], 1);
      mbar_init(&v_full[s], 1);
      mbar_init(&k_empty[s], kConsumers * 4);
      mbar_init(&v_empty[s], kConsumers * 4);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  // Every role walks the same tiles and counts the same way; a tile with nothing to load (an empty
  // sequence) moves no counter. `last` looks ahead for a later tile with work.
  auto walk = [&](auto&& body) {
    TileTurns turns{0, 0, true, false};
    for (int k = 0;; ++k) {
      const TileWork w = block_tile(p, k);
      if (w.bh == kPastLast) break;
      if (w.bh == kNoTile) continue;  // the missing partner of an odd q_tiles' middle tile
      turns.last = true;
      for (int n = k + 1; turns.last; ++n) {
        const TileWork later = block_tile(p, n);
        if (later.bh == kPastLast) break;
        turns.last = later.n_tiles == 0;
      }
      body(w, turns);
      if (w.n_tiles > 0) {
        turns.ring += w.n_tiles;
        turns.q_phase ^= 1;
        turns.first = false;
      }
    }
  };

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0)
      walk([&](const TileWork& w, const TileTurns& turns) {
        if (w.n_tiles > 0)
          produce<D>(&tm_q, &tm_k, &tm_v, sQ, sK, sV, &q_full, &q_empty, k_full, k_empty, v_full, v_empty, w, turns);
      });
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1;
    walk([&](const TileWork& w, const TileTurns& turns) {
      consume<D, Schedule::kPersistent>(p, sQ, sK, sV, &q_full, &q_empty, k_full, k_empty, v_full, v_empty, cw,
                                        w.row0, w.key_len, w.n_tiles, turns,
                                        [&](auto& o, auto& l, auto& m, int r_lo, int r_hi) {
                                          store_tile_tma<D>(p, &tm_o, sO, o, l, m, cw, w.bh, w.row0, r_lo, r_hi);
                                        });
    });
    if (threadIdx.x % 128 == 0) tma_store_wait_all();  // the block's last stores finish before it exits
  }
#else
  (void)tm_q, (void)tm_k, (void)tm_v, (void)tm_o, (void)p;
#endif
}
// --8<-- [end:persistent]

// --8<-- [start:launch]
const char* impl_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::kPlain: return "flash v4 wgmma+TMA (bf16, fp32 acc)";
    case Schedule::kOverlap: return "flash v4 wgmma+TMA overlapped softmax (bf16, fp32 acc)";
    case Schedule::kPingPong: return "flash v4 wgmma+TMA overlapped, ping-pong (bf16, fp32 acc)";
    case Schedule::kPersistent: return "flash v5 persistent ping-pong, TMA-store epilogue (bf16, fp32 acc)";
    default: return "flash v5 persistent, heads interleaved tile order (bf16, fp32 acc)";
  }
}
const char* variant_name(Schedule schedule) {  // the CHECK names' and --profile's word for each
  switch (schedule) {
    case Schedule::kPlain: return "v4 plain";
    case Schedule::kOverlap: return "v4 overlap";
    case Schedule::kPingPong: return "v4 pingpong";
    case Schedule::kPersistent: return "v5 persistent";
    default: return "v5 interleaved";
  }
}
constexpr Schedule kSchedules[] = {Schedule::kPlain, Schedule::kOverlap, Schedule::kPingPong, Schedule::kPersistent,
                                   Schedule::kInterleaved};

// The forward's buffers (attention_common.cuh) plus the tensor maps TMA reads Q, K and V through and v5
// writes O through (boxes of 64 rows: one consumer warpgroup's).
struct DeviceBuffers : attn::ForwardBuffers {
  CUtensorMap tm_q{}, tm_k{}, tm_v{}, tm_o{};  // built once per problem, outside the timed launches
};

DeviceBuffers upload_with_maps(const attn::Shape& s, const attn::Inputs& in) {
  DeviceBuffers d{attn::upload_and_allocate(s, in)};
  const int bh = s.batch * s.heads;
  d.tm_q = course::hopper::make_kmajor_map_3d(d.in.q, bh, s.seq, s.dim, kBlockM);
  d.tm_k = course::hopper::make_kmajor_map_3d(d.in.k, bh, s.seq, s.dim, kBlockN);
  d.tm_v = course::hopper::make_kmajor_map_3d(d.in.v, bh, s.seq, s.dim, kBlockN);
  d.tm_o = course::hopper::make_kmajor_map_3d(d.o, bh, s.seq, s.dim, kBlockM / kConsumers);
  return d;
}

// Shared memory beyond the default 48 KB: opt in once per kernel, outside any timing.
template <int D>
void opt_in() {
  constexpr int smem = static_cast<int>(kSmemBytes<D>);
  CUDA_CHECK(
      cudaFuncSetAttribute(flash_fwd_hopper<D, Schedule::kPlain>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_hopper<D, Schedule::kOverlap>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_hopper<D, Schedule::kPingPong>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_persistent<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kPersistentSmemBytes<D>)));
}

// v5's grid: one block per SM (fewer when there are fewer query tiles).
int persistent_blocks(int tiles) {
  static const int sms = [] {
    int device = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return std::max(1, std::min(sms, tiles));
}

template <int D>
void launch_d(Schedule schedule, const DeviceBuffers& d, const Params& p) {
  const dim3 grid(p.q_tiles * p.bh_count), block(kThreads);
  constexpr size_t smem = kSmemBytes<D>;
  if (schedule == Schedule::kPlain)
    flash_fwd_hopper<D, Schedule::kPlain><<<grid, block, smem>>>(d.tm_q, d.tm_k, d.tm_v, p);
  else if (schedule == Schedule::kOverlap)
    flash_fwd_hopper<D, Schedule::kOverlap><<<grid, block, smem>>>(d.tm_q, d.tm_k, d.tm_v, p);
  else if (schedule == Schedule::kPingPong)
    flash_fwd_hopper<D, Schedule::kPingPong><<<grid, block, smem>>>(d.tm_q, d.tm_k, d.tm_v, p);
  else {
    constexpr size_t persistent_smem = kPersistentSmemBytes<D>;
    const dim3 blocks(persistent_blocks(p.q_tiles * p.bh_count));
    flash_fwd_persistent<D><<<blocks, block, persistent_smem>>>(d.tm_q, d.tm_k, d.tm_v, d.tm_o, p);
  }
  CUDA_CHECK_LAUNCH();
}

void launch(Schedule schedule, const attn::Shape& s, const DeviceBuffers& d) {
  const Params p{d.o, d.lse, d.in.key_len, s.heads, s.seq, s.batch * s.heads, course::ceil_div(s.seq, kBlockM),
                 static_cast<float>(s.scale()) * flash::kLog2e, s.causal, schedule == Schedule::kPersistent};
  if (s.dim == 64) launch_d<64>(schedule, d, p);
  else launch_d<128>(schedule, d, p);
}
// --8<-- [end:launch]

// Poison, run, copy back, check every chosen row against the float64 reference. P is rounded to bf16
// before P V, as in flash_fwd.cu's tensor-core versions: the same rounded reference.
bool run_and_check(Schedule schedule, const attn::Shape& s, const attn::ForwardReference& ref, const DeviceBuffers& d,
                   attn::Plant plant) {
  const std::string name = std::string(variant_name(schedule)) + " " + attn::case_name(s) + attn::padded_suffix(s);
  return attn::run_and_check_forward(name, s, ref, d, true, plant, [&] { launch(schedule, s, d); });
}

// Check every schedule on one shape (a plant: the ping-pong one only), then (bench) time each: a wrong
// kernel gets no BENCH row. The reference is computed once, on every CPU core, for all of them.
bool check_and_time(const attn::Shape& s, uint64_t seed, bool bench, attn::Plant plant = attn::Plant::kNone) {
  const attn::Inputs in = attn::make_inputs(s, seed);
  const DeviceBuffers d = upload_with_maps(s, in);
  const attn::ForwardReference ref = attn::forward_reference(s, in, attn::rows_to_check(s));
  bool ok = true;
  for (Schedule schedule : kSchedules) {
    if (plant != attn::Plant::kNone && schedule != Schedule::kPingPong) continue;
    const bool good = run_and_check(schedule, s, ref, d, plant);
    ok = good && ok;
    if (!bench || !good) continue;
    attn::bench_forward(s, impl_name(schedule), d.bytes, 20, [&] { launch(schedule, s, d); });
  }
  d.release();
  return ok;
}

void profile_once(Schedule schedule, uint64_t seed) {
  const attn::Shape s = attn::bench_shape(false);
  const DeviceBuffers d = upload_with_maps(s, attn::make_inputs(s, seed));
  launch(schedule, s, d);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("profiled one launch of %s on %s\n", variant_name(schedule), attn::case_name(s).c_str());
  d.release();
}

int main(int argc, char** argv) {
  // --profile pingpong|persistent|interleaved: one unchecked launch of that kernel on the benchmark's
  // non-causal case (hopper_attention_ncu.py); the schedules 2, 3 and 4.
  const int which = attn::take_profile_option(argc, argv, {"pingpong", "persistent", "interleaved"});
  const int profile = which < 0 ? -1 : which + 2;
  const attn::Options opt = attn::parse_options(argc, argv, 1 << 17);
  course::require_compute_capability(9, 0, "wgmma, setmaxnreg and TMA");
  course::hopper::require_sm90a("wgmma and setmaxnreg are sm_90a instructions");
  opt_in<64>();
  opt_in<128>();

  if (profile >= 0) {
    profile_once(kSchedules[profile], opt.seed);
    return 0;
  }

  if (!opt.bench) return check_and_time(opt.shape, opt.seed, false, opt.plant) ? 0 : course::kExitFail;
  // --8<-- [start:bench]
  // The chapter's benchmark, the same cases as flash_fwd.cu and sdpa_torch.py: bf16, batch 4 x 16 heads,
  // sequence 4096, head dimension 128, causal and not. Each timed kernel is first checked on every row.
  bool ok = true;
  for (bool is_causal : {false, true}) ok = check_and_time(attn::bench_shape(is_causal), opt.seed, true) && ok;
  // --8<-- [end:bench]
  return ok ? 0 : course::kExitFail;
}
