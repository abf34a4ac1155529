// hopper.cuh: the Hopper (sm_90a) building blocks the course's Hopper kernels share: mbarriers, TMA
// loads and stores, clusters, setmaxnreg, wgmma descriptors and instructions, and on the host the
// tensor maps that TMA copies need plus the check that the sm_90a code is the code that runs.
//
// Taught in docs/fast-matmul-fft/wgmma.md and docs/fast-matmul-fft/hopper-gemm.md; included by
// kernels/matmul/gemm_wgmma.cu, kernels/matmul/gemm_hopper.cu and kernels/attention/flash_hopper.cu
// (and by kernels/memory-model/async_copy.cu, for get_encode).
//   device (namespace course::hopper, compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined, i.e. in
//   the compute_90a pass; a program that includes this header still builds for sm_75 to sm_100):
//     smem_u32, mbar_init, fence_mbarrier_init, mbar_expect_bytes, mbar_arrive, mbar_arrive_cluster,
//     mbar_wait                     mbarrier phases with arrival and transaction (byte) counts
//     tma_load_2d, tma_load_2d_multicast, tma_store_2d, tma_store_commit, tma_store_wait_read,
//     tma_store_wait_all, fence_proxy_async_smem
//     cluster_rank, cluster_sync    thread-block clusters
//     setmaxnreg_dec, setmaxnreg_inc
//     smem_desc                     wgmma descriptor of a K-major, 128-byte-swizzled bf16 tile
//     wgmma_64x128x16, wgmma_64x256x16, wgmma_fence, wgmma_commit, wgmma_wait<N>, fence_accumulators<N>
//     store_accumulator<NCOLS>      the plain epilogue: a warpgroup's accumulator (times a scale) to bf16 C
//     tma_load_3d, smem_desc_mn     (attention) a 3-D TMA load; the descriptor of an N-major tile (V in P V)
//     wgmma_64x128x16_ss            (attention) S = Q K^T with scale-d at run time (first k-step overwrites)
//     wgmma_64xNx16_rs<N>           (attention) O += P V with P from registers and B N-major, N = 64 or 128
//     align_1k                      the 1 KiB alignment that 128-byte-swizzled tiles need
//   host:
//     make_tensor_map_2d            a TMA descriptor for a row-major 2-D matrix (cuTensorMapEncodeTiled,
//                                   fetched from the driver at run time: no -lcuda)
//     make_kmajor_map               the bf16 K-major operand map the GEMMs use (boxes of rows x 64)
//     make_kmajor_map_3d            (attention) the same for [batch x heads][seq][dim] tensors
//     require_sm90a                 waive (exit 2) unless compute capability 9.0, error if the driver
//                                   loaded the non-sm_90a stub
//
// course: header
#pragma once

#include <cuda.h>  // CUtensorMap and the driver API's types (the function itself is fetched at run time)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "check.cuh"

namespace course::hopper {

// 64 bf16 values = 128 bytes: one row of a 128-byte-swizzled tile, the widest a swizzled TMA box allows.
constexpr int kSwizzleElems = 64;

// The device code below uses sm_90a-only instructions: it exists only in the compute_90a pass.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// --8<-- [start:mbarrier]
// mbarrier: a barrier object in shared memory with an arrival count and a transaction (byte) count.
// A phase completes when the expected arrivals have arrived and the expected bytes have landed; waiters
// poll the parity of the phase they wait for.
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
// Makes the initialised barriers visible to the TMA engine and to the other blocks of a cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_bytes(uint64_t* bar, unsigned bytes) {  // arrive + expect
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Arrive on the barrier at the same shared-memory offset in block `cta` of this cluster (mapa turns
// the local address into that block's address in the cluster's shared memory window). The arrive keeps
// PTX's default semantics, release at CTA scope, as CUTLASS's ClusterBarrier::arrive does: it tells the
// other block's producer that this block's wgmmas (the async proxy, already waited for) have finished
// reading a stage; no ordinary writes need publishing to the cluster. `.release.cluster` would compile to
// a full MEMBAR.ALL.GPU before every arrive (in the sm_90a SASS), stalling the warp each k-step.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, unsigned cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(cta)
      : "memory");
}
// Wait until the phase with this parity has completed (phases alternate 0, 1, 0, ...).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// --8<-- [end:mbarrier]

// --8<-- [start:tma]
// One TMA copy: the tile at (column c0, row c1) of the tensor described by `map` lands in shared
// memory at `dst`, swizzled as the map says; its bytes count towards `bar`'s transaction count.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}
// The same copy delivered to every block of the cluster named in `cta_mask`, at the same offset in each
// block's shared memory, each copy signalling the barrier at the same offset in its block.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int c0, int c1,
                                                      uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(cta_mask)
      : "memory");
}
// --8<-- [end:tma]

// --8<-- [start:tma_store]
// The reverse copy: the tile in shared memory at `src` (laid out and swizzled as `map` says) is written
// to (column c0, row c1) of the map's matrix; the box is clipped at the matrix's edges (keep the row
// length a multiple of 16 bytes, which TMA's row stride rule already asks of a whole matrix).
// Shared memory written by ordinary stores must first be made visible to the TMA engine (the "async
// proxy"): every writing thread runs fence_proxy_async_smem, then the block section synchronises, then
// one thread issues the store. Stores are tracked in per-thread bulk groups: commit after issuing,
// then wait until at most N groups are still reading their shared memory before reusing it.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map),
               "r"(c0), "r"(c1), "r"(smem_u32(src))
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {  // the source shared memory may be reused
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void tma_store_wait_all() {  // every store of this thread has completed
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
// --8<-- [end:tma_store]

// --8<-- [start:cluster]
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every block in the cluster arrives, then waits: the cluster-wide __syncthreads.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// --8<-- [end:cluster]

// --8<-- [start:setmaxnreg]
// Move registers between the warpgroups of a block: the producer gives registers back to the block's
// pool, the consumers take them (.inc waits until the pool has them). Whole warpgroups execute these.
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
// --8<-- [end:setmaxnreg]

// --8<-- [start:descriptor]
// A wgmma shared-memory descriptor for a K-major bf16 tile written by TMA with the 128-byte swizzle:
//   bits  0-13  start address >> 4
//   bits 16-29  leading byte offset >> 4 (unused for swizzled K-major tiles; 1 by convention)
//   bits 32-45  stride byte offset >> 4: from one 8-row group to the next, 8 rows x 128 bytes = 1024
//   bits 49-51  base offset: 0, because every tile starts on a 1 KiB boundary
//   bits 62-63  swizzle mode: 1 = 128-byte swizzle
// Stepping 16 elements along K inside the 128-byte rows adds 32 bytes to the start address.
__device__ __forceinline__ uint64_t smem_desc(const __nv_bfloat16* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(16 >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (1ull << 62);
}
// --8<-- [end:descriptor]

// --8<-- [start:wgmma]
// A wgmma names each fp32 accumulator register of the thread twice: in the instruction text (%0, %1, ...)
// and as an asm operand "+f"(d[i]) (read and written). These macros write both lists once.
#define HOPPER_REGS_0_31                                                                                  \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define HOPPER_REGS_0_63                                                                                  \
  HOPPER_REGS_0_31 ", "                                                                                   \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                    \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define HOPPER_REGS_64_127                                                                                \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                    \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                    \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "         \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define HOPPER_ACC8(d, i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define HOPPER_ACC32(d, i) HOPPER_ACC8(d, i), HOPPER_ACC8(d, i + 8), HOPPER_ACC8(d, i + 16), HOPPER_ACC8(d, i + 24)
#define HOPPER_ACC64(d, i) HOPPER_ACC32(d, i), HOPPER_ACC32(d, i + 32)
#define HOPPER_ACC128(d) HOPPER_ACC64(d, 0), HOPPER_ACC64(d, 64)

// D (64 x 256, fp32: 128 registers per thread) += A (64 x 16) * B (256 x 16)^T, both from shared memory.
__device__ __forceinline__ void wgmma_64x256x16(float* d, uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, 1, 0;\n"  // scale-d = true: D += A B (not D = A B)
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      HOPPER_REGS_0_63 ", " HOPPER_REGS_64_127
      "}, %128, %129, accumulate, 1, 1, 0, 0;\n"  // A, B not negated; both K-major
      "}\n"
      : HOPPER_ACC128(d)
      : "l"(desc_a), "l"(desc_b));
}
// --8<-- [end:wgmma]

// D (64 x 128, fp32: 64 registers per thread) += A (64 x 16) * B (128 x 16)^T, both from shared memory:
// wgmma_64x128x16_ss (below) with scale-d always on.
__device__ __forceinline__ void wgmma_64x128x16_ss(float* d, uint64_t desc_a, uint64_t desc_b, bool accumulate);
__device__ __forceinline__ void wgmma_64x128x16(float* d, uint64_t desc_a, uint64_t desc_b) {
  wgmma_64x128x16_ss(d, desc_a, desc_b, true);
}

// --8<-- [start:wgmma_sync]
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most PENDING committed batches of this warp's wgmma are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Tell the compiler the accumulators may change here: it must not move their reads or writes across
// a wgmma wait (the asm statements above name them only as the wgmma's own operands).
template <int NREGS>
__device__ __forceinline__ void fence_accumulators(float* d) {
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// --8<-- [end:wgmma_sync]

// --8<-- [start:tma_3d]
// A TMA copy from a 3-D tensor: the box at (c0, c1, c2), innermost coordinate first. The attention kernel
// maps [batch x heads][seq][dim] this way, so that a tile running past the end of a sequence is
// zero-filled instead of reading the next head's rows.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}
// --8<-- [end:tma_3d]

// --8<-- [start:descriptor_mn]
// A wgmma descriptor for an "MN-major" bf16 operand written by TMA with the 128-byte swizzle: the rows of
// the tile run along K and each holds 64 contiguous values along M or N (128 bytes), as a V tile stored
// [key][dim] is for O += P V (K = keys, N = dim). The canonical layout is that of CUTLASS's
// make_gmma_desc<Major::MN> for SW128: within a 64-wide panel, 8 rows of 128 bytes form a 1 KiB swizzle
// atom and the next 8 rows along K start 1024 bytes later (stride byte offset); the next 64 values along
// M/N are in the next panel, `panel_bytes` further on (leading byte offset). Stepping 16 rows along K adds
// 16 x 128 = 2048 bytes to the start address. The instruction must set imm-trans for this operand.
__device__ __forceinline__ uint64_t smem_desc_mn(const __nv_bfloat16* tile, unsigned panel_bytes) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((panel_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (1ull << 62);
}
// --8<-- [end:descriptor_mn]

// --8<-- [start:wgmma_rs]
// D (64 x 128, fp32: 64 registers per thread) = A (64 x 16) * B (128 x 16)^T, + D when `accumulate`: the
// same instruction as wgmma_64x128x16, with scale-d a run-time predicate so that the first k-step of a
// product overwrites D instead of adding to it (no zeroing of the accumulators before each product).
__device__ __forceinline__ void wgmma_64x128x16_ss(float* d, uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      HOPPER_REGS_0_63
      "}, %64, %65, p, 1, 1, 0, 0;\n"  // A, B not negated; both K-major
      "}\n"
      : HOPPER_ACC64(d, 0)
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

// D (64 x N, fp32: N / 2 registers per thread) += A (64 x 16, bf16) * B (16 x N). A comes from registers,
// 4 per thread in mma.sync's A-fragment layout (warp w: rows 16w + l/4 and + 8, columns 2(l%4), +1, +8,
// +9); B from shared memory, N-major (imm-trans-b = 1): its 16 rows of k each hold N contiguous values,
// as V's rows hold the head dimension. N = 64 or 128.
// The instruction's text for both N, written once: REGS names the N / 2 accumulators, A_B the four A
// registers and B's descriptor (the operands after them); scale-d is on (D += A B), nothing is negated,
// and B is transposed (N-major).
#define HOPPER_WGMMA_RS(N_TEXT, REGS, A_B, ACC, a, desc_b)                                              \
  asm volatile("{\n"                                                                                     \
               ".reg .pred p;\n"                                                                         \
               "setp.ne.b32 p, 1, 0;\n"                                                                  \
               "wgmma.mma_async.sync.aligned.m64n" N_TEXT "k16.f32.bf16.bf16 {" REGS "}, " A_B            \
               ", p, 1, 1, 1;\n"                                                                         \
               "}\n"                                                                                     \
               : ACC                                                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b))
template <int N>
__device__ __forceinline__ void wgmma_64xNx16_rs(float* d, const unsigned* a, uint64_t desc_b) {
  static_assert(N == 64 || N == 128, "wgmma_64xNx16_rs: N is 64 or 128");
  if constexpr (N == 128)
    HOPPER_WGMMA_RS("128", HOPPER_REGS_0_63, "{%64, %65, %66, %67}, %68", HOPPER_ACC64(d, 0), a, desc_b);
  else
    HOPPER_WGMMA_RS("64", HOPPER_REGS_0_31, "{%32, %33, %34, %35}, %36", HOPPER_ACC32(d, 0), a, desc_b);
}
// --8<-- [end:wgmma_rs]

// --8<-- [start:store_accumulator]
// The plain epilogue: a warpgroup's 64 x NCOLS fp32 accumulator, times `scale` (1 for a bf16 GEMM; an
// FP8 GEMM's dequantisation factor), rounded once to bf16 and written to row-major C at (row0, col0),
// skipping what lies outside C. Layout (mma.sync's, repeated): warp w holds rows 16w..16w+15; for each
// 8-column block t, lane l holds (row l/4, columns 2(l%4) and +1) in d[4t], d[4t+1], and the same
// columns 8 rows down in d[4t+2], d[4t+3].
template <int NCOLS>
__device__ __forceinline__ void store_accumulator(const float* d, __nv_bfloat16* C, int M, int N, int row0, int col0,
                                                  float scale = 1.0f) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int r0 = row0 + warp * 16 + lane / 4;
#pragma unroll
  for (int t = 0; t < NCOLS / 8; ++t) {
    const int c = col0 + t * 8 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
      if (r >= M) continue;
      __nv_bfloat16* p = C + static_cast<size_t>(r) * N + c;
      const float x = scale * d[4 * t + 2 * h], y = scale * d[4 * t + 2 * h + 1];
      if (c + 1 < N && N % 2 == 0) {  // c is even, so with N even the pair is 4-byte aligned
        *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
      } else {
        if (c < N) p[0] = __float2bfloat16(x);
        if (c + 1 < N) p[1] = __float2bfloat16(y);
      }
    }
  }
}
// --8<-- [end:store_accumulator]

// 128-byte-swizzled tiles must start on a 1 KiB boundary (the swizzle pattern repeats every 1 KiB).
template <typename T = __nv_bfloat16>
__device__ __forceinline__ T* align_1k(unsigned char* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// --8<-- [start:tensor_map]
// A TMA descriptor for a row-major rows x cols matrix, copied in boxes of box_rows x box_cols (at most 256
// each; with the 128-byte swizzle a box row may hold at most 128 bytes). Elements outside the matrix read
// as zero and are not written by stores. The row stride cols * elem_bytes must be a multiple of 16 bytes.
// --8<-- [start:encode]
// The driver's cuTensorMapEncodeTiled, reached through the runtime (no -lcuda needed), looked up once.
inline PFN_cuTensorMapEncodeTiled_v12000 get_encode() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
      std::fprintf(stderr, "error: the driver does not provide cuTensorMapEncodeTiled\n");
      std::exit(course::kExitFail);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}
// --8<-- [end:encode]
inline CUtensorMap make_tensor_map_2d(CUtensorMapDataType type, size_t elem_bytes, const void* ptr, int rows,
                                      int cols, int box_rows, int box_cols, CUtensorMapSwizzle swizzle) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};  // innermost first
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * elem_bytes};               // bytes, rows
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = get_encode()(&map, type, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "error: cuTensorMapEncodeTiled failed (%d)\n", static_cast<int>(r));
    std::exit(course::kExitFail);
  }
  return map;
}
// A GEMM operand: a row-major rows x K bf16 matrix ("K-major"), copied in boxes of box_rows x 64 (128 bytes
// a row, the widest row the 128-byte swizzle allows), which smem_desc describes. K must be a multiple of 8.
inline CUtensorMap make_kmajor_map(const __nv_bfloat16* ptr, int rows, int K, int box_rows) {
  return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(__nv_bfloat16), ptr, rows, K, box_rows,
                            kSwizzleElems, CU_TENSOR_MAP_SWIZZLE_128B);
}
// --8<-- [end:tensor_map]

// --8<-- [start:tensor_map_3d]
// A TMA descriptor for a bf16 tensor of `outer` matrices of rows x cols, row-major and packed (the
// attention layout: outer = batch x heads, rows = seq, cols = head dim), copied in boxes of box_rows x 64
// columns of one matrix with the 128-byte swizzle. Rows past a matrix's end read as zero. cols must be a
// multiple of 8 (16-byte row strides).
inline CUtensorMap make_kmajor_map_3d(const __nv_bfloat16* ptr, int outer, int rows, int cols, int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(outer)};  // innermost first
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols) * sizeof(__nv_bfloat16),
                                 static_cast<cuuint64_t>(rows) * cols * sizeof(__nv_bfloat16)};  // bytes
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(kSwizzleElems), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = get_encode()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<__nv_bfloat16*>(ptr), dims,
                                  strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "error: cuTensorMapEncodeTiled failed (%d)\n", static_cast<int>(r));
    std::exit(course::kExitFail);
  }
  return map;
}
// --8<-- [end:tensor_map_3d]

// Which code did the driver load? A program that includes this header is built for several targets (the
// harness adds sm_75 to sm_100 beside the page's sm_90a). In the course's recorded runs on H100 and H200, a
// binary holding both sm_90 and sm_90a code ran the sm_90a code; should a driver ever pick the sm_90 stub
// instead, this probe says so and require_sm90a stops with an error rather than time an empty kernel.
__global__ void built_for_sm90a(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

// sm_90a code runs on compute capability 9.0 only: not on Ampere, and not on Blackwell (10.x), which has no
// wgmma. require_compute_capability checks "at least", so the check here is exact: anything but 9.0 waives.
inline void require_sm90a(const char* why) {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    std::printf("WAIVED needs compute capability exactly 9.0 (%s; sm_90a code runs on no other GPU); "
                "this GPU is %d.%d\n", why, major, minor);
    std::exit(course::kExitWaived);
  }
  int* flag = nullptr;
  int have = 0;
  CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  built_for_sm90a<<<1, 1>>>(flag);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(&have, flag, sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(flag));
  if (!have) {
    std::fprintf(stderr, "error: the driver loaded code without the sm_90a instructions on this 9.0 GPU; "
                         "build with -gencode=arch=compute_90a,code=sm_90a\n");
    std::exit(course::kExitFail);
  }
}

}  // namespace course::hopper
