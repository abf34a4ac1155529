// gemm_hopper.cu: a bf16 GEMM for Hopper built up in four steps towards cuBLAS, C = A * B^T (bf16 inputs
// and output, fp32 accumulation), every step checked and timed in one program beside cuBLAS.
//
// Taught in docs/fast-matmul-fft/hopper-gemm.md, after docs/fast-matmul-fft/wgmma.md. A is M x K and B
// is N x K, both row-major ("K-major"); C is M x N row-major. K must be a multiple of 8: TMA needs row
// strides that are multiples of 16 bytes (the program says so and exits 1 otherwise). M and N are free:
// TMA zero-fills the parts of a tile outside the matrices, and the stores skip them.
//   v0  cuBLAS cublasGemmEx (the peer), bf16 in and out, CUBLAS_COMPUTE_32F
//   v1  TMA + wgmma with a 4-stage mbarrier pipeline: one warpgroup, 128 x 128 tiles, one thread of it
//       issuing the copies of the stages ahead
//   v2  warp specialisation: a producer warpgroup (one thread issuing TMA, registers given back with
//       setmaxnreg.dec) and two consumer warpgroups (setmaxnreg.inc) on 128 x 256 tiles, full and empty
//       mbarriers per stage, one batch of wgmma kept in flight
//   v3  persistent: one block per SM walks over the tiles in grouped order (L2 reuse); the ring of stages
//       runs on across tiles, so the producer loads the next tile while the consumers store this one
//   v4  clusters of 2 blocks on vertically adjacent tiles: each block loads half of the shared B tile
//       and TMA multicasts it into both blocks' shared memory
//   v5  v3 with its epilogue through shared memory and TMA stores: each consumer warpgroup writes its
//       64 x 256 tile in 64 x 64 pieces into two swizzled staging buffers, and one thread hands each
//       piece to the TMA engine, so the warpgroup returns to its wgmmas without waiting for C's writes
//       (needs N a multiple of 8, TMA's 16-byte row strides; for other N it runs v3's epilogue)
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -lcublas -o build/matmul/gemm_hopper
//        kernels/matmul/gemm_hopper.cu
// Run:   ./build/matmul/gemm_hopper --m 200 --n 135 --k 72          (every version; --version 3 for one)
//        ./build/matmul/gemm_hopper --bench
//        ./build/matmul/gemm_hopper --profile 4 --m 4096 --n 4096 --k 4096   (one launch of v4, for ncu)
//        ./build/matmul/gemm_hopper --plant zeros     (the check at 8192^3 must reject a planted fault)
// It runs only on compute capability 9.0 (H100, H200) and waives itself elsewhere: wgmma and setmaxnreg
// are sm_90a instructions, and sm_90a code runs on no other GPU. The PTX wrappers and the tensor maps live
// in kernels/common/hopper.cuh. The device code is compiled only where __CUDA_ARCH_FEAT_SM90_ALL is
// defined (the compute_90a pass), so the file also builds for sm_75 to sm_100, where the kernels are
// empty stubs that main never launches.
//
// course: gpu
// course: libs cublas
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --m 200 --n 135 --k 72
// course: run --m 1 --n 1 --k 8
// course: run --m 2100 --n 2100 --k 200
// course: run --m 1000 --n 700 --k 520 --sms 5
// course: run --m 900 --n 600 --k 136 --sms 3
// course: run --plant zeros
// course: run --plant tile
// course: bench --bench
#include <cuda_bf16.h>

#include <algorithm>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/hopper.cuh"  // mbarrier, TMA, cluster, setmaxnreg, wgmma wrappers and tensor maps

using bf16 = __nv_bfloat16;
namespace hopper = course::hopper;

// The float64 reference (course::gemm_reference with BLayout::kNxK: C = A B^T from the bf16 inputs), the
// checks, the benchmark loop and main are in matmul_harness.cuh, included at the end.

// --8<-- [start:sizes]
constexpr int BK = hopper::kSwizzleElems;  // 64 bf16 = 128 bytes: one row of a 128-byte-swizzled tile
// v1: one warpgroup computes a 128 x 128 tile of C (two 64-row halves).
constexpr int V1_BM = 128, V1_BN = 128, V1_STAGES = 4, V1_THREADS = 128;
constexpr int V1_STAGE_BYTES = (V1_BM + V1_BN) * BK * static_cast<int>(sizeof(bf16));  // 32 KiB
// v2 to v4: a producer warpgroup and two consumer warpgroups (64 rows each) on a 128 x 256 tile.
constexpr int BM = 128, BN = 256, STAGES = 4, CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;
constexpr int A_TILE = BM * BK, B_TILE = BN * BK;                                // elements per stage
constexpr int STAGE_BYTES = (A_TILE + B_TILE) * static_cast<int>(sizeof(bf16));  // 48 KiB
// Registers per thread after setmaxnreg: 128 x 40 + 256 x 232 = 64512 of the SM's 65536.
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536, "more registers than an SM has");
constexpr int GROUP_ROWS = 16;  // v3 to v5: tiles are visited in groups 16 tile-rows tall (L2 reuse)
// v5: each consumer warpgroup stages its 64 x 256 result in 64 x 64 pieces (128-byte rows, as the
// 128-byte swizzle wants) through two buffers of its own: 4 x 8 KiB beside the 4 stages' 192 KiB.
constexpr int EPI_ROWS = 64, EPI_COLS = 64, EPI_PIECE = EPI_ROWS * EPI_COLS;  // elements per buffer
constexpr int EPI_BUFFERS = 2;
// + 1 KiB of slack: 128-byte-swizzled tiles must start on a 1 KiB boundary.
constexpr size_t kV1SmemBytes = static_cast<size_t>(V1_STAGES) * V1_STAGE_BYTES + 1024;
constexpr size_t kSmemBytes = static_cast<size_t>(STAGES) * STAGE_BYTES + 1024;
constexpr size_t kV5SmemBytes = kSmemBytes + static_cast<size_t>(CONSUMERS) * EPI_BUFFERS * EPI_PIECE * sizeof(bf16);
static_assert(kV5SmemBytes <= 227 * 1024, "more shared memory than a Hopper block may use");
// --8<-- [end:sizes]

// --8<-- [start:schedule]
// Tile t of a tiles_m x tiles_n grid in grouped order: columns of `group` tile-rows, so that the
// blocks running at the same time share rows of A and columns of B in L2. group = 1 is row-major.
__host__ __device__ inline void tile_coords(int t, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
  const int per_group = group * tiles_n;
  const int first_m = (t / per_group) * group;
  const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;  // the last group may be shorter
  const int local = t % per_group;
  tm = first_m + local % rows;
  tn = local / rows;
}
// --8<-- [end:schedule]

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// --8<-- [start:store_tma]
// v5's epilogue: the same 64 x 256 accumulator tile leaves through shared memory and TMA stores, in four
// 64 x 64 pieces through the warpgroup's two staging buffers. Thread 0 of the warpgroup (the leader)
// issues the stores, so the bulk groups that track them are its own; the warpgroup's named barrier
// (`bar_id`, 128 threads: the other warpgroup never waits for it) orders everyone around the leader.
// Piece p goes to buffer p % 2: before filling it, the leader waits until the store that last read it
// (two pieces back) has finished reading; the newest store may still run. `stored_last` says whether the
// previous piece was stored at all (pieces wholly outside C are skipped): if not, the newest store may be
// the one that read this buffer, and the leader waits for every store.
__device__ __forceinline__ void warpgroup_sync(int bar_id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(bar_id) : "memory");
}
__device__ __forceinline__ void store_tile_tma(const float* d, bf16* stage, const CUtensorMap* tmC, int M, int N,
                                               int row0, int col0, int bar_id, bool& stored_last) {
  using namespace course::hopper;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const bool leader = tid == 0;
  const int r_top = warp * 16 + lane / 4;  // this thread's rows in the piece: r_top and r_top + 8
#pragma unroll
  for (int piece = 0; piece < BN / EPI_COLS; ++piece) {
    bf16* buf = stage + (piece % EPI_BUFFERS) * EPI_PIECE;
    if (leader) {
      if (stored_last) tma_store_wait_read<1>(); else tma_store_wait_read<0>();
    }
    warpgroup_sync(bar_id);  // buf is free
#pragma unroll
    for (int t = 0; t < EPI_COLS / 8; ++t) {  // 8-column block t of the piece: 16-byte chunk t of a row
      const int q = piece * (EPI_COLS / 8) + t;  // the same block's index in the 256-wide tile
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r_top + 8 * h;
        // The 128-byte swizzle the map names: chunk t of row r sits at chunk t XOR (r mod 8), so the
        // 8 rows that one store instruction writes fall in 8 different 16-byte groups of banks.
        const int chunk = t ^ (r % 8);
        *reinterpret_cast<__nv_bfloat162*>(buf + r * EPI_COLS + chunk * 8 + 2 * (lane % 4)) =
            __floats2bfloat162_rn(d[4 * q + 2 * h], d[4 * q + 2 * h + 1]);
      }
    }
    fence_proxy_async_smem();  // every writer: make its shared-memory writes visible to the TMA engine
    warpgroup_sync(bar_id);    // the whole piece is written
    const int col = col0 + piece * EPI_COLS;
    stored_last = row0 < M && col < N;  // the same in every thread; TMA clips a box that is partly outside
    if (leader && stored_last) {
      tma_store_2d(tmC, buf, col, row0);
      tma_store_commit();
    }
  }
}
// --8<-- [end:store_tma]
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// --8<-- [start:v1]
// v1: one warpgroup (128 threads) per 128 x 128 tile of C. Thread 0 keeps the copies of the next
// V1_STAGES k-steps in flight; every thread waits for a stage's mbarrier, the warpgroup multiplies it
// (two 64 x 128 halves, four 16-wide steps of K each), and thread 0 refills the stage.
__global__ void __launch_bounds__(V1_THREADS, 1)
    gemm_v1_pipeline(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                     const __grid_constant__ CUtensorMap tmB, bf16* C) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace course::hopper;
  extern __shared__ unsigned char smem_raw[];
  bf16* sA = align_1k(smem_raw);           // V1_STAGES x (128 x 64)
  bf16* sB = sA + V1_STAGES * V1_BM * BK;  // V1_STAGES x (128 x 64)
  __shared__ __align__(8) uint64_t full[V1_STAGES];
  const int brow = blockIdx.y * V1_BM, bcol = blockIdx.x * V1_BN;
  const int ktiles = course::ceil_div(K, BK);
  auto load_stage = [&](int kt) {  // thread 0 only
    const int s = kt % V1_STAGES;
    mbar_expect_bytes(&full[s], V1_STAGE_BYTES);
    tma_load_2d(sA + s * V1_BM * BK, &tmA, kt * BK, brow, &full[s]);
    tma_load_2d(sB + s * V1_BN * BK, &tmB, kt * BK, bcol, &full[s]);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < V1_STAGES; ++s) mbar_init(&full[s], 1);  // thread 0's arrive (+ the TMA bytes)
    fence_mbarrier_init();
  }
  __syncthreads();  // the barriers are initialised before anyone uses them
  if (threadIdx.x == 0)
    for (int kt = 0; kt < min(V1_STAGES, ktiles); ++kt) load_stage(kt);  // fill the ring

  float d[2][64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[0][i] = d[1][i] = 0.0f;
  fence_accumulators<64>(d[0]);
  fence_accumulators<64>(d[1]);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt % V1_STAGES;
    mbar_wait(&full[s], (kt / V1_STAGES) & 1);  // the stage's k-step kt has landed
    const bf16* a = sA + s * V1_BM * BK;
    const bf16* b = sB + s * V1_BN * BK;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {  // +16 elements = +32 bytes inside the swizzled rows
      wgmma_64x128x16(d[0], smem_desc(a + kk), smem_desc(b + kk));
      wgmma_64x128x16(d[1], smem_desc(a + 64 * BK + kk), smem_desc(b + kk));
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators<64>(d[0]);
    fence_accumulators<64>(d[1]);
    // wait_group covers only this warp's share: the block barrier makes sure all four warps are done
    // reading stage s before thread 0 overwrites it.
    __syncthreads();
    if (threadIdx.x == 0 && kt + V1_STAGES < ktiles) load_stage(kt + V1_STAGES);
  }
  store_accumulator<V1_BN>(d[0], C, M, N, brow, bcol);
  store_accumulator<V1_BN>(d[1], C, M, N, brow + 64, bcol);
#endif
}
// --8<-- [end:v1]

// --8<-- [start:ws]
// v2 to v5: a producer warpgroup and two consumer warpgroups per block, 128 x 256 tiles of C. The block
// walks tiles blockIdx.x / CLUSTER, + gridDim.x / CLUSTER, ... in grouped order (`group` tile-rows):
//   v2  CLUSTER 1, one block per tile, group 1 (row-major, as gemm_wgmma.cu)
//   v3  CLUSTER 1, one block per SM (persistent), group GROUP_ROWS
//   v4  CLUSTER 2: a cluster takes a 256 x 256 tile, block r its rows 128r..128r+127; each block loads
//       its own A and half of B, multicast to both blocks; `tmB` then copies 128-row boxes.
//   v5  v3 with TMA_STORE: the epilogue goes through shared memory and `tmC` (64 x 64 boxes of C).
// The ring of STAGES slots runs on across tiles: `it` counts the k-steps this block has gone through,
// slot it % STAGES, phase (it / STAGES) & 1, the same sequence in the producer and the consumers.
template <int CLUSTER, bool TMA_STORE = false>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_ws(int M, int N, int K, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
            const __grid_constant__ CUtensorMap tmC, bf16* C, int group) {
  static_assert(!(TMA_STORE && CLUSTER > 1), "v5 is v3's single-block kernel");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace course::hopper;
  extern __shared__ unsigned char smem_raw[];
  bf16* sA = align_1k(smem_raw);   // STAGES x (BM x BK)
  bf16* sB = sA + STAGES * A_TILE;  // STAGES x (BN x BK)
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

  const int wg = threadIdx.x / 128;
  const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
  const int tiles_m = course::ceil_div(M, BM * CLUSTER), tiles_n = course::ceil_div(N, BN);
  const int tiles = tiles_m * tiles_n, ktiles = course::ceil_div(K, BK);
  const int first_tile = blockIdx.x / CLUSTER, tile_step = gridDim.x / CLUSTER;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                         // the local producer's arrive (+ the TMA bytes)
      mbar_init(&empty[s], CONSUMERS * 4 * CLUSTER);  // one arrive per consumer warp of every block
    }
    fence_mbarrier_init();
  }
  // The other block's copies and arrivals target this block's barriers: all must be initialised first.
  if constexpr (CLUSTER > 1) cluster_sync(); else __syncthreads();

  if (wg == 0) {  // producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = first_tile; t < tiles; t += tile_step) {
        int tm, tn;
        tile_coords(t, tiles_m, tiles_n, group, tm, tn);
        const int row = (tm * CLUSTER + static_cast<int>(rank)) * BM, col = tn * BN;
        const int a_row = row < M ? row : 0;  // a block below C (odd tile rows, v4) loads rows it never stores
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // slot free in every block (passes in round 0)
          mbar_expect_bytes(&full[s], STAGE_BYTES);        // A + the whole B, whoever sends it
          tma_load_2d(sA + s * A_TILE, &tmA, kt * BK, a_row, &full[s]);
          if constexpr (CLUSTER == 1) {
            tma_load_2d(sB + s * B_TILE, &tmB, kt * BK, col, &full[s]);
          } else {
            constexpr int rows = BN / CLUSTER;  // this block's share of the B tile
            tma_load_2d_multicast(sB + s * B_TILE + rank * rows * BK, &tmB, kt * BK,
                                  col + static_cast<int>(rank) * rows, &full[s],
                                  static_cast<uint16_t>((1u << CLUSTER) - 1));
          }
        }
      }
    }
  } else {  // consumers: warpgroup 1 computes rows 0..63 of the tile, warpgroup 2 rows 64..127
    setmaxnreg_inc<CONSUMER_REGS>();
    const int row_in_tile = (wg - 1) * 64;
    auto release = [&](int s) {  // this warp has finished reading slot s (in every block of the cluster)
      if (threadIdx.x % 32 == 0) {
        if constexpr (CLUSTER == 1) {
          mbar_arrive(&empty[s]);
        } else {
          mbar_arrive(&empty[s]);  // this block's barrier: a local arrive
          for (unsigned r = 0; r < CLUSTER; ++r)
            if (r != rank) mbar_arrive_cluster(&empty[s], r);  // the other block's, through the cluster
        }
      }
    };
    float d[128];
    int it = 0;
    bf16* stage = sB + STAGES * B_TILE + (wg - 1) * EPI_BUFFERS * EPI_PIECE;  // v5: this warpgroup's buffers
    bool stored_last = false;                                                  // v5: see store_tile_tma
    for (int t = first_tile; t < tiles; t += tile_step) {
      int tm, tn;
      tile_coords(t, tiles_m, tiles_n, group, tm, tn);
      const int row = (tm * CLUSTER + static_cast<int>(rank)) * BM, col = tn * BN;
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.0f;
      fence_accumulators<128>(d);
      int previous = 0;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
          wgmma_64x256x16(d, smem_desc(sA + s * A_TILE + row_in_tile * BK + kk), smem_desc(sB + s * B_TILE + kk));
        wgmma_commit();
        wgmma_wait<1>();  // the previous k-step's batch is done (this one may still run): free its slot
        if (kt > 0) release(previous);
        previous = s;
      }
      wgmma_wait<0>();
      fence_accumulators<128>(d);
      release(previous);
      // The producer is already filling the ring with the next tile while this warpgroup stores.
      if constexpr (TMA_STORE)
        store_tile_tma(d, stage, &tmC, M, N, row + row_in_tile, col, wg, stored_last);  // barrier wg: 1 or 2
      else
        store_accumulator<BN>(d, C, M, N, row + row_in_tile, col);
    }
    // v5: the stores must have read their shared memory before the block (and its memory) goes away.
    if constexpr (TMA_STORE)
      if (threadIdx.x % 128 == 0) tma_store_wait_all();
  }
  // No block may leave while the other can still arrive on its barriers.
  if constexpr (CLUSTER > 1) {
    __syncwarp();
    cluster_sync();
  }
#endif
}
// --8<-- [end:ws]

struct Problem {
  int M, N, K;
  const bf16 *A, *B;
  bf16* C;
};

// --8<-- [start:cublas]
// Row-major C = A B^T is column-major C^T = B A^T (as in gemm_wgmma.cu).
static cublasHandle_t g_cublas = nullptr;
static void launch_cublas(const Problem& p) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, p.N, p.M, p.K, &one, p.B, CUDA_R_16BF, p.K, p.A,
                            CUDA_R_16BF, p.K, &zero, p.C, CUDA_R_16BF, p.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:cublas]

// --8<-- [start:launch]
// How many blocks the persistent versions start: one per SM (or --sms), and for v4 no more clusters of 2
// than can be resident at once (an SM count that GPCs split unevenly leaves some SMs out of clusters).
struct Machine {
  int sms = 0, clusters = 0;
};

static cudaLaunchConfig_t cluster_config(dim3 grid, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = kSmemBytes;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = 2;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// v5's map of C: 64 x 64 boxes with the 128-byte swizzle that store_tile_tma writes. TMA needs C's row
// stride (2N bytes) to be a multiple of 16: for other N there is no map, and v5 runs v3's epilogue.
static bool c_has_tma_map(const Problem& p) { return p.N % 8 == 0; }
static CUtensorMap make_c_map(const Problem& p) {
  if (!c_has_tma_map(p)) return CUtensorMap{};
  return hopper::make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), p.C, p.M, p.N, EPI_ROWS, EPI_COLS,
                                    CU_TENSOR_MAP_SWIZZLE_128B);
}

struct Hopper {  // the tensor maps are built once per problem, outside the timed launches
  CUtensorMap a, b128, b256, c;  // c: v5 only (the other versions ignore it)
  Machine machine;
  Hopper(const Problem& p, Machine m)
      : a(hopper::make_kmajor_map(p.A, p.M, p.K, BM)),
        b128(hopper::make_kmajor_map(p.B, p.N, p.K, 128)),
        b256(hopper::make_kmajor_map(p.B, p.N, p.K, BN)),
        c(make_c_map(p)),
        machine(m) {}
  void operator()(int version, const Problem& p) const {
    const int tiles = course::ceil_div(p.M, BM) * course::ceil_div(p.N, BN);
    if (version == 1) {
      const dim3 grid(course::ceil_div(p.N, V1_BN), course::ceil_div(p.M, V1_BM));
      gemm_v1_pipeline<<<grid, V1_THREADS, kV1SmemBytes>>>(p.M, p.N, p.K, a, b128, p.C);
    } else if (version == 2) {
      gemm_ws<1><<<tiles, THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b256, c, p.C, 1);
    } else if (version == 3 || (version == 5 && !c_has_tma_map(p))) {
      gemm_ws<1><<<std::min(tiles, machine.sms), THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b256, c, p.C, GROUP_ROWS);
    } else if (version == 5) {
      gemm_ws<1, true><<<std::min(tiles, machine.sms), THREADS, kV5SmemBytes>>>(p.M, p.N, p.K, a, b256, c, p.C,
                                                                               GROUP_ROWS);
    } else {
      const int pair_tiles = course::ceil_div(p.M, 2 * BM) * course::ceil_div(p.N, BN);
      cudaLaunchAttribute attr{};
      const cudaLaunchConfig_t cfg = cluster_config(dim3(2 * std::min(pair_tiles, machine.clusters)), &attr);
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemm_ws<2>, p.M, p.N, p.K, a, b128, c, p.C, GROUP_ROWS / 2));
    }
    CUDA_CHECK_LAUNCH();
  }
};
// --8<-- [end:launch]

static Machine setup_kernels(int sms_wanted) {
  CUDA_CHECK(cudaFuncSetAttribute(gemm_v1_pipeline, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kV1SmemBytes)));
  CUDA_CHECK(
      cudaFuncSetAttribute(gemm_ws<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes)));
  CUDA_CHECK(
      cudaFuncSetAttribute(gemm_ws<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes)));
  CUDA_CHECK(cudaFuncSetAttribute(gemm_ws<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kV5SmemBytes)));
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  Machine m;
  m.sms = sms_wanted > 0 ? std::min(sms_wanted, sms) : sms;
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg = cluster_config(dim3(2 * (sms / 2)), &attr);
  int resident = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&resident, gemm_ws<2>, &cfg));
  if (resident < 1) {
    std::fprintf(stderr, "error: no cluster of 2 blocks with %zu bytes of shared memory each fits on this GPU\n",
                 kSmemBytes);
    std::exit(course::kExitFail);
  }
  m.clusters = std::max(1, std::min(resident, m.sms / 2));
  return m;
}

// --8<-- [start:program]
// What matmul_harness.cuh runs (the checks, the benchmark and main are there).
struct Program {
  using Elem = bf16;
  static constexpr course::BLayout kLayout = course::BLayout::kNxK;
  static constexpr const char* kCheck = "hopper_";
  static constexpr const char* kCase = "bf16 gemm A*B^T %dx%dx%d";  // gemm_wgmma.cu's case names
  static constexpr int kDefault[3] = {200, 135, 72};
  static constexpr int kKMultiple = 8;
  static constexpr bool kAlphaBeta = false;
  static constexpr int kPlantVersion = 5;
  static constexpr int kBenchSizes[] = {4096, 8192};
  static constexpr const char* kImpl[] = {
      "v0 cuBLAS bf16 (A*B^T)",  // the same peer row as gemm_wgmma.cu
      "hopper v1 TMA pipeline (bf16, fp32 acc)",
      "hopper v2 warp-specialised (bf16, fp32 acc)",
      "hopper v3 persistent (bf16, fp32 acc)",
      "hopper v4 cluster multicast (bf16, fp32 acc)",
      "hopper v5 TMA-store epilogue (bf16, fp32 acc)",
  };
  struct Options {
    int only, sms_wanted;  // --version (0: every version), --sms (0: all; fewer = more tiles per block)
    Machine machine;
    explicit Options(const course::Args& args)
        : only(static_cast<int>(args.get_int("--version", 0, 0, 5))),
          sms_wanted(static_cast<int>(args.get_int("--sms", 0, 0, 1024))) {}
    bool selected(int id) const { return only == 0 || id == 0 || id == only; }
    void setup() {
      course::require_compute_capability(9, 0, "wgmma, setmaxnreg and TMA multicast are Hopper instructions");
      hopper::require_sm90a("wgmma and setmaxnreg are sm_90a instructions");
      machine = setup_kernels(sms_wanted);
    }
  };
  struct Launcher {
    Hopper hopper;
    Launcher(const Problem& p, const Options& o) : hopper(p, o.machine) {}
    void operator()(int id, const Problem& p) const { id == 0 ? launch_cublas(p) : hopper(id, p); }
  };
};
// --8<-- [end:program]

#include "matmul_harness.cuh"
