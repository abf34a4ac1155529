// hgemm_tc.cu: bf16 matrix multiply on tensor cores with WMMA, C = A * B (bf16 inputs and output,
// fp32 accumulation), compared with cuBLAS in the same precision.
//
// Taught in docs/fast-matmul-fft/tensor-cores.md. Row-major A (M x K), B (K x N), C (M x N).
//   v0  cuBLAS cublasGemmEx, bf16 in and out, CUBLAS_COMPUTE_32F (the peer)
//   v1  WMMA: 128 x 128 block tiles, 8 warps of 64 x 32, 16 x 16 x 16 fragments, a 3-stage cp.async
//       pipeline that fetches tile k+2 while tile k is multiplied
// Build: nvcc -O3 -arch=native -lcublas -o build/matmul/hgemm_tc kernels/matmul/hgemm_tc.cu
// Run:   ./build/matmul/hgemm_tc --m 264 --n 136 --k 200     (checks both against a float64 reference)
//        ./build/matmul/hgemm_tc --bench                     (also times 256 to 8192)
//        ./build/matmul/hgemm_tc --plant zeros               (the check at 8192^3 must reject a planted fault)
// Needs compute capability 8.0 (bf16 WMMA and cp.async); older GPUs get an empty kernel and a waiver.
//
// course: gpu
// course: libs cublas
// course: run --m 127 --n 255 --k 65
// course: run --m 1 --n 1 --k 1
// course: run --m 264 --n 136 --k 200
// course: run --plant zeros
// course: run --plant tile
// course: bench --bench
#include <cuda_bf16.h>
#include <mma.h>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"

using bf16 = __nv_bfloat16;

// The float64 reference (course::gemm_reference, from the bf16 inputs as stored), the checks, the
// benchmark loop and main are in matmul_harness.cuh, included at the end.

// ---------------------------------------------------------------------------------------------
// --8<-- [start:cp_async]
// cp.async copies 16 bytes global -> shared without passing through registers, asynchronously.
// src_bytes = 0 copies nothing and fills the 16 bytes with zeros (used past the matrix edges).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {  // at most N groups still in flight
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
// --8<-- [end:cp_async]

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 3, THREADS = 256;
constexpr int APAD = BK + 8, BPAD = BN + 8;  // +16 bytes per row: rows start in different banks
constexpr int A_STAGE = BM * APAD, B_STAGE = BK * BPAD;  // elements per stage
constexpr size_t kSmemBytes = (STAGES * (A_STAGE + B_STAGE)) * sizeof(bf16) + 8 * 256 * sizeof(float);

// Copies the TR x TC tile at (r0, c0) of a row-major rows x cols matrix into shared memory (row pitch
// PITCH), with zeros past the matrix's edges. ALIGNED: cols is a multiple of 8, so every 16-byte chunk of
// a row is aligned and either fully inside or fully outside.
template <int TR, int TC, int PITCH, bool ALIGNED>
__device__ void load_tile(bf16* tile, const bf16* src, int rows, int cols, int r0, int c0, int tid) {
  for (int c = tid; c < TR * TC / 8; c += THREADS) {  // 8 bf16 per 16-byte chunk
    const int r = c / (TC / 8), col = (c % (TC / 8)) * 8, gr = r0 + r, gc = c0 + col;
    bf16* dst = tile + r * PITCH + col;
    if (ALIGNED) {
      const bool in = gr < rows && gc < cols;
      cp_async16(dst, in ? &src[static_cast<size_t>(gr) * cols + gc] : src, in ? 16 : 0);
    } else {
      for (int e = 0; e < 8; ++e)
        dst[e] = (gr < rows && gc + e < cols) ? src[static_cast<size_t>(gr) * cols + gc + e] : __float2bfloat16(0.0f);
    }
  }
}

// Copies one BM x BK tile of A and one BK x BN tile of B into stage buffers (ALIGNED: K and N are
// multiples of 8).
template <bool ALIGNED>
__device__ void load_tiles(bf16* as, bf16* bs, const bf16* A, const bf16* B, int M, int N, int K, int brow,
                           int bcol, int k0, int tid) {
  load_tile<BM, BK, APAD, ALIGNED>(as, A, M, K, brow, k0, tid);
  load_tile<BK, BN, BPAD, ALIGNED>(bs, B, K, N, k0, bcol, tid);
}

// --8<-- [start:wmma_kernel]
using namespace nvcuda;
template <bool ALIGNED>
__global__ void __launch_bounds__(THREADS) hgemm_wmma(int M, int N, int K, const bf16* A, const bf16* B, bf16* C) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // Turing has neither bf16 fragments nor cp.async: an empty kernel, never launched (main waives first).
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* As = reinterpret_cast<bf16*>(smem_raw);
  bf16* Bs = As + STAGES * A_STAGE;
  float* scratch = reinterpret_cast<float*>(Bs + STAGES * B_STAGE);  // 16 x 16 floats per warp
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // 2 x 4 warps; each owns a 64 x 32 piece of the tile
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  const int ktiles = course::ceil_div(K, BK);
  for (int s = 0; s < STAGES - 1; ++s) {  // prologue: start the first STAGES-1 tiles
    if (s < ktiles) load_tiles<ALIGNED>(As + s * A_STAGE, Bs + s * B_STAGE, A, B, M, N, K, brow, bcol, s * BK, tid);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread's copies)...
    __syncthreads();              // ...and for everyone's; and stage (kt-1) is free again
    const int next = kt + STAGES - 1;
    if (next < ktiles)
      load_tiles<ALIGNED>(As + (next % STAGES) * A_STAGE, Bs + (next % STAGES) * B_STAGE, A, B, M, N, K, brow,
                          bcol, next * BK, tid);
    cp_async_commit();  // always commit (possibly empty) so the group count stays in step
    const bf16* as = As + (kt % STAGES) * A_STAGE;
    const bf16* bs = Bs + (kt % STAGES) * B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], as + (wm * 64 + i * 16) * APAD + kk, APAD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], bs + kk * BPAD + wn * 32 + j * 16, BPAD);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  cp_async_wait<0>();
  // Epilogue: a fragment's element layout is opaque, so stage it through shared memory, then
  // convert to bf16 and write the in-range elements.
  float* mine = scratch + warp * 256;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(mine, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int r = brow + wm * 64 + i * 16 + e / 16, c = bcol + wn * 32 + j * 16 + e % 16;
        if (r < M && c < N) C[static_cast<size_t>(r) * N + c] = __float2bfloat16(mine[e]);
      }
      __syncwarp();
    }
#endif
}
// --8<-- [end:wmma_kernel]

struct Problem {
  int M, N, K;
  const bf16 *A, *B;
  bf16* C;
};

static void launch_v1(const Problem& p) {
  const dim3 grid(course::ceil_div(p.N, BN), course::ceil_div(p.M, BM));
  if (p.K % 8 == 0 && p.N % 8 == 0)
    hgemm_wmma<true><<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, p.A, p.B, p.C);
  else
    hgemm_wmma<false><<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, p.A, p.B, p.C);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:cublas]
// Row-major trick as in sgemm.cu: column-major cuBLAS computes C^T = B^T A^T.
static cublasHandle_t g_cublas = nullptr;
static void launch_v0(const Problem& p) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, p.N, p.M, p.K, &one, p.B, CUDA_R_16BF, p.N, p.A,
                            CUDA_R_16BF, p.K, &zero, p.C, CUDA_R_16BF, p.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:cublas]

// --8<-- [start:program]
// What matmul_harness.cuh runs (the checks, the benchmark and main are there).
struct Program {
  using Elem = bf16;
  static constexpr course::BLayout kLayout = course::BLayout::kKxN;
  static constexpr const char* kCheck = "bf16_";
  static constexpr const char* kCase = "bf16 gemm %dx%dx%d";
  static constexpr int kDefault[3] = {264, 136, 200};
  static constexpr int kKMultiple = 1;
  static constexpr bool kAlphaBeta = false;
  static constexpr int kPlantVersion = 1;
  static constexpr int kBenchSizes[] = {256, 512, 1024, 2048, 4096, 8192};
  static constexpr const char* kImpl[] = {"v0 cuBLAS bf16", "v1 WMMA bf16"};
  struct Options {
    explicit Options(const course::Args&) {}
    bool selected(int) const { return true; }
    void setup() const {
      course::require_compute_capability(8, 0, "bf16 WMMA fragments and cp.async");
      CUDA_CHECK(cudaFuncSetAttribute(hgemm_wmma<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
      CUDA_CHECK(cudaFuncSetAttribute(hgemm_wmma<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    }
  };
  struct Launcher {
    Launcher(const Problem&, const Options&) {}
    void operator()(int id, const Problem& p) const { id == 0 ? launch_v0(p) : launch_v1(p); }
  };
};
// --8<-- [end:program]

#include "matmul_harness.cuh"
