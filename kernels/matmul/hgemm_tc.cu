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
// Needs compute capability 8.0 (bf16 WMMA and cp.async); older GPUs get an empty kernel and a waiver.
//
// course: gpu
// course: libs cublas
// course: run --m 127 --n 255 --k 65
// course: run --m 1 --n 1 --k 1
// course: run --m 264 --n 136 --k 200
// course: bench --bench
#include <cuda_bf16.h>
#include <mma.h>

#include "../common/check_cublas.cuh"
#include "../common/course.cuh"
#include "../common/gemm_reference.cuh"

using bf16 = __nv_bfloat16;

// CPU reference: course::gemm_reference, float64 sums of the bf16 inputs (exactly what the GPU multiplies).

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

// Copies one BM x BK tile of A and one BK x BN tile of B into stage buffers. ALIGNED: K and N are
// multiples of 8, so every 16-byte chunk of a row is aligned and either fully inside or fully outside.
template <bool ALIGNED>
__device__ void load_tiles(bf16* as, bf16* bs, const bf16* A, const bf16* B, int M, int N, int K, int brow,
                           int bcol, int k0, int tid) {
  for (int c = tid; c < BM * BK / 8; c += THREADS) {  // 8 bf16 per 16-byte chunk
    const int r = c / (BK / 8), col = (c % (BK / 8)) * 8, gr = brow + r, gc = k0 + col;
    bf16* dst = as + r * APAD + col;
    if (ALIGNED) {
      const bool in = gr < M && gc < K;
      cp_async16(dst, in ? &A[static_cast<size_t>(gr) * K + gc] : A, in ? 16 : 0);
    } else {
      for (int e = 0; e < 8; ++e)
        dst[e] = (gr < M && gc + e < K) ? A[static_cast<size_t>(gr) * K + gc + e] : __float2bfloat16(0.0f);
    }
  }
  for (int c = tid; c < BK * BN / 8; c += THREADS) {
    const int r = c / (BN / 8), col = (c % (BN / 8)) * 8, gr = k0 + r, gc = bcol + col;
    bf16* dst = bs + r * BPAD + col;
    if (ALIGNED) {
      const bool in = gr < K && gc < N;
      cp_async16(dst, in ? &B[static_cast<size_t>(gr) * N + gc] : B, in ? 16 : 0);
    } else {
      for (int e = 0; e < 8; ++e)
        dst[e] = (gr < K && gc + e < N) ? B[static_cast<size_t>(gr) * N + gc + e] : __float2bfloat16(0.0f);
    }
  }
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

using Launcher = void (*)(const Problem&);
struct Version {
  int id;
  const char* name;
  Launcher launch;
};
static const Version kVersions[] = {{0, "v0 cuBLAS bf16", launch_v0}, {1, "v1 WMMA bf16", launch_v1}};

static std::vector<bf16> random_bf16(size_t n, uint64_t seed) {
  std::vector<float> f(n);
  course::fill_uniform(f, seed);
  std::vector<bf16> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __float2bfloat16(f[i]);
  return out;
}

struct DeviceMats {
  bf16 *A = nullptr, *B = nullptr, *C = nullptr;
  DeviceMats(const std::vector<bf16>& a, const std::vector<bf16>& b, size_t c) {
    CUDA_CHECK(cudaMalloc(&A, a.size() * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&B, b.size() * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&C, c * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy(A, a.data(), a.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(B, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  }
  ~DeviceMats() {
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
  }
};

static std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = __bfloat162float(v[i]);
  return f;
}

static bool check_all(int M, int N, int K, uint64_t seed) {
  const size_t nc = static_cast<size_t>(M) * N;
  const auto A = random_bf16(static_cast<size_t>(M) * K, seed), B = random_bf16(static_cast<size_t>(K) * N, seed + 1);
  std::vector<double> want(nc);
  course::gemm_reference(M, N, K, A.data(), B.data(), want.data());
  DeviceMats d(A, B, nc);
  std::vector<bf16> got(nc);
  bool ok = true;
  for (const Version& v : kVersions) {
    course::poison(d.C, nc * sizeof(bf16));  // 0xFFFF is a NaN in bf16 too
    v.launch({M, N, K, d.A, d.B, d.C});
    CUDA_CHECK(cudaMemcpy(got.data(), d.C, nc * sizeof(bf16), cudaMemcpyDeviceToHost));
    char name[64];
    std::snprintf(name, sizeof(name), "bf16_v%d_%dx%dx%d", v.id, M, N, K);
    // The output is rounded to bf16 (8 significant bits): relative error up to 2^-9.
    ok &= course::check_close(name, to_float(got).data(), want.data(), nc, 1e-2, 1e-3);
  }
  return ok;
}

static bool bench_size(int S, uint64_t seed, double cublas_bytes) {
  const size_t n = static_cast<size_t>(S) * S;
  const auto A = random_bf16(n, seed), B = random_bf16(n, seed + 1);
  DeviceMats d(A, B, n);
  const Problem p{S, S, S, d.A, d.B, d.C};
  std::vector<bf16> ref(n), got(n);
  launch_v0(p);
  CUDA_CHECK(cudaMemcpy(ref.data(), d.C, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  const auto ref_f = to_float(ref);
  char cs[64];
  std::snprintf(cs, sizeof(cs), "bf16 gemm %dx%dx%d", S, S, S);
  const double flops = 2.0 * S * S * static_cast<double>(S), bytes = 3.0 * n * sizeof(bf16);
  bool ok = true;
  for (const Version& v : kVersions) {
    if (v.id != 0) {  // same inputs, same output precision: agree with cuBLAS to bf16 rounding
      course::poison(d.C, n * sizeof(bf16));
      v.launch(p);
      CUDA_CHECK(cudaMemcpy(got.data(), d.C, n * sizeof(bf16), cudaMemcpyDeviceToHost));
      char name[64];
      std::snprintf(name, sizeof(name), "bf16_v%d_vs_cublas_%d", v.id, S);
      ok &= course::check_close(name, to_float(got).data(), ref_f.data(), n, 1.6e-2, 1e-2);
    }
    const float ms = course::time_kernel_ms([&] { v.launch(p); });
    const double ws = v.id == 0 ? cublas_bytes : 0.0;  // device memory beyond the operands
    course::print_bench(cs, v.name, ms, bytes, flops, v.id == 0,
                        {{"size", S}, {"workspace_bytes", ws}, {"peak_bytes", bytes + ws}});
  }
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long M = args.get_int("--m", 264, 1, 16384), N = args.get_int("--n", 136, 1, 16384);
  const long long K = args.get_int("--k", 200, 1, 16384);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool bench = args.has("--bench");
  args.finish();
  course::require_compute_capability(8, 0, "bf16 WMMA fragments and cp.async");
  CUDA_CHECK(cudaFuncSetAttribute(hgemm_wmma<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CUDA_CHECK(cudaFuncSetAttribute(hgemm_wmma<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  size_t free0 = 0, free1 = 0, total = 0;
  CUDA_CHECK(cudaFree(nullptr));
  CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  CUBLAS_CHECK(cublasCreate(&g_cublas));
  bool ok = check_all(static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), seed);
  CUDA_CHECK(cudaMemGetInfo(&free1, &total));  // after cuBLAS has run once: handle + workspace
  const double cublas_bytes = free0 > free1 ? static_cast<double>(free0 - free1) : 0.0;
  if (ok && bench)
    for (int S : {256, 512, 1024, 2048, 4096, 8192}) ok &= bench_size(S, seed + 10, cublas_bytes);
  CUBLAS_CHECK(cublasDestroy(g_cublas));
  return ok ? 0 : course::kExitFail;
}
