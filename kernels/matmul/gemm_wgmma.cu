// gemm_wgmma.cu: bf16 matrix multiply on Hopper with wgmma and TMA, C = A * B^T (bf16 inputs and
// output, fp32 accumulation), compared with cuBLAS in the same precision and layout.
//
// Taught in docs/fast-matmul-fft/wgmma.md. A is M x K and B is N x K, both row-major ("K-major", the
// layout of nn.Linear's weight); C is M x N row-major. K must be a multiple of 8 (TMA needs 16-byte
// row strides); M and N are free, and the edges of every tile are zero-filled by TMA.
//   v0  cuBLAS cublasGemmEx (the peer), bf16 in and out, CUBLAS_COMPUTE_32F
//   v1  wgmma + TMA: 128 x 256 tiles, one producer warpgroup (TMA copies into a 4-stage ring of shared
//       memory, synchronised with mbarriers) and two consumer warpgroups (each a 64 x 256 wgmma per
//       16-wide step of K, straight from shared memory)
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -lcublas -o build/matmul/gemm_wgmma
//        kernels/matmul/gemm_wgmma.cu
// Run:   ./build/matmul/gemm_wgmma --m 200 --n 135 --k 72
//        ./build/matmul/gemm_wgmma --bench
//        ./build/matmul/gemm_wgmma --plant zeros     (the check at 8192^3 must reject a planted fault)
// It runs only on compute capability 9.0 (H100, H200) and waives itself elsewhere. The wgmma, TMA and
// mbarrier wrappers live in kernels/common/hopper.cuh; they and the kernel's body are compiled only where
// __CUDA_ARCH_FEAT_SM90_ALL is defined (the compute_90a pass), so the file also builds for sm_75 to
// sm_100, where the kernel is an empty stub; main refuses to run a stub.
//
// course: gpu
// course: libs cublas
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --m 200 --n 135 --k 72
// course: run --m 1 --n 1 --k 8
// course: run --m 129 --n 257 --k 520
// course: run --plant zeros
// course: run --plant tile
// course: bench --bench
#include <cuda_bf16.h>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/hopper.cuh"  // mbarrier, TMA, wgmma wrappers and tensor maps (shown on the page)

using bf16 = __nv_bfloat16;
namespace hopper = course::hopper;

// The float64 reference (course::gemm_reference with BLayout::kNxK: C = A B^T from the bf16 inputs), the
// checks, the benchmark loop and main are in matmul_harness.cuh, included at the end.

constexpr int BM = 128, BN = 256, BK = hopper::kSwizzleElems, STAGES = 4;  // BK: one 128-byte swizzled row
constexpr int CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;
constexpr int A_TILE = BM * BK, B_TILE = BN * BK;  // elements per stage
constexpr int STAGE_BYTES = (A_TILE + B_TILE) * static_cast<int>(sizeof(bf16));
constexpr size_t kSmemBytes = static_cast<size_t>(STAGES) * STAGE_BYTES + 1024;  // + room to align to 1 KiB

// --8<-- [start:kernel]
__global__ void __launch_bounds__(THREADS, 1)
    gemm_wgmma_tma(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                   const __grid_constant__ CUtensorMap tmB, bf16* C) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // wgmma exists only in code built for sm_90a
  using namespace course::hopper;
  extern __shared__ unsigned char smem_raw[];
  bf16* tiles = align_1k(smem_raw);  // 128-byte swizzled tiles must start on a 1 KiB boundary
  bf16* sA = tiles;                    // STAGES x (BM x BK)
  bf16* sB = tiles + STAGES * A_TILE;  // STAGES x (BN x BK)
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;
  const int ktiles = course::ceil_div(K, BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                  // the producer's arrive (+ the TMA bytes)
      mbar_init(&empty[s], CONSUMERS * 4);     // one arrive per consumer warp
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  if (wg == 0) {  // producer warpgroup: one thread issues every copy
    if (tid == 0) {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);  // slot free? (passes at once in the first round)
        mbar_expect_bytes(&full[s], STAGE_BYTES);
        tma_load_2d(sA + s * A_TILE, &tmA, kt * BK, brow, &full[s]);
        tma_load_2d(sB + s * B_TILE, &tmB, kt * BK, bcol, &full[s]);
      }
    }
    return;
  }
  // Consumer warpgroups: wg 1 computes rows 0..63 of the tile, wg 2 rows 64..127.
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  const int row0 = (wg - 1) * 64;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(&full[s], (kt / STAGES) & 1);  // the tiles of step kt have landed
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16)  // +16 elements = +32 bytes inside the swizzled 128-byte rows
      wgmma_64x256x16(d, smem_desc(sA + s * A_TILE + row0 * BK + kk), smem_desc(sB + s * B_TILE + kk));
    wgmma_commit();
    wgmma_wait<0>();
    if (tid % 32 == 0) mbar_arrive(&empty[s]);  // this warp is done reading the slot
  }
  // The epilogue walks the accumulator's fragment layout (store_accumulator, kernels/common/hopper.cuh).
  store_accumulator<BN>(d, C, M, N, brow + row0, bcol);
#endif
}
// --8<-- [end:kernel]

struct Problem {
  int M, N, K;
  const bf16 *A, *B;
  bf16* C;
};

struct Wgmma {  // the tensor maps are built once per problem, outside the timed launches
  CUtensorMap a, b;
  explicit Wgmma(const Problem& p)
      : a(hopper::make_kmajor_map(p.A, p.M, p.K, BM)), b(hopper::make_kmajor_map(p.B, p.N, p.K, BN)) {}
  void operator()(const Problem& p) const {
    const dim3 grid(course::ceil_div(p.N, BN), course::ceil_div(p.M, BM));
    gemm_wgmma_tma<<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b, p.C);
    CUDA_CHECK_LAUNCH();
  }
};

// --8<-- [start:cublas]
// Row-major C = A B^T is column-major C^T = B A^T: B (read as K x N column-major) transposed, times A
// (read as K x M column-major).
static cublasHandle_t g_cublas = nullptr;
static void launch_cublas(const Problem& p) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, p.N, p.M, p.K, &one, p.B, CUDA_R_16BF, p.K, p.A,
                            CUDA_R_16BF, p.K, &zero, p.C, CUDA_R_16BF, p.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:cublas]

// --8<-- [start:program]
// What matmul_harness.cuh runs (the checks, the benchmark and main are there).
struct Program {
  using Elem = bf16;
  static constexpr course::BLayout kLayout = course::BLayout::kNxK;
  static constexpr const char* kCheck = "wgmma_";
  static constexpr const char* kCase = "bf16 gemm A*B^T %dx%dx%d";
  static constexpr int kDefault[3] = {200, 135, 72};
  static constexpr int kKMultiple = 8;
  static constexpr bool kAlphaBeta = false;
  static constexpr int kPlantVersion = 1;
  static constexpr int kBenchSizes[] = {256, 512, 1024, 2048, 4096, 8192};
  static constexpr const char* kImpl[] = {"v0 cuBLAS bf16 (A*B^T)", "v1 wgmma + TMA"};
  struct Options {
    explicit Options(const course::Args&) {}
    bool selected(int) const { return true; }
    void setup() const {
      hopper::require_sm90a("wgmma is an sm_90a instruction");
      CUDA_CHECK(cudaFuncSetAttribute(gemm_wgmma_tma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kSmemBytes)));
    }
  };
  struct Launcher {
    Wgmma wgmma;
    Launcher(const Problem& p, const Options&) : wgmma(p) {}
    void operator()(int id, const Problem& p) const { id == 0 ? launch_cublas(p) : wgmma(p); }
  };
};
// --8<-- [end:program]

#include "matmul_harness.cuh"
