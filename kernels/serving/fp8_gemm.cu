// fp8_gemm.cu: an FP8 (e4m3) GEMM for Hopper with per-tensor scales, C = scale_a * scale_b * (A * B^T),
// A (M x K) and B (N x K) e4m3, both row-major ("K-major"); C (M x N) bf16 row-major; checked against a
// float64 reference from the same e4m3 values and timed beside cuBLASLt's FP8 GEMM.
//
// Taught in docs/serving/fp8-gemm.md, after docs/fast-matmul-fft/hopper-gemm.md (whose v3, the persistent
// warp-specialised bf16 kernel, this is the FP8 sibling of). The kernel: a producer warpgroup (one thread
// issuing TMA), two consumer warpgroups on 128 x 128 tiles, k-tiles 128 deep (128 bytes of e4m3 per row),
// a ring of 6 stages, persistent blocks walking the tiles in grouped order. Three accumulation modes:
//   promoted (default)  each 128-deep k-tile is accumulated by wgmma alone (4 instructions of K = 32), then
//                       added into a second set of fp32 registers (DeepSeek-V3's promotion, N_C = 128); the
//                       consumers wait for each k-tile's wgmmas before adding
//   --promote overlap   the same sums, with k-tile kt+1's wgmmas issued into a second accumulator before
//                       k-tile kt's are waited for, so the adds overlap the tensor core's work
//   --no-promote        the wgmma accumulator holds the whole sum over K, as a bf16 GEMM's does
// The tile order, the promoted k-loop, the epilogue and the cuBLASLt peer are fp8_gemm_shared.cuh's.
// Peers in the same process: cuBLASLt FP8 (e4m3 in, bf16 out, fp32 compute, scale pointers) with its fast
// accumulation off and on. K must be a multiple of 16 (16-byte TMA row strides; the program says so and
// exits 1); M and N are free.
// Build: python -m course.toolchain build-all 1 kernels/serving/fp8_gemm.cu
// Run:   ./build/serving/fp8_gemm --m 200 --n 135 --k 528                 (checks the promoted kernel and peers)
//        ./build/serving/fp8_gemm --m 200 --n 135 --k 528 --promote overlap  (the same, overlapped promotion)
//        ./build/serving/fp8_gemm --m 200 --n 135 --k 528 --no-promote    (the same, the un-promoted kernel)
//        ./build/serving/fp8_gemm --bench          (4096^3, 8192^3 and a decode shape: all modes, cuBLASLt)
//        ./build/serving/fp8_gemm --m 301 --n 257 --k 512 --plant zeros-small
// It runs only on compute capability 9.0 and waives itself elsewhere (wgmma and setmaxnreg are sm_90a
// instructions). The device code is compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined, so the file
// builds for every architecture the course builds for; main never launches the empty stubs.
//
// course: gpu
// course: libs cublas cublasLt
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --m 200 --n 135 --k 528
// course: run --m 200 --n 135 --k 528 --no-promote
// course: run --m 1 --n 1 --k 16
// course: run --m 1 --n 300 --k 1040 --seed 7
// course: run --m 777 --n 1 --k 272 --seed 8
// course: run --m 2100 --n 1104 --k 1536 --seed 9
// course: run --m 1000 --n 700 --k 560 --sms 5 --seed 10
// course: run --m 301 --n 257 --k 512 --plant zeros-small
// course: run --m 301 --n 257 --k 512 --plant zeros-small --no-promote
// course: run --m 200 --n 135 --k 528 --promote overlap
// course: run --m 1 --n 1 --k 16 --promote overlap
// course: run --m 130 --n 129 --k 96 --promote overlap --seed 11
// course: run --m 300 --n 270 --k 640 --promote overlap --seed 12
// course: run --m 2100 --n 1104 --k 1536 --promote overlap --seed 9
// course: run --m 1000 --n 700 --k 560 --sms 5 --promote overlap --seed 10
// course: run --m 301 --n 257 --k 512 --plant zeros-small --promote overlap
// course: bench --bench
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/hopper_fp8.cuh"  // the e4m3 wgmma and its descriptor; hopper.cuh's TMA, mbarriers, ...
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "fp8_gemm_shared.cuh"       // tile order, promoted k-loop, bf16 epilogue, cuBLASLt's FP8 GEMM

using bf16 = __nv_bfloat16;
namespace hopper = course::hopper;

// --8<-- [start:sizes]
constexpr int BK = hopper::kSwizzleElemsFp8;  // 128 e4m3 = 128 bytes: a k-tile is one swizzled row deep
constexpr int KSTEP = 32;                     // K of one e4m3 wgmma
constexpr int BM = 128, BN = fp8_gemm::kTileN, STAGES = 6, CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;
constexpr int A_TILE = BM * BK, B_TILE = BN * BK;  // bytes per stage (one byte an element)
constexpr int STAGE_BYTES = A_TILE + B_TILE;       // 32 KiB
// 128 x 128 tiles, not bf16 v3's 128 x 256: promotion keeps two accumulator sets (64 + 64 registers per
// thread at N = 128), and 2 x 128 would not fit under the 232 registers a consumer thread may have.
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536, "more registers than an SM has");
constexpr int GROUP_ROWS = 16;  // tiles are visited in groups 16 tile-rows tall (L2 reuse)
constexpr size_t kSmemBytes = static_cast<size_t>(STAGES) * STAGE_BYTES + 1024;  // + 1 KiB for alignment
static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a Hopper block may use");
// --8<-- [end:sizes]

// --8<-- [start:kernel]
// How the consumers accumulate over K:
//   kTensorCore      the wgmma accumulator carries the whole sum, and one batch of wgmma stays in flight
//                    across k-tiles (as in the bf16 kernel)
//   kPromoteWait     after each k-tile the consumers wait for its wgmmas, add the tile's partial sums into
//                    `total` (true fp32 adds) and start the next k-tile with scale-d off (overwrite), so the
//                    tensor core never accumulates more than BK = 128 products
//   kPromoteOverlap  the same sums, but k-tile kt+1's wgmmas are issued into a second accumulator set before
//                    k-tile kt's are waited for, so the adds of kt run while the tensor core works on kt+1
enum class Accumulation { kTensorCore, kPromoteWait, kPromoteOverlap };

template <Accumulation MODE>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_per_tensor(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                        const __grid_constant__ CUtensorMap tmB, bf16* C, const float* scale_a, const float* scale_b,
                        int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace course::hopper;
  using fp8_gemm::tile_coords;
  extern __shared__ unsigned char smem_raw[];
  uint8_t* sA = align_1k<uint8_t>(smem_raw);  // STAGES x (BM x BK)
  uint8_t* sB = sA + STAGES * A_TILE;         // STAGES x (BN x BK)
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

  const int wg = threadIdx.x / 128;
  const int tiles_m = course::ceil_div(M, BM), tiles_n = course::ceil_div(N, BN);
  const int tiles = tiles_m * tiles_n, ktiles = course::ceil_div(K, BK);
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
    if (threadIdx.x == 0)
      fp8_gemm::produce_tiles<STAGES, BM, BN, BK>(tiles_m, tiles_n, ktiles, group, &tmA, &tmB, sA, sB, full, empty);
  } else {  // consumers: warpgroup 1 computes rows 0..63 of the tile, warpgroup 2 rows 64..127
    setmaxnreg_inc<CONSUMER_REGS>();
    const int row_in_tile = (wg - 1) * 64;
    const float scale = *scale_a * *scale_b;  // the per-tensor scales, applied once in fp32 in the epilogue
    auto release = [&](int s) {               // this warp has finished reading slot s
      if (threadIdx.x % 32 == 0) mbar_arrive(&empty[s]);
    };
    // the wgmma accumulator; with overlap a second one; the promoted fp32 sum (the promoted modes only)
    float d[64], d_next[64], total[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.0f;
    int it = 0;  // k-tiles consumed so far, over all of this block's tiles: the ring position
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      tile_coords(t, tiles_m, tiles_n, group, tm, tn);
      if constexpr (MODE == Accumulation::kTensorCore) {
        int previous = 0;
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar_wait(&full[s], (it / STAGES) & 1);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK; kk += KSTEP)  // +32 e4m3 = +32 bytes inside the swizzled rows
            wgmma_64x128x32_e4m3(d, smem_desc_fp8(sA + s * A_TILE + row_in_tile * BK + kk),
                                 smem_desc_fp8(sB + s * B_TILE + kk), kt > 0 || kk > 0);
          wgmma_commit();
          wgmma_wait<1>();  // the previous k-tile's batch is done (this one may still run): free its slot
          if (kt > 0) release(previous);
          previous = s;
        }
        wgmma_wait<0>();
        fence_accumulators<64>(d);
        release(previous);
        store_accumulator<BN>(d, C, M, N, tm * BM + row_in_tile, tn * BN, scale);
      } else {
#pragma unroll
        for (int i = 0; i < 64; ++i) total[i] = 0.0f;
        // k-tile kt of this tile sits in ring position it + kt
        auto issue = [&](float* acc, int kt) {
          const int s = (it + kt) % STAGES;
          mbar_wait(&full[s], ((it + kt) / STAGES) & 1);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK; kk += KSTEP)  // scale-d off on the first step: acc is overwritten
            wgmma_64x128x32_e4m3(acc, smem_desc_fp8(sA + s * A_TILE + row_in_tile * BK + kk),
                                 smem_desc_fp8(sB + s * B_TILE + kk), kk > 0);
          wgmma_commit();
        };
        auto release_ktile = [&](int kt) { release((it + kt) % STAGES); };
        auto promote = [&](const float* acc, int) {
#pragma unroll
          for (int i = 0; i < 64; ++i) total[i] += acc[i];  // the promotion: a true fp32 add
        };
        fp8_gemm::promoted_k_loop<MODE == Accumulation::kPromoteOverlap>(ktiles, d, d_next, issue, release_ktile,
                                                                          promote);
        it += ktiles;
        store_accumulator<BN>(total, C, M, N, tm * BM + row_in_tile, tn * BN, scale);
      }
    }
  }
#endif
}
// --8<-- [end:kernel]

// --8<-- [start:e4m3]
// e4m3 (OCP FP8, "E4M3FN"): 1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits; no infinities, and
// only S.1111.111 is NaN, so the largest finite value is 1.110 x 2^(15-7) = 448. Exponent field 0 holds the
// subnormals m/8 x 2^-6 (the smallest is 2^-9). Every e4m3 value is exactly a double.
inline double e4m3_to_double(uint8_t code) {
  const int sign = code >> 7, exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::nan("");
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}
// --8<-- [end:e4m3]

// The decoder against cuda_fp8.h's own conversion on all 256 codes, and against values read off the format
// definition: signed zeros, the smallest subnormal, the smallest normal, 1, the largest finite, NaN.
static bool check_e4m3_decoder() {
  size_t checked = 0;
  bool ok = true;
  for (int code = 0; code < 256; ++code, ++checked) {
    __nv_fp8_e4m3 v;
    v.__x = static_cast<__nv_fp8_storage_t>(code);
    const double mine = e4m3_to_double(static_cast<uint8_t>(code)), cuda = static_cast<double>(static_cast<float>(v));
    if (!(mine == cuda || (std::isnan(mine) && std::isnan(cuda)))) {
      std::printf("e4m3 code 0x%02x: decoded %.9g, cuda_fp8.h says %.9g\n", code, mine, cuda);
      ok = false;
    }
  }
  const struct {
    uint8_t code;
    double value;
  } table[] = {{0x00, 0.0}, {0x80, -0.0}, {0x01, 0x1p-9}, {0x07, 7 * 0x1p-9}, {0x08, 0x1p-6}, {0x38, 1.0},
               {0x39, 1.125}, {0xB8, -1.0}, {0x7E, 448.0}, {0xFE, -448.0}, {0x77, 240.0}, {0x78, 256.0}};
  for (const auto& row : table) {
    ++checked;
    const double got = e4m3_to_double(row.code);
    if (got != row.value || std::signbit(got) != std::signbit(row.value)) {
      std::printf("e4m3 code 0x%02x: decoded %.9g, the format says %.9g\n", row.code, got, row.value);
      ok = false;
    }
  }
  checked += 2;
  ok = ok && std::isnan(e4m3_to_double(0x7F)) && std::isnan(e4m3_to_double(0xFF));
  return course::check_true("e4m3_decoder", ok, checked, "(all 256 codes, and the format's landmarks)");
}

// --8<-- [start:quantise]
// What a serving pipeline does with a bf16/fp32 tensor before an FP8 GEMM: one scale for the whole tensor,
// amax / 448, so that the largest magnitude lands on e4m3's largest finite value; x / scale is rounded to
// nearest e4m3 (cuda_fp8.h, saturating). The GEMM multiplies the codes and applies the scale afterwards.
struct Fp8Tensor {
  std::vector<uint8_t> codes;
  float scale = 1.0f;
};
static Fp8Tensor quantise_per_tensor(const std::vector<float>& x) {
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  Fp8Tensor q;
  q.scale = amax > 0 ? amax / 448.0f : 1.0f;
  q.codes.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) q.codes[i] = __nv_fp8_e4m3(x[i] / q.scale).__x;
  return q;
}
// Inputs: normal(0, 4) values; with `quiet`, every third row from the second 2^-8 smaller (still inside
// e4m3's range after the tensor's scale), so that some outputs are small and the check must hold them to
// their own size.
static std::vector<float> random_matrix(int rows, int cols, uint64_t seed, bool quiet) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(static_cast<size_t>(rows) * cols);
  for (auto& x : v) x = dist(rng);
  if (quiet) course::quiet_rows(v, rows, cols, 0x1p-8f);
  return v;
}
// --8<-- [end:quantise]

// --8<-- [start:reference]
// The float64 reference for the rows in `rows` (every row, or a sample for the large benchmark sizes):
// want = scale_a scale_b sum_k a_k b_k from the decoded e4m3 values, and sum_abs = scale_a scale_b sum_k
// |a_k b_k|, which bounds what the accumulation can get wrong. Spread over the CPU threads.
struct Reference {
  std::vector<int> rows;
  std::vector<double> want, sum_abs;  // rows.size() x N
};
static Reference reference(const Fp8Tensor& A, const Fp8Tensor& B, int M, int N, int K, int max_rows) {
  Reference ref;
  ref.rows = fp8_gemm::sampled_rows(M, max_rows);
  const int nrows = static_cast<int>(ref.rows.size());
  ref.want.assign(static_cast<size_t>(nrows) * N, 0.0);
  ref.sum_abs.assign(ref.want.size(), 0.0);
  double table[256];
  for (int c = 0; c < 256; ++c) table[c] = e4m3_to_double(static_cast<uint8_t>(c));
  const double scale = static_cast<double>(A.scale) * B.scale;
  fp8_gemm::for_each_cell(ref.rows, N, K, A.codes, B.codes, table,
                          [&](size_t r, int n, const double* a, const uint8_t* b) {
                            double s = 0, s_abs = 0;
                            fp8_gemm::exact_dot(a, b, table, 0, K, s, s_abs);
                            ref.want[r * N + n] = scale * s;
                            ref.sum_abs[r * N + n] = scale * s_abs;
                          });
  return ref;
}
// --8<-- [end:reference]

// --8<-- [start:tolerance]
// The check per element: |got - want| <= rtol |want| + atol, rtol = 2^-8 (1 + 2^-6), atol = terms u_tc sum_abs.
//   rtol:        the bf16 output (8 significant bits, round to nearest: at most half a unit, 2^-8 of the
//                value at the bottom of a binade) and a little more for the fp32 scaling (2^-24 each).
//                The inputs are exact: the reference decodes the same codes, and a product of two e4m3
//                values (4 significant bits each) is exact in any fp32 adder.
//   u_tc = 2^-13: the accumulator of Hopper's FP8 wgmma keeps fewer bits than fp32 (DeepSeek-V3 report,
//                section 3.3.2: "limited to retaining around 14 bits"). Model: one instruction aligns its 32
//                products and the incoming accumulator to the largest exponent among them, keeps 14
//                significant bits of each (truncating), and truncates the sum to 14 bits again. Each of those
//                33 + 1 truncations costs at most 2^-13 times the largest term, itself at most the sum of
//                |terms| so far, so one instruction moves the sum by at most 34 u_tc sum_abs (no sqrt
//                averaging: truncation errors all lean the same way).
//   promoted:    one k-tile is 4 instructions: terms = 4 x 34 = 136; the fp32 adds across k-tiles (2^-24
//                each) are far below it.
//   --no-promote: K / 32 instructions in a row: terms = 34 K / 32, which grows with K until it says nothing
//                (K = 8192: more than sum_abs). The benchmark measures the actual error of every row
//                (err_ppb: the largest error beyond one bf16 rounding, as a share of sum_abs, in billionths).
// cuBLASLt's default (fast accumulation off) is held to the promoted bound, its fast mode to the other.
constexpr double kRtol = 0x1p-8 * 1.015625, kUnitTensorCore = 0x1p-13;
static double accumulation_terms(bool promote, int K) {
  const int chunk = promote ? BK : course::ceil_div(K, KSTEP) * KSTEP;  // products the tensor core sums alone
  return (KSTEP + 2.0) * chunk / KSTEP;
}
static std::vector<double> tolerance(const Reference& ref, bool promote, int K) {
  const double factor = accumulation_terms(promote, K) * kUnitTensorCore;
  std::vector<double> atol(ref.sum_abs.size());
  for (size_t i = 0; i < atol.size(); ++i) atol[i] = factor * ref.sum_abs[i];
  return atol;
}
// --8<-- [end:tolerance]

// The accumulation's error as the benchmark reports it (err_ppb): the largest error beyond what rounding the
// exact result to bf16 could explain (2^-8 |want|), as a share of sum_abs, in billionths. An exact sum
// rounded to bf16 scores 0.
static double error_ppb(const std::vector<double>& got, const Reference& ref) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double beyond_rounding = std::fabs(got[i] - ref.want[i]) - 0x1p-8 * std::fabs(ref.want[i]);
    if (ref.sum_abs[i] > 0) worst = std::max(worst, beyond_rounding / ref.sum_abs[i]);
  }
  return worst * 1e9;
}

using fp8_gemm::CublasLtFp8;
using Problem = fp8_gemm::Fp8Operands;  // cuBLASLt's operands serve the course kernel too

// --8<-- [start:launch]
struct Kernel {
  CUtensorMap a, b;
  int sms;
  Kernel(const Problem& p, int blocks)
      : a(hopper::make_kmajor_map_fp8(p.A, p.M, p.K, BM)), b(hopper::make_kmajor_map_fp8(p.B, p.N, p.K, BN)),
        sms(blocks) {}
  template <Accumulation MODE>
  static void allow_shared_memory() {
    CUDA_CHECK(cudaFuncSetAttribute(fp8_gemm_per_tensor<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
  }
  void operator()(Accumulation mode, const Problem& p) const {
    const int tiles = course::ceil_div(p.M, BM) * course::ceil_div(p.N, BN);
    const int grid = std::min(tiles, sms);  // persistent: at most one block per SM
    if (mode == Accumulation::kPromoteOverlap)
      fp8_gemm_per_tensor<Accumulation::kPromoteOverlap>
          <<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b, p.C, p.sa, p.sb, GROUP_ROWS);
    else if (mode == Accumulation::kPromoteWait)
      fp8_gemm_per_tensor<Accumulation::kPromoteWait>
          <<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b, p.C, p.sa, p.sb, GROUP_ROWS);
    else
      fp8_gemm_per_tensor<Accumulation::kTensorCore>
          <<<grid, THREADS, kSmemBytes>>>(p.M, p.N, p.K, a, b, p.C, p.sa, p.sb, GROUP_ROWS);
    CUDA_CHECK_LAUNCH();
  }
};
// --8<-- [end:launch]

// One implementation on one problem: poison C, run, compare the reference's rows. With plant_below > 0 the
// check also runs, quietly, on the output with its small elements zeroed, and must reject it.
template <typename Run>
static bool run_and_check(const char* name, Run&& run, const Problem& p, const Reference& ref,
                          const std::vector<double>& atol, double plant_below, double* ppb = nullptr) {
  const std::vector<double> got = fp8_gemm::run_and_gather(run, p.C, p.M, p.N, ref.rows);
  if (ppb) *ppb = error_ppb(got, ref);
  return course::check_close_each_planted(name, got.data(), ref.want.data(), atol.data(), got.size(), kRtol,
                                          plant_below);
}

int main(int argc, char** argv) {
  course::Args args(argc, argv);
  const fp8_gemm::Options opt(args, 1);
  const bool bench = opt.bench;
  const bool no_promote = args.has("--no-promote");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  opt.check();
  const Accumulation mode = no_promote      ? Accumulation::kTensorCore
                            : opt.overlap() ? Accumulation::kPromoteOverlap
                                            : Accumulation::kPromoteWait;

  // CPU-side checks first: they need no GPU.
  if (!check_e4m3_decoder()) return course::kExitFail;
  course::require_compute_capability(9, 0, "wgmma, setmaxnreg and TMA are Hopper instructions");
  hopper::require_sm90a("wgmma and setmaxnreg are sm_90a instructions");
  Kernel::allow_shared_memory<Accumulation::kTensorCore>();
  Kernel::allow_shared_memory<Accumulation::kPromoteWait>();
  Kernel::allow_shared_memory<Accumulation::kPromoteOverlap>();
  const int blocks = fp8_gemm::persistent_blocks(opt.sms);
  cublasLtHandle_t lt = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&lt));

  bool ok = true;
  for (const fp8_gemm::Shape& s : opt.shapes({{4096, 4096, 4096}, {8192, 8192, 8192}, {16, 14336, 4096}})) {
    // Inputs as a pipeline makes them: fp32 values, one scale per tensor, e4m3 codes.
    const Fp8Tensor A = quantise_per_tensor(random_matrix(s.m, s.k, opt.seed, true));
    const Fp8Tensor B = quantise_per_tensor(random_matrix(s.n, s.k, opt.seed + 1, false));
    const Reference ref = reference(A, B, s.m, s.n, s.k, bench ? 32 : s.m);  // benchmark: 32 sampled rows
    uint8_t* dA = course::to_device(A.codes);
    uint8_t* dB = course::to_device(B.codes);
    float* dsa = course::to_device(std::vector<float>{A.scale});
    float* dsb = course::to_device(std::vector<float>{B.scale});
    bf16* dC = course::device_alloc<bf16>(static_cast<size_t>(s.m) * s.n);
    const Problem p{s.m, s.n, s.k, dA, dB, dsa, dsb, dC};
    const double plant_below = plant ? fp8_gemm::zeros_small_below(ref.want) : 0.0;
    const Kernel kernel(p, blocks);
    const CublasLtFp8 lt_exact(lt, p, false), lt_fast(lt, p, true);
    char case_name[96];
    std::snprintf(case_name, sizeof(case_name), "fp8 gemm A*B^T %dx%dx%d", s.m, s.n, s.k);
    struct Impl {
      const char* check;
      const char* label;
      bool promoted_bound, peer, available;
      std::function<void()> run;
    };
    std::vector<Impl> impls;
    if (bench || mode == Accumulation::kPromoteWait)
      impls.push_back({"fp8_promoted", "fp8 wgmma, promoted every 128 K (e4m3, fp32 acc)", true, false, true,
                       [&] { kernel(Accumulation::kPromoteWait, p); }});
    if (bench || mode == Accumulation::kPromoteOverlap)
      impls.push_back({"fp8_promoted_overlap", "fp8 wgmma, overlapped promotion every 128 K (e4m3, fp32 acc)",
                       true, false, true, [&] { kernel(Accumulation::kPromoteOverlap, p); }});
    if (bench || mode == Accumulation::kTensorCore)
      impls.push_back({"fp8_unpromoted", "fp8 wgmma, no promotion (e4m3, tensor-core acc)", false, false, true,
                       [&] { kernel(Accumulation::kTensorCore, p); }});
    impls.push_back({"cublaslt_fp8", "cuBLASLt fp8 (e4m3, fp32 acc)", true, true, lt_exact.available,
                     [&] { lt_exact(p); }});
    impls.push_back({"cublaslt_fp8_fast", "cuBLASLt fp8 fast accum (e4m3, tensor-core acc)", false, true,
                     lt_fast.available, [&] { lt_fast(p); }});
    for (const Impl& impl : impls) {
      if (!impl.available) {
        std::printf("NOTE %s: no cuBLASLt FP8 algorithm for %dx%dx%d (N must be a multiple of 8; not run)\n",
                    impl.check, s.m, s.n, s.k);
        continue;
      }
      const std::vector<double> atol = tolerance(ref, impl.promoted_bound, s.k);
      double ppb = 0;
      ok = run_and_check(impl.check, impl.run, p, ref, atol, plant_below, &ppb) && ok;
      if (bench) {
        const float ms = course::time_kernel_ms(impl.run);
        const double bytes = static_cast<double>(s.m) * s.k + static_cast<double>(s.n) * s.k + 2.0 * s.m * s.n;
        course::print_bench(case_name, impl.label, ms, bytes, 2.0 * s.m * s.n * s.k, impl.peer,
                            {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"err_ppb", std::llround(ppb)}});
      }
    }
    course::device_free({dA, dB, dsa, dsb, dC});
  }
  CUBLAS_CHECK(cublasLtDestroy(lt));
  return ok ? 0 : course::kExitFail;
}
