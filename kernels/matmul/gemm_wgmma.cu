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
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -lcublas -o build/matmul/gemm_wgmma kernels/matmul/gemm_wgmma.cu
// Run:   ./build/matmul/gemm_wgmma --m 200 --n 135 --k 72
//        ./build/matmul/gemm_wgmma --bench
// It runs only on compute capability 9.0 (H100, H200) and waives itself elsewhere. The wgmma, TMA and
// mbarrier code is compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined (the compute_90a pass), so the
// file also builds for sm_75 to sm_100, where the kernel is an empty stub; main refuses to run a stub.
//
// course: gpu
// course: libs cublas
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --m 200 --n 135 --k 72
// course: run --m 1 --n 1 --k 8
// course: run --m 129 --n 257 --k 520
// course: bench --bench
#include <cuda.h>  // CUtensorMap and the driver API's types (the function itself is fetched at run time)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include "../common/check_cublas.cuh"
#include "../common/course.cuh"
#include "../common/gemm_reference.cuh"
#include "bench_row.cuh"

using bf16 = __nv_bfloat16;

// CPU reference: course::gemm_reference with BLayout::kNxK (C = A B^T in float64 from the bf16 inputs).

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;
constexpr int A_TILE = BM * BK, B_TILE = BN * BK;  // elements per stage
constexpr int STAGE_BYTES = (A_TILE + B_TILE) * static_cast<int>(sizeof(bf16));
constexpr size_t kSmemBytes = static_cast<size_t>(STAGES) * STAGE_BYTES + 1024;  // + room to align to 1 KiB

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
__device__ __forceinline__ void mbar_expect_bytes(uint64_t* bar, unsigned bytes) {  // arrive + expect
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
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
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}
// --8<-- [end:tma]

// --8<-- [start:wgmma]
// A wgmma shared-memory descriptor: start address, stride between 8-row groups (1024 bytes: 8 rows of
// 128 bytes), and the 128-byte swizzle that the TMA copies used. Addresses are encoded >> 4.
__device__ __forceinline__ uint64_t smem_desc(const bf16* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(16 >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (1ull << 62);
}

// D (64 x 256, fp32, 128 registers per thread across the warpgroup) += A (64 x 16) * B (256 x 16)^T.
__device__ __forceinline__ void wgmma_64x256x16(float* d, uint64_t da, uint64_t db) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// --8<-- [end:wgmma]
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// --8<-- [start:kernel]
__global__ void __launch_bounds__(THREADS, 1)
    gemm_wgmma_tma(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                   const __grid_constant__ CUtensorMap tmB, bf16* C) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // wgmma exists only in code built for sm_90a
  extern __shared__ unsigned char smem_raw[];
  // 128-byte swizzled tiles must start on a 1 KiB boundary.
  bf16* tiles = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  bf16* sA = tiles;                     // STAGES x (BM x BK)
  bf16* sB = tiles + STAGES * A_TILE;   // STAGES x (BN x BK)
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;
  const int ktiles = course::ceil_div(K, BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                  // the producer's arrive (+ the TMA bytes)
      mbar_init(&empty[s], CONSUMERS * 4);     // one arrive per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
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
    wgmma_wait_all();
    if (tid % 32 == 0) mbar_arrive(&empty[s]);  // this warp is done reading the slot
  }
  // Accumulator layout (as mma.sync's, repeated): warp w of the warpgroup holds rows 16w..16w+15;
  // for each 8-column block t, lane l holds (row l/4, cols 2(l%4), +1) and the same 8 rows further.
  const int warp = tid / 32, lane = tid % 32;
  const int r0 = brow + row0 + warp * 16 + lane / 4;
#pragma unroll
  for (int t = 0; t < BN / 8; ++t) {
    const int c = bcol + t * 8 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
      if (r >= M) continue;
      bf16* p = C + static_cast<size_t>(r) * N + c;
      if (c + 1 < N && N % 2 == 0) {
        *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(d[4 * t + 2 * h], d[4 * t + 2 * h + 1]);
      } else {
        if (c < N) p[0] = __float2bfloat16(d[4 * t + 2 * h]);
        if (c + 1 < N) p[1] = __float2bfloat16(d[4 * t + 2 * h + 1]);
      }
    }
  }
#endif
}
// --8<-- [end:kernel]

// Which code did the driver load? The file is built for several targets (the harness adds sm_75 to
// sm_100 to the page's sm_90a). In the course's recorded runs on H100 and H200, a binary holding both
// sm_90 and sm_90a code ran the sm_90a code (those runs printed this kernel's BENCH rows); should a driver
// ever pick the sm_90 stub instead, this probe says so and main stops with an error rather than time an
// empty kernel.
__global__ void built_for_sm90a(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

// --8<-- [start:tensor_map]
// A TMA descriptor for a row-major rows x K bf16 matrix, copied in boxes of box_rows x 64 (128 bytes
// per row, the widest row a 128-byte swizzle allows). Elements outside the matrix read as zero.
static PFN_cuTensorMapEncodeTiled_v12000 get_encode() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
    std::fprintf(stderr, "error: the driver does not provide cuTensorMapEncodeTiled\n");
    std::exit(course::kExitFail);
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}
static CUtensorMap make_map(const bf16* ptr, int rows, int K, int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};  // innermost first
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * sizeof(bf16)};            // bytes, rows
  const cuuint32_t box[2] = {BK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = get_encode()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptr), dims, strides,
                                  box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "error: cuTensorMapEncodeTiled failed (%d)\n", static_cast<int>(r));
    std::exit(course::kExitFail);
  }
  return map;
}
// --8<-- [end:tensor_map]

struct Problem {
  int M, N, K;
  const bf16 *A, *B;
  bf16* C;
};

struct Wgmma {  // the tensor maps are built once per problem, outside the timed launches
  CUtensorMap a, b;
  explicit Wgmma(const Problem& p) : a(make_map(p.A, p.M, p.K, BM)), b(make_map(p.B, p.N, p.K, BN)) {}
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

static std::vector<bf16> random_bf16(size_t n, uint64_t seed) {
  std::vector<float> f(n);
  course::fill_uniform(f, seed);
  std::vector<bf16> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __float2bfloat16(f[i]);
  return out;
}
static std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = __bfloat162float(v[i]);
  return f;
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

static bool check_all(int M, int N, int K, uint64_t seed) {
  const size_t nc = static_cast<size_t>(M) * N;
  const auto A = random_bf16(static_cast<size_t>(M) * K, seed), B = random_bf16(static_cast<size_t>(N) * K, seed + 1);
  std::vector<double> want(nc);
  course::gemm_reference(M, N, K, A.data(), B.data(), want.data(), course::BLayout::kNxK);
  DeviceMats d(A, B, nc);
  const Problem p{M, N, K, d.A, d.B, d.C};
  const Wgmma wgmma(p);
  std::vector<bf16> got(nc);
  bool ok = true;
  for (int v = 0; v < 2; ++v) {
    course::poison(d.C, nc * sizeof(bf16));
    if (v == 0) launch_cublas(p); else wgmma(p);
    CUDA_CHECK(cudaMemcpy(got.data(), d.C, nc * sizeof(bf16), cudaMemcpyDeviceToHost));
    char name[64];
    std::snprintf(name, sizeof(name), "wgmma_v%d_%dx%dx%d", v, M, N, K);
    ok &= course::check_close(name, to_float(got).data(), want.data(), nc, 1e-2, 1e-3);
  }
  return ok;
}

static bool bench_size(int S, uint64_t seed, double cublas_bytes) {
  const size_t n = static_cast<size_t>(S) * S;
  const auto A = random_bf16(n, seed), B = random_bf16(n, seed + 1);
  DeviceMats d(A, B, n);
  const Problem p{S, S, S, d.A, d.B, d.C};
  const Wgmma wgmma(p);
  std::vector<bf16> ref(n), got(n);
  launch_cublas(p);
  CUDA_CHECK(cudaMemcpy(ref.data(), d.C, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  course::poison(d.C, n * sizeof(bf16));
  wgmma(p);
  CUDA_CHECK(cudaMemcpy(got.data(), d.C, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  char name[64];
  std::snprintf(name, sizeof(name), "wgmma_v1_vs_cublas_%d", S);
  const bool ok = course::check_close(name, to_float(got).data(), to_float(ref).data(), n, 1.6e-2, 1e-2);
  char cs[64];
  std::snprintf(cs, sizeof(cs), "bf16 gemm A*B^T %dx%dx%d", S, S, S);
  const double flops = 2.0 * S * S * static_cast<double>(S), bytes = 3.0 * n * sizeof(bf16);
  const float t0 = course::time_kernel_ms([&] { launch_cublas(p); });
  const float t1 = course::time_kernel_ms([&] { wgmma(p); });
  chapter::print_bench_row(cs, "v0 cuBLAS bf16 (A*B^T)", t0, bytes, flops, true, S, cublas_bytes);
  chapter::print_bench_row(cs, "v1 wgmma + TMA", t1, bytes, flops, false, S, 0.0);
  return ok;
}

// sm_90a code runs on compute capability 9.0 only: not on Ampere, and not on Blackwell (10.x), which
// has no wgmma. require_compute_capability checks "at least", so the check here is exact.
static void require_hopper() {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    std::printf("WAIVED needs compute capability exactly 9.0 (wgmma is an sm_90a instruction; sm_90a code "
                "runs on no other GPU); this GPU is %d.%d\n", major, minor);
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
    std::fprintf(stderr, "error: the driver loaded code without wgmma (not built for sm_90a) on this 9.0 GPU; "
                         "build with -gencode=arch=compute_90a,code=sm_90a\n");
    std::exit(course::kExitFail);
  }
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long M = args.get_int("--m", 200, 1, 16384), N = args.get_int("--n", 135, 1, 16384);
  const long long K = args.get_int("--k", 72, 8, 16384);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool bench = args.has("--bench");
  args.finish();
  if (K % 8 != 0) {
    std::fprintf(stderr, "error: --k must be a multiple of 8 (TMA needs 16-byte row strides), got %lld\n", K);
    return course::kExitFail;
  }
  require_hopper();
  CUDA_CHECK(cudaFuncSetAttribute(gemm_wgmma_tma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes)));
  size_t free0 = 0, free1 = 0, total = 0;
  CUDA_CHECK(cudaFree(nullptr));
  CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  CUBLAS_CHECK(cublasCreate(&g_cublas));
  bool ok = check_all(static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), seed);
  CUDA_CHECK(cudaMemGetInfo(&free1, &total));
  const double cublas_bytes = free0 > free1 ? static_cast<double>(free0 - free1) : 0.0;
  if (ok && bench)
    for (int S : {256, 512, 1024, 2048, 4096, 8192}) ok &= bench_size(S, seed + 10, cublas_bytes);
  CUBLAS_CHECK(cublasDestroy(g_cublas));
  return ok ? 0 : course::kExitFail;
}
