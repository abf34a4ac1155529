// fp8_gemm_block.cu: a block-scaled FP8 (e4m3) GEMM for Hopper, DeepSeek-V3 style: A (M x K, activations)
// carries one fp32 scale per row per 128 values of K (1 x 128), B (N x K, weights) one per 128 x 128 block,
//   C[m][n] = sum_kb  sa[kb][m] sb[n/128][kb]  sum_{k in block kb} A8[m][k] B8[n][k],
// A8, B8 e4m3 codes, both row-major (K-major); C (M x N) bf16 row-major. Checked against a float64
// reference from the same codes and scales, and timed beside cuBLASLt's per-tensor FP8 GEMM on the same
// codes (the yardstick: what finer scales cost).
//
// Taught in docs/serving/fp8-block-scaled.md, after docs/serving/fp8-gemm.md, whose promoted kernel this
// is with one change: the promotion step, which adds each 128-deep partial sum into fp32 registers, is
// exactly where the block scales apply, acc += partial * (sa * sb). The scaling blocks are the promotion
// interval and the k-tile, so no extra pass and no extra synchronisation are needed.
//   Scale layouts: sa is [ceil(K/128)][M] (K-block-major: the 8 rows a warp's lanes hold are adjacent in
//   memory), sb is [ceil(N/128)][ceil(K/128)]. A last, partial K block (K not a multiple of 128) has its own
//   scales, from the amax of the values it holds; TMA zero-fills the rest of its k-tile.
// K must be a multiple of 16 (16-byte TMA row strides; the program says so and exits 1); M and N are free.
// Build: python -m course.toolchain build kernels/serving/fp8_gemm_block.cu
// Run:   ./build/serving/fp8_gemm_block --m 200 --n 135 --k 528
//        ./build/serving/fp8_gemm_block --bench     (4096^3, 8192^3 and a DeepSeek-V3 projection, 4096 x 2112 x 7168)
//        ./build/serving/fp8_gemm_block --m 301 --n 257 --k 512 --plant wrong-block-scale
//        ./build/serving/fp8_gemm_block --m 301 --n 257 --k 512 --plant zeros-small
// It runs only on compute capability 9.0 and waives itself elsewhere (wgmma and setmaxnreg are sm_90a
// instructions); the device code is compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined.
//
// course: gpu
// course: libs cublas cublasLt
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --m 200 --n 135 --k 528
// course: run --m 1 --n 1 --k 16
// course: run --m 1 --n 300 --k 1040 --seed 7
// course: run --m 777 --n 1 --k 272 --seed 8
// course: run --m 2100 --n 1104 --k 1536 --seed 9
// course: run --m 1000 --n 700 --k 520 --sms 5 --seed 10
// course: run --m 301 --n 257 --k 512 --plant wrong-block-scale
// course: run --m 301 --n 257 --k 512 --plant zeros-small
// course: bench --bench
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/check_cublas.cuh"
#include "../common/course.cuh"
#include "../common/hopper_fp8.cuh"  // the e4m3 wgmma and its descriptor; hopper.cuh's TMA, mbarriers, ...
#include "fp8_gemm_shared.cuh"       // tile order, bf16 epilogue, cuBLASLt's FP8 GEMM

using bf16 = __nv_bfloat16;
namespace hopper = course::hopper;

// --8<-- [start:sizes]
constexpr int BK = hopper::kSwizzleElemsFp8;  // 128 e4m3 = 128 bytes: a k-tile, a promotion, a scaling block
constexpr int SCALE_BLOCK = 128;              // DeepSeek-V3's block: 1 x 128 for A, 128 x 128 for B
constexpr int KSTEP = 32;                     // K of one e4m3 wgmma
constexpr int BM = 128, BN = fp8_gemm::kTileN, STAGES = 6, CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;
static_assert(BK == SCALE_BLOCK && BN == SCALE_BLOCK, "a k-tile must be one scaling block, a tile one B block wide");
constexpr int A_TILE = BM * BK, B_TILE = BN * BK;  // bytes per stage (one byte an element)
constexpr int STAGE_BYTES = A_TILE + B_TILE;       // 32 KiB
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536, "more registers than an SM has");
constexpr int GROUP_ROWS = 16;  // tiles are visited in groups 16 tile-rows tall (L2 reuse)
constexpr size_t kSmemBytes = static_cast<size_t>(STAGES) * STAGE_BYTES + 1024;  // + 1 KiB for alignment
static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a Hopper block may use");
// --8<-- [end:sizes]

// --8<-- [start:kernel]
// fp8_gemm.cu's promoted kernel; what changes is marked "block scales". Each consumer thread holds two rows
// of its warpgroup's 64 x 128 accumulator (r and r + 8) and all of its columns lie in one 128-column block
// of B, so one k-tile needs three scales per thread: sa for its two rows, sb for the tile's B block.
__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_block(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                   const __grid_constant__ CUtensorMap tmB, bf16* C, const float* scale_a, const float* scale_b,
                   int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace course::hopper;
  extern __shared__ unsigned char smem_raw[];
  uint8_t* sA = align_1k<uint8_t>(smem_raw);  // STAGES x (BM x BK)
  uint8_t* sB = sA + STAGES * A_TILE;         // STAGES x (BN x BK)
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

  const int wg = threadIdx.x / 128;
  const int tiles_m = course::ceil_div(M, BM), tiles_n = course::ceil_div(N, BN);
  const int tiles = tiles_m * tiles_n, ktiles = course::ceil_div(K, BK);  // ktiles = K blocks of the scales
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);               // the producer's arrive (+ the TMA bytes)
      mbar_init(&empty[s], CONSUMERS * 4);  // one arrive per consumer warp
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  if (wg == 0) {  // producer: one thread keeps the ring of stages full, across tiles
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        fp8_gemm::tile_coords(t, tiles_m, tiles_n, group, tm, tn);
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // passes at once in round 0
          mbar_expect_bytes(&full[s], STAGE_BYTES);        // out-of-bounds parts are zero-filled and counted
          tma_load_2d(sA + s * A_TILE, &tmA, kt * BK, tm * BM, &full[s]);
          tma_load_2d(sB + s * B_TILE, &tmB, kt * BK, tn * BN, &full[s]);
        }
      }
    }
  } else {  // consumers: warpgroup 1 computes rows 0..63 of the tile, warpgroup 2 rows 64..127
    setmaxnreg_inc<CONSUMER_REGS>();
    const int row_in_tile = (wg - 1) * 64;
    const int my_row = row_in_tile + ((threadIdx.x % 128) / 32) * 16 + (threadIdx.x % 32) / 4;  // and +8
    auto release = [&](int s) {  // this warp has finished reading slot s
      if (threadIdx.x % 32 == 0) mbar_arrive(&empty[s]);
    };
    float d[64], total[64];  // the wgmma accumulator (one k-block's partial sums); the scaled fp32 sum
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      fp8_gemm::tile_coords(t, tiles_m, tiles_n, group, tm, tn);
#pragma unroll
      for (int i = 0; i < 64; ++i) total[i] = 0.0f;
      const int r0 = tm * BM + my_row, r1 = r0 + 8;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        // block scales: loaded before the wait, so their latency hides behind the TMA and the wgmmas.
        // Rows past M hold zeros (TMA's fill) and get scale 0, without reading past the scales.
        const float sb = scale_b[tn * ktiles + kt];
        const float sa0 = r0 < M ? scale_a[static_cast<size_t>(kt) * M + r0] : 0.0f;
        const float sa1 = r1 < M ? scale_a[static_cast<size_t>(kt) * M + r1] : 0.0f;
        mbar_wait(&full[s], (it / STAGES) & 1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += KSTEP)  // scale-d off on the first: each k-block's sum starts afresh
          wgmma_64x128x32_e4m3(d, smem_desc_fp8(sA + s * A_TILE + row_in_tile * BK + kk),
                               smem_desc_fp8(sB + s * B_TILE + kk), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();  // this k-block's partial sums are final
        fence_accumulators<64>(d);
        release(s);
        // block scales: the promotion applies them, one fp32 multiply-add per accumulator element.
        const float f0 = sa0 * sb, f1 = sa1 * sb;  // row r0's factor, row r0 + 8's
#pragma unroll
        for (int i = 0; i < 64; i += 4) {  // d[i], d[i+1]: row r0; d[i+2], d[i+3]: row r0 + 8
          total[i] = fmaf(d[i], f0, total[i]);
          total[i + 1] = fmaf(d[i + 1], f0, total[i + 1]);
          total[i + 2] = fmaf(d[i + 2], f1, total[i + 2]);
          total[i + 3] = fmaf(d[i + 3], f1, total[i + 3]);
        }
      }
      fp8_gemm::store_scaled(total, 1.0f, C, M, N, tm * BM + row_in_tile, tn * BN);  // scaled already
    }
  }
#endif
}
// --8<-- [end:kernel]

// --8<-- [start:quantise]
// Block-scaled quantisation, as DeepSeek-V3 does it: each block gets scale = amax / 448 (1 if the block is
// all zeros), so that its largest magnitude lands on e4m3's largest finite value, and x / scale is rounded
// to the nearest e4m3 (cuda_fp8.h, saturating). A's blocks are 1 x 128 (a row's 128 values of K), B's
// 128 x 128; a block cut short by M, N or K is scaled by the amax of what it holds.
struct BlockFp8 {
  std::vector<uint8_t> codes;  // rows x K
  std::vector<float> scales;   // A: [kblocks][rows]; B: [ceil(rows / 128)][kblocks]
};
static int k_blocks(int K) { return course::ceil_div(K, SCALE_BLOCK); }
static BlockFp8 quantise_blocks(const std::vector<float>& x, int rows, int K, int block_rows, bool kblock_major) {
  const int kb_count = k_blocks(K), rb_count = course::ceil_div(rows, block_rows);
  BlockFp8 q;
  q.codes.resize(x.size());
  q.scales.resize(static_cast<size_t>(rb_count) * kb_count);
  for (int rb = 0; rb < rb_count; ++rb) {
    for (int kb = 0; kb < kb_count; ++kb) {
      const int r_end = std::min(rows, (rb + 1) * block_rows), k_end = std::min(K, (kb + 1) * SCALE_BLOCK);
      float amax = 0.0f;
      for (int r = rb * block_rows; r < r_end; ++r)
        for (int k = kb * SCALE_BLOCK; k < k_end; ++k) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r) * K + k]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      for (int r = rb * block_rows; r < r_end; ++r)
        for (int k = kb * SCALE_BLOCK; k < k_end; ++k)
          q.codes[static_cast<size_t>(r) * K + k] = __nv_fp8_e4m3(x[static_cast<size_t>(r) * K + k] / scale).__x;
      q.scales[kblock_major ? static_cast<size_t>(kb) * rb_count + rb : static_cast<size_t>(rb) * kb_count + kb] = scale;
    }
  }
  return q;
}
// Inputs whose blocks differ in size by orders of magnitude: normal(0, 1) values, each scaling block
// multiplied by 2^e with e uniform in [-10, 10], so a kernel that applies a neighbouring block's scale is
// far off; with `quiet`, every third row from the second 2^-8 smaller again, so that some outputs are small.
static std::vector<float> random_blocks(int rows, int K, int block_rows, uint64_t seed, bool quiet) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-10, 10);
  const int kb_count = k_blocks(K), rb_count = course::ceil_div(rows, block_rows);
  std::vector<float> magnitude(static_cast<size_t>(rb_count) * kb_count);
  for (auto& m : magnitude) m = std::ldexp(1.0f, exponent(rng));
  std::vector<float> v(static_cast<size_t>(rows) * K);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k)
      v[static_cast<size_t>(r) * K + k] =
          dist(rng) * magnitude[static_cast<size_t>(r / block_rows) * kb_count + k / SCALE_BLOCK];
  if (quiet) course::quiet_rows(v, rows, K, 0x1p-8f);
  return v;
}
// --8<-- [end:quantise]

// --8<-- [start:reference]
// The float64 reference for the rows in `rows` (every row, or a sample for the benchmark sizes), from the
// decoded e4m3 codes (exact in double) and the scales: per output, the block-scaled sum `want` and its
// bound sum_abs = sum_kb |sa sb| sum_k |a_k b_k|; also the plain sum of the codes' products, with its
// sum_abs, for the per-tensor peer that runs on the same codes with unit scales. Spread over the CPU threads.
struct Reference {
  std::vector<int> rows;
  std::vector<double> want, sum_abs;              // block-scaled: rows.size() x N
  std::vector<double> want_codes, sum_abs_codes;  // the codes' product, unscaled
};
static Reference reference(const BlockFp8& A, const BlockFp8& B, int M, int N, int K, int max_rows) {
  Reference ref;
  const int nrows = std::min(M, max_rows), kb_count = k_blocks(K);
  for (int i = 0; i < nrows; ++i) ref.rows.push_back(static_cast<int>(static_cast<long long>(i) * M / nrows));
  for (auto* v : {&ref.want, &ref.sum_abs, &ref.want_codes, &ref.sum_abs_codes})
    v->assign(static_cast<size_t>(nrows) * N, 0.0);
  double table[256];
  for (int c = 0; c < 256; ++c) {
    __nv_fp8_e4m3 v;
    v.__x = static_cast<__nv_fp8_storage_t>(c);
    table[c] = static_cast<double>(static_cast<float>(v));  // exact: every e4m3 value is a float
  }
  auto work = [&](int first, int step) {
    std::vector<double> a(K);
    for (int r = first; r < nrows; r += step) {
      const size_t row = static_cast<size_t>(ref.rows[r]);
      for (int k = 0; k < K; ++k) a[k] = table[A.codes[row * K + k]];
      for (int n = 0; n < N; ++n) {
        const uint8_t* b = &B.codes[static_cast<size_t>(n) * K];
        double s = 0, s_abs = 0, c = 0, c_abs = 0;
        for (int kb = 0; kb < kb_count; ++kb) {
          const double scale = static_cast<double>(A.scales[static_cast<size_t>(kb) * M + row]) *
                               B.scales[static_cast<size_t>(n / SCALE_BLOCK) * kb_count + kb];
          double p = 0, p_abs = 0;
          for (int k = kb * SCALE_BLOCK; k < std::min(K, (kb + 1) * SCALE_BLOCK); ++k) {
            const double term = a[k] * table[b[k]];
            p += term;
            p_abs += std::fabs(term);
          }
          s += scale * p, s_abs += std::fabs(scale) * p_abs, c += p, c_abs += p_abs;
        }
        const size_t i = static_cast<size_t>(r) * N + n;
        ref.want[i] = s, ref.sum_abs[i] = s_abs, ref.want_codes[i] = c, ref.sum_abs_codes[i] = c_abs;
      }
    }
  };
  const int threads = course::cpu_threads();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
  for (auto& th : pool) th.join();
  return ref;
}
// --8<-- [end:reference]

// --8<-- [start:tolerance]
// The check per element: |got - want| <= rtol |want| + (136 u_tc + (kblocks + 1) 2^-24) sum_abs.
//   rtol = 2^-8 (1 + 2^-6): one bf16 rounding of the output, as in fp8_gemm.cu.
//   136 u_tc, u_tc = 2^-13: fp8_gemm.cu's model of the FP8 tensor core's ~14-bit accumulator over one
//     promotion interval (4 instructions x 34 truncations); it bounds each k-block's partial sum by its own
//     sum |a_k b_k|, and the scaled bounds add up to sum_abs.
//   (kblocks + 1) 2^-24: the fp32 promotion itself, one rounding of sa * sb per block and one fmaf
//     rounding of the running total (at most sum_abs) per block.
constexpr double kRtol = 0x1p-8 * 1.015625, kUnitTensorCore = 0x1p-13, kPromotedTerms = (KSTEP + 2.0) * BK / KSTEP;
static std::vector<double> tolerance(const std::vector<double>& sum_abs, int K) {
  const double factor = kPromotedTerms * kUnitTensorCore + (k_blocks(K) + 1) * 0x1p-24;
  std::vector<double> atol(sum_abs.size());
  for (size_t i = 0; i < atol.size(); ++i) atol[i] = factor * sum_abs[i];
  return atol;
}
// --8<-- [end:tolerance]

// The rows of C the reference covers, from the device, as doubles.
static std::vector<double> gather_rows(const bf16* dC, const Reference& ref, int N) {
  std::vector<double> got(ref.want.size());
  std::vector<bf16> row(N);
  for (size_t r = 0; r < ref.rows.size(); ++r) {
    CUDA_CHECK(cudaMemcpy(row.data(), dC + static_cast<size_t>(ref.rows[r]) * N, N * sizeof(bf16),
                          cudaMemcpyDeviceToHost));
    for (int n = 0; n < N; ++n) got[r * N + n] = static_cast<double>(__bfloat162float(row[n]));
  }
  return got;
}

// --8<-- [start:launch]
struct Problem {
  int M, N, K;
  const uint8_t *A, *B;  // e4m3 codes
  const float *sa, *sb;  // block scales: [kblocks][M] and [ceil(N/128)][kblocks]
  bf16* C;
};
struct Kernel {
  CUtensorMap a, b;
  int sms;
  Kernel(const Problem& p, int blocks)
      : a(hopper::make_kmajor_map_fp8(p.A, p.M, p.K, BM)), b(hopper::make_kmajor_map_fp8(p.B, p.N, p.K, BN)),
        sms(blocks) {}
  void operator()(const Problem& p) const {
    const int tiles = course::ceil_div(p.M, BM) * course::ceil_div(p.N, BN);
    const int grid = std::min(tiles, sms);  // persistent: at most one block per SM
    fp8_gemm_block<<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b, p.C, p.sa, p.sb, GROUP_ROWS);
    CUDA_CHECK_LAUNCH();
  }
};
// --8<-- [end:launch]

// The faults --plant names: "" (none), "zeros-small" (course.cuh's: small outputs zeroed) or
// "wrong-block-scale" (the kernel run with every row's A scales shifted by one K block: each block's partial
// sum multiplied by its neighbour's scale; with one K block there is no neighbour, and the run proves nothing).
enum class Plant { kNone, kZerosSmall, kWrongBlockScale };
static Plant plant_requested(const course::Args& args) {
  const std::string fault = args.get_str("--plant", "");
  if (fault.empty()) return Plant::kNone;
  if (fault == "zeros-small") return Plant::kZerosSmall;
  if (fault == "wrong-block-scale") return Plant::kWrongBlockScale;
  std::fprintf(stderr, "error: --plant expects zeros-small or wrong-block-scale, got '%s'\n", fault.c_str());
  std::exit(course::kExitFail);
}

// Runs `run` on a poisoned C and checks the reference's rows; with plant_below > 0 also the zeros-small plant.
template <typename Run>
static bool run_and_check(const char* name, Run&& run, const Problem& p, const Reference& ref,
                          const std::vector<double>& want, const std::vector<double>& atol, double plant_below) {
  course::poison(p.C, static_cast<size_t>(p.M) * p.N * sizeof(bf16));
  run();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<double> got = gather_rows(p.C, ref, p.N);
  return course::check_close_each_planted(name, got.data(), want.data(), atol.data(), got.size(), kRtol,
                                          plant_below);
}

// --plant wrong-block-scale: the kernel on A's scales rotated by one K block; PASS only if the check rejects it.
static bool check_wrong_block_scale(const Kernel& kernel, const Problem& p, const BlockFp8& A,
                                    const Reference& ref, const std::vector<double>& atol) {
  const int kb_count = k_blocks(p.K);
  std::vector<float> shifted(A.scales.size());
  for (int kb = 0; kb < kb_count; ++kb)
    for (int m = 0; m < p.M; ++m)
      shifted[static_cast<size_t>(kb) * p.M + m] = A.scales[static_cast<size_t>((kb + 1) % kb_count) * p.M + m];
  float* d_shifted = course::to_device(shifted);
  Problem bad = p;
  bad.sa = d_shifted;
  const bool passed = course::verdict_quietly(
      [&] { return run_and_check("fp8_block", [&] { kernel(bad); }, bad, ref, ref.want, atol, 0); });
  course::device_free({d_shifted});
  const bool caught = kb_count > 1 && !passed;
  std::printf("CHECK %s planted_wrong_block_scale_caught n=%d check=fp8_block %s\n", caught ? "PASS" : "FAIL",
              kb_count, kb_count < 2   ? "(one K block: no neighbouring scale to plant, the run proves nothing)"
                        : caught ? "(the check rejected partial sums scaled by the neighbouring K block's scale)"
                                 : "(the check ACCEPTED partial sums scaled by the neighbouring K block's scale)");
  std::fflush(stdout);
  return caught;
}

int main(int argc, char** argv) {
  course::Args args(argc, argv);
  const bool bench = args.has("--bench");
  const int m_opt = static_cast<int>(args.get_int("--m", 200, 1, 1 << 16));
  const int n_opt = static_cast<int>(args.get_int("--n", 135, 1, 1 << 16));
  const int k_opt = static_cast<int>(args.get_int("--k", 528, 16, 1 << 16));
  const int sms_wanted = static_cast<int>(args.get_int("--sms", 0, 0, 1024));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const Plant plant = plant_requested(args);
  args.finish();
  course::require_multiple("--k", k_opt, 16, "TMA copies rows whose stride is a multiple of 16 bytes");

  course::require_compute_capability(9, 0, "wgmma, setmaxnreg and TMA are Hopper instructions");
  hopper::require_sm90a("wgmma and setmaxnreg are sm_90a instructions");
  CUDA_CHECK(cudaFuncSetAttribute(fp8_gemm_block, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes)));
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = sms_wanted > 0 ? std::min(sms_wanted, sms) : sms;
  cublasLtHandle_t lt = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&lt));

  struct Shape {
    int m, n, k;
  };
  // DeepSeek-V3's fused q/kv down-projection (7168 -> 1536 + 576) for 4096 tokens: N not a tile multiple.
  const std::vector<Shape> shapes =
      bench ? std::vector<Shape>{{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 2112, 7168}}
            : std::vector<Shape>{{m_opt, n_opt, k_opt}};
  bool ok = true;
  for (const Shape& s : shapes) {
    const BlockFp8 A = quantise_blocks(random_blocks(s.m, s.k, 1, seed, true), s.m, s.k, 1, true);
    const BlockFp8 B = quantise_blocks(random_blocks(s.n, s.k, SCALE_BLOCK, seed + 1, false), s.n, s.k,
                                       SCALE_BLOCK, false);
    const Reference ref = reference(A, B, s.m, s.n, s.k, bench ? 32 : s.m);  // benchmark: 32 sampled rows
    uint8_t* dA = course::to_device(A.codes);
    uint8_t* dB = course::to_device(B.codes);
    float* dsa = course::to_device(A.scales);
    float* dsb = course::to_device(B.scales);
    float* d_one = course::to_device(std::vector<float>{1.0f});
    bf16* dC = course::device_alloc<bf16>(static_cast<size_t>(s.m) * s.n);
    const Problem p{s.m, s.n, s.k, dA, dB, dsa, dsb, dC};
    const Kernel kernel(p, blocks);
    // The peer: cuBLASLt's per-tensor FP8 GEMM on the same codes, unit scales (it computes the codes' product).
    const fp8_gemm::Fp8Operands codes{s.m, s.n, s.k, dA, dB, d_one, d_one, dC};
    const fp8_gemm::CublasLtFp8 lt_tensor(lt, codes, false);
    double plant_below = 0;  // zeros-small: outputs below a quarter of the median |want|
    if (plant == Plant::kZerosSmall) {
      std::vector<double> mags;
      for (double w : ref.want) mags.push_back(std::fabs(w));
      std::nth_element(mags.begin(), mags.begin() + mags.size() / 2, mags.end());
      plant_below = mags[mags.size() / 2] / 4;
    }
    char case_name[96];
    std::snprintf(case_name, sizeof(case_name), "fp8 gemm A*B^T %dx%dx%d", s.m, s.n, s.k);
    const double flops = 2.0 * s.m * s.n * s.k;
    const double code_bytes = static_cast<double>(s.m) * s.k + static_cast<double>(s.n) * s.k + 2.0 * s.m * s.n;
    const double scale_bytes = 4.0 * (A.scales.size() + B.scales.size());

    const std::vector<double> atol = tolerance(ref.sum_abs, s.k);
    ok = run_and_check("fp8_block", [&] { kernel(p); }, p, ref, ref.want, atol, plant_below) && ok;
    if (plant == Plant::kWrongBlockScale) ok = check_wrong_block_scale(kernel, p, A, ref, atol) && ok;
    if (bench)
      course::print_bench(case_name, "fp8 wgmma, block scales 1x128 / 128x128 (e4m3, fp32 acc)",
                          course::time_kernel_ms([&] { kernel(p); }), code_bytes + scale_bytes, flops, false,
                          {{"m", s.m}, {"n", s.n}, {"k", s.k}});
    if (!lt_tensor.available) {
      std::printf("NOTE cublaslt_fp8_tensor: no cuBLASLt FP8 algorithm for %dx%dx%d (N must be a multiple of 8; "
                  "not run)\n", s.m, s.n, s.k);
    } else {
      // held to the same promoted bound (its default mode promotes), on the codes' product
      const std::vector<double> atol_codes = tolerance(ref.sum_abs_codes, s.k);
      ok = run_and_check("cublaslt_fp8_tensor", [&] { lt_tensor(codes); }, p, ref, ref.want_codes, atol_codes,
                         0) && ok;
      if (bench)
        course::print_bench(case_name, "cuBLASLt fp8, per-tensor scales (e4m3, fp32 acc)",
                            course::time_kernel_ms([&] { lt_tensor(codes); }), code_bytes, flops, true,
                            {{"m", s.m}, {"n", s.n}, {"k", s.k}});
    }
    course::device_free({dA, dB, dsa, dsb, d_one, dC});
  }
  CUBLAS_CHECK(cublasLtDestroy(lt));
  return ok ? 0 : course::kExitFail;
}
