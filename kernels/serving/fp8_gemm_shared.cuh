// fp8_gemm_shared.cuh: the pieces of an FP8 GEMM program that do not depend on how it scales: the grouped
// tile order, the promoted k-loop (waiting, or overlapped), the bf16 epilogue of a 64 x 128 fp32 wgmma
// accumulator, the sampled rows of C back on the host, and cuBLASLt's FP8 GEMM as a peer.
//
// Taught in docs/serving/fp8-gemm.md and docs/serving/fp8-block-scaled.md; included by
// kernels/serving/fp8_gemm.cu (per-tensor scales) and kernels/serving/fp8_gemm_block.cu (block scales).
//   host and device:  tile_coords       tile t of a grid in grouped order (L2 reuse)
//   device (sm_90a):  produce_tiles     the producer thread: the ring of stages kept full by TMA, across tiles
//                     promoted_k_loop   one tile's k-tiles, each summed by wgmma alone, then promoted
//   host:             Fp8Operands       an FP8 GEMM's operands (codes, scale pointers, C)
//                     run_and_gather    poison C, run, and bring back the rows of C a reference covers
//                     for_each_cell     a reference's loop over its rows (on all CPU threads) and columns
//                     sampled_rows      the rows of C a reference covers: all, or max_rows evenly spaced
//                     exact_dot         a stretch of one row-column product in float64, and its sum of |terms|
//                     zeros_small_below the --plant zeros-small threshold: a quarter of the median |want|
//                     persistent_blocks how many persistent blocks: one per SM, or --sms of them
//                     Shape             one M x N x K problem size
//                     Options           the options both programs take (--promote wait|overlap among them)
//                     CublasLtFp8       cuBLASLt's e4m3 GEMM, per-tensor scales by pointer, bf16 out
//
// course: header
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/cpu_threads.cuh"
#include "../common/hopper_fp8.cuh"  // wgmma_wait, fence_accumulators
#include "../common/memory.cuh"

namespace fp8_gemm {

using bf16 = __nv_bfloat16;
constexpr int kTileN = 128;  // the columns of one consumer warpgroup's accumulator (m64n128)

// Tile t of a tiles_m x tiles_n grid in grouped order (gemm_hopper.cu's schedule): columns of `group`
// tile-rows, so that the blocks running at the same time share rows of A and columns of B in L2.
__host__ __device__ inline void tile_coords(int t, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
  const int per_group = group * tiles_n;
  const int first_m = (t / per_group) * group;
  const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;
  const int local = t % per_group;
  tm = first_m + local % rows;
  tn = local / rows;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// --8<-- [start:producer]
// The producer (one thread): for each of this block's tiles (persistent blocks, grouped order) and each of
// its k-tiles, wait until the consumers have freed the next slot of the ring, then TMA-load the A tile
// (BM x BK) and the B tile (BN x BK) into it; `full` counts the bytes. Out-of-bounds parts are zero-filled
// and counted, so partial tiles need nothing special.
template <int STAGES, int BM, int BN, int BK>
__device__ __forceinline__ void produce_tiles(int tiles_m, int tiles_n, int ktiles, int group, const CUtensorMap* tmA,
                                             const CUtensorMap* tmB, uint8_t* sA, uint8_t* sB, uint64_t* full,
                                             uint64_t* empty) {
  using namespace course::hopper;
  constexpr int A_TILE = BM * BK, B_TILE = BN * BK;  // bytes: one byte an e4m3 element
  int it = 0;
  for (int t = blockIdx.x; t < tiles_m * tiles_n; t += gridDim.x) {
    int tm, tn;
    tile_coords(t, tiles_m, tiles_n, group, tm, tn);
    for (int kt = 0; kt < ktiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // passes at once in round 0
      mbar_expect_bytes(&full[s], A_TILE + B_TILE);
      tma_load_2d(sA + s * A_TILE, tmA, kt * BK, tm * BM, &full[s]);
      tma_load_2d(sB + s * B_TILE, tmB, kt * BK, tn * BN, &full[s]);
    }
  }
}
// --8<-- [end:producer]

// --8<-- [start:promoted_k_loop]
// One tile's k-tiles 0 .. ktiles-1 with promotion: each k-tile's 128 products are summed by wgmma alone into
// a 64-register accumulator, and promote(acc, kt) adds that partial sum into the caller's fp32 total.
//   issue(acc, kt)    waits for k-tile kt's stage, issues its wgmmas into acc (the first with scale-d off,
//                     so acc is overwritten) and commits them as one batch
//   release(kt)       hands k-tile kt's stage back to the producer (its wgmmas have completed)
// OVERLAP = false: issue, wait for the batch, promote. The tensor core idles during every wait and add.
// OVERLAP = true: two accumulator sets take turns. k-tile kt+1's batch goes into the other set before
// k-tile kt's is waited for (wgmma_wait<1>: all but the newest batch complete), so the tensor core works on
// kt+1 while the threads add kt's partial sum. The loop is unrolled by two so that which set is which is
// known at compile time (a run-time choice would put the arrays in local memory).
template <bool OVERLAP, typename Issue, typename Release, typename Promote>
__device__ __forceinline__ void promoted_k_loop(int ktiles, float* d, float* d_next, Issue&& issue,
                                                Release&& release, Promote&& promote) {
  using namespace course::hopper;
  if constexpr (!OVERLAP) {
    for (int kt = 0; kt < ktiles; ++kt) {
      issue(d, kt);
      wgmma_wait<0>();  // this k-tile's partial sums are final
      fence_accumulators<64>(d);
      release(kt);
      promote(d, kt);
    }
  } else {
    if (ktiles == 0) return;
    issue(d, 0);
    int kt = 0;
    for (; kt + 2 < ktiles; kt += 2) {  // on entry k-tile kt's batch is in flight in d
      issue(d_next, kt + 1);
      wgmma_wait<1>();  // kt's batch is complete; kt+1's may still run
      fence_accumulators<64>(d);
      release(kt);
      promote(d, kt);
      issue(d, kt + 2);  // the same step with the sets swapped
      wgmma_wait<1>();
      fence_accumulators<64>(d_next);
      release(kt + 1);
      promote(d_next, kt + 1);
    }
    if (kt + 1 < ktiles) {  // two k-tiles left: kt in flight in d, kt+1 still to issue
      issue(d_next, kt + 1);
      wgmma_wait<1>();
      fence_accumulators<64>(d);
      release(kt);
      promote(d, kt);
      wgmma_wait<0>();
      fence_accumulators<64>(d_next);
      release(kt + 1);
      promote(d_next, kt + 1);
    } else {  // one left
      wgmma_wait<0>();
      fence_accumulators<64>(d);
      release(kt);
      promote(d, kt);
    }
  }
}
// --8<-- [end:promoted_k_loop]

#endif

// An FP8 GEMM's operands as cuBLASLt takes them: e4m3 codes, one fp32 scale per tensor in device memory.
struct Fp8Operands {
  int M, N, K;
  const uint8_t *A, *B;  // A: M x K, B: N x K, both row-major (K-major)
  const float *sa, *sb;  // per-tensor scales
  bf16* C;               // M x N, row-major
};

// Poison C (M x N), run, and bring back the rows of C that a reference covers (`rows`) as doubles,
// rows.size() x N: anything the run fails to write reads back as poison, never as a stale right answer.
template <typename Run>
std::vector<double> run_and_gather(Run&& run, bf16* C, int M, int N, const std::vector<int>& rows) {
  course::poison(C, static_cast<size_t>(M) * N * sizeof(bf16));
  run();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> got(rows.size() * static_cast<size_t>(N));
  std::vector<bf16> row(N);
  for (size_t r = 0; r < rows.size(); ++r) {
    CUDA_CHECK(cudaMemcpy(row.data(), C + static_cast<size_t>(rows[r]) * N, N * sizeof(bf16),
                          cudaMemcpyDeviceToHost));
    for (int n = 0; n < N; ++n) got[r * N + n] = static_cast<double>(__bfloat162float(row[n]));
  }
  return got;
}

// The rows of C a reference covers: every row, or max_rows evenly spaced ones (the benchmark's sizes).
inline std::vector<int> sampled_rows(int M, int max_rows) {
  const int nrows = std::min(M, max_rows);
  std::vector<int> rows;
  for (int i = 0; i < nrows; ++i) rows.push_back(static_cast<int>(static_cast<long long>(i) * M / nrows));
  return rows;
}

// sum over k in [k0, k1) of a[k] * value[b[k]] in float64 (exact: each product of two e4m3 values is, and
// the sums here stay far inside a double's 53 bits), added into s, and the same of |products| into s_abs.
inline void exact_dot(const double* a, const uint8_t* b, const double* value, int k0, int k1, double& s,
                      double& s_abs) {
  for (int k = k0; k < k1; ++k) {
    const double p = a[k] * value[b[k]];
    s += p;
    s_abs += std::fabs(p);
  }
}

// A reference's loop: for each covered row (rows[r], the rows spread over the CPU threads this process may
// use) decode A's row once into doubles through value[], then call cell(r, n, a, b) for every column n,
// with a the decoded row (K values) and b row n of B (K codes). A and B: row-major e4m3 codes, K per row.
template <typename Cell>
void for_each_cell(const std::vector<int>& rows, int N, int K, const std::vector<uint8_t>& A,
                   const std::vector<uint8_t>& B, const double* value, Cell&& cell) {
  auto work = [&](int first, int step) {
    std::vector<double> a(K);
    for (size_t r = first; r < rows.size(); r += step) {
      const size_t row = static_cast<size_t>(rows[r]);
      for (int k = 0; k < K; ++k) a[k] = value[A[row * K + k]];
      for (int n = 0; n < N; ++n) cell(r, n, a.data(), &B[static_cast<size_t>(n) * K]);
    }
  };
  const int threads = course::cpu_threads();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
  for (auto& th : pool) th.join();
}

// --plant zeros-small zeroes the outputs below a quarter of the median |want|: the quiet rows' outputs, and
// some others. The check must then fail.
inline double zeros_small_below(const std::vector<double>& want) {
  std::vector<double> mags;
  for (double w : want) mags.push_back(std::fabs(w));
  std::nth_element(mags.begin(), mags.begin() + mags.size() / 2, mags.end());
  return mags[mags.size() / 2] / 4;
}

// The persistent grid's size: one block per SM of this GPU, or `wanted` (--sms) when that is smaller.
inline int persistent_blocks(int wanted) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return wanted > 0 ? std::min(wanted, sms) : sms;
}

struct Shape {
  int m, n, k;
};

// The options both FP8 programs take. min_mn is the smallest M and N allowed (0 where the program checks
// an empty C). K must be a multiple of 16, and --promote wait or overlap: otherwise a clear error and exit 1
// (Options::check, called after Args::finish has refused unknown options).
struct Options {
  bool bench;
  int m, n, k, sms;  // sms: --sms, the persistent blocks wanted (0: one per SM)
  uint64_t seed;
  std::string promote;  // wait: each k-tile's wgmmas are waited for before promoting; overlap: see promoted_k_loop
  Options(course::Args& args, int min_mn)
      : bench(args.has("--bench")),
        m(static_cast<int>(args.get_int("--m", 200, min_mn, 1 << 16))),
        n(static_cast<int>(args.get_int("--n", 135, min_mn, 1 << 16))),
        k(static_cast<int>(args.get_int("--k", 528, 16, 1 << 16))),
        sms(static_cast<int>(args.get_int("--sms", 0, 0, 1024))),
        seed(static_cast<uint64_t>(args.get_int("--seed", 2026, 0))),
        promote(args.get_str("--promote", "wait")) {}
  bool overlap() const { return promote == "overlap"; }
  // The sizes to run: the benchmark's, or the one --m, --n, --k name.
  std::vector<Shape> shapes(const std::vector<Shape>& bench_shapes) const {
    return bench ? bench_shapes : std::vector<Shape>{{m, n, k}};
  }
  void check() const {
    if (promote != "wait" && promote != "overlap") {
      std::fprintf(stderr, "error: --promote expects wait or overlap, got '%s'\n", promote.c_str());
      std::exit(course::kExitFail);
    }
    course::require_multiple("--k", k, 16, "TMA copies rows whose stride is a multiple of 16 bytes");
  }
};

// --8<-- [start:cublaslt]
// cuBLASLt's FP8 GEMM. Column-major, as cuBLAS sees it: C^T (N x M) = B (as N x K, "transposed" K x N
// column-major) times A^T; FP8 needs exactly this "TN" form, both operands K-major, as wgmma does. The
// scales go in by pointer (A_SCALE_POINTER scales cuBLASLt's A, our B); D is bf16; compute fp32.
// FAST_ACCUM = 1 lets the library keep the sum in the tensor core's accumulator (no promotion).
struct CublasLtFp8 {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  size_t workspace_bytes = 32u << 20;
  bool available = false;  // 16-byte leading dimensions, and the heuristic found an algorithm
  CublasLtFp8(cublasLtHandle_t handle, const Fp8Operands& p, bool fast_accum) : lt(handle) {
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    const int8_t fast = fast_accum ? 1 : 0;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p.sb, sizeof(p.sb)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.sa, sizeof(p.sa)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, p.K, p.N, p.K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, p.K, p.M, p.K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, p.N, p.M, p.N));
    CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 1, &result, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    // FP8 matmuls want every leading dimension a multiple of 16 bytes: K e4m3 values (the program's own
    // rule) and N bf16 values, so N a multiple of 8; other N are left to the course kernel.
    available = p.N % 8 == 0 && status == CUBLAS_STATUS_SUCCESS && found > 0;
    if (available) algo = result.algo;
  }
  void operator()(const Fp8Operands& p) const {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt, op, &one, p.B, a, p.A, b, &zero, p.C, d, p.C, d, &algo, workspace,
                                workspace_bytes, 0));
  }
  ~CublasLtFp8() {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(d));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
    CUDA_CHECK(cudaFree(workspace));
  }
  CublasLtFp8(const CublasLtFp8&) = delete;
  CublasLtFp8& operator=(const CublasLtFp8&) = delete;
};
// --8<-- [end:cublaslt]

}  // namespace fp8_gemm
