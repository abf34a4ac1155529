// fp8_gemm_block.cu: a block-scaled FP8 (e4m3) GEMM for Hopper, DeepSeek-V3's fine-grained scaling:
//   C[m][n] = sum over K blocks kb of  sa[kb][m] * sb[n/128][kb] * (sum over k in block kb of A[m][k] B[n][k])
// A (M x K, activations) has one fp32 scale per row per 128 values of K ("1 x 128"); B (N x K, weights) one
// per 128 x 128 block. A and B are e4m3, row-major (K-major); C (M x N) bf16 row-major. Checked against a
// float64 reference from the same codes and scales, and timed beside cuBLASLt's per-tensor FP8 GEMM on the
// same codes (the issue's yardstick: what block scaling costs over one scale per tensor).
//
// Taught in docs/serving/fp8-block-scaled.md, after docs/serving/fp8-gemm.md, whose promoted kernel this is
// with one change: the promotion interval (128 of K) is the scaling block, so the promotion step applies
// the block's scales, total += partial * (sa * sb), and the epilogue has nothing left to scale.
// Scale layouts (DeepGEMM's): sa is K-block-major, [ceil(K/128)][M], so that a k-block's row scales are
// contiguous; sb is [ceil(N/128)][ceil(K/128)]. When K is not a multiple of 128 the last K block is partial:
// its scales cover its K % 128 values (TMA fills the rest of the tile with zeros, which add nothing).
// K must be a multiple of 16 (16-byte TMA row strides; the program says so and exits 1); M and N are free,
// and M = 0 or N = 0 is an empty product (nothing is launched).
// Build: python -m course.toolchain build-all 1 kernels/serving/fp8_gemm_block.cu
// Run:   ./build/serving/fp8_gemm_block --m 200 --n 135 --k 528
//        ./build/serving/fp8_gemm_block --m 200 --n 135 --k 528 --promote overlap  (overlapped promotion)
//        ./build/serving/fp8_gemm_block --bench        (4096^3, 8192^3 and 4096 x 7168 x 2048: both
//                                                       promotions, cuBLASLt)
//        ./build/serving/fp8_gemm_block --m 301 --n 257 --k 512 --plant wrong-block-scale
// It runs only on compute capability 9.0 and waives itself elsewhere; the device code is compiled only
// where __CUDA_ARCH_FEAT_SM90_ALL is defined, so the file builds for every architecture the course builds for.
//
// course: gpu
// course: libs cublas cublasLt
// course: nvcc-flags -gencode=arch=compute_90a,code=sm_90a
// course: run --m 200 --n 135 --k 528
// course: run --m 1 --n 1 --k 16
// course: run --m 0 --n 64 --k 128
// course: run --m 1 --n 300 --k 1040 --seed 7
// course: run --m 777 --n 1 --k 272 --seed 8
// course: run --m 2100 --n 1104 --k 1536 --seed 9
// course: run --m 1000 --n 700 --k 560 --sms 5 --seed 10
// course: run --m 301 --n 257 --k 512 --plant zeros-small
// course: run --m 301 --n 257 --k 512 --plant wrong-block-scale
// course: run --m 200 --n 135 --k 528 --promote overlap
// course: run --m 1 --n 1 --k 16 --promote overlap
// course: run --m 0 --n 64 --k 128 --promote overlap
// course: run --m 130 --n 129 --k 96 --promote overlap --seed 11
// course: run --m 300 --n 270 --k 640 --promote overlap --seed 12
// course: run --m 2100 --n 1104 --k 1536 --promote overlap --seed 9
// course: run --m 1000 --n 700 --k 560 --sms 5 --promote overlap --seed 10
// course: run --m 301 --n 257 --k 512 --plant zeros-small --promote overlap
// course: run --m 301 --n 257 --k 512 --plant wrong-block-scale --promote overlap
// course: bench --bench
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
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
#include "fp8_gemm_shared.cuh"       // tile order, bf16 epilogue, cuBLASLt's FP8 GEMM

using bf16 = __nv_bfloat16;
namespace hopper = course::hopper;

// fp8_gemm.cu's shape: 128 x 128 tiles, k-tiles 128 deep, 6 stages, a producer and two consumer warpgroups.
constexpr int BK = hopper::kSwizzleElemsFp8;  // 128: one k-tile is one scaling block of K
constexpr int SCALE_BLOCK = 128;              // DeepSeek-V3's block: 1 x 128 for A, 128 x 128 for B
constexpr int KSTEP = 32, BM = 128, BN = fp8_gemm::kTileN, STAGES = 6, CONSUMERS = 2;
constexpr int THREADS = (CONSUMERS + 1) * 128;
static_assert(BK == SCALE_BLOCK && BN == SCALE_BLOCK,
              "a k-tile must be one scaling block, and a tile's columns one block of B");
constexpr int A_TILE = BM * BK, B_TILE = BN * BK, STAGE_BYTES = A_TILE + B_TILE;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232, GROUP_ROWS = 16;
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536, "more registers than an SM has");
constexpr size_t kSmemBytes = static_cast<size_t>(STAGES) * STAGE_BYTES + 1024;
static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a Hopper block may use");

// --8<-- [start:kernel]
// fp8_gemm.cu's promoted kernel, with the scales applied where the partial sums are promoted. Each thread's
// accumulator fragment covers two rows of C (row_a: d[4t], d[4t+1]; row_a + 8: d[4t+2], d[4t+3]) and 32 of
// the tile's 128 columns, all in one block of B: three scales per k-tile, loaded before the wgmma is issued
// so that their latency hides behind it. OVERLAP: fp8_gemm_shared.cuh's promoted_k_loop issues k-tile
// kt+1 before promoting kt, so two k-tiles' scales are live at once: they take turns in two register sets.
template <bool OVERLAP>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_block(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                   const __grid_constant__ CUtensorMap tmB, bf16* C, const float* scale_a, const float* scale_b,
                   int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace course::hopper;
  extern __shared__ unsigned char smem_raw[];
  uint8_t* sA = align_1k<uint8_t>(smem_raw);
  uint8_t* sB = sA + STAGES * A_TILE;
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

  const int wg = threadIdx.x / 128;
  const int tiles_m = course::ceil_div(M, BM), tiles_n = course::ceil_div(N, BN);
  const int tiles = tiles_m * tiles_n, ktiles = course::ceil_div(K, BK);  // ktiles = K blocks
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], CONSUMERS * 4);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  if (wg == 0) {  // producer: fp8_gemm_shared.cuh's, as in fp8_gemm.cu
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0)
      fp8_gemm::produce_tiles<STAGES, BM, BN, BK>(tiles_m, tiles_n, ktiles, group, &tmA, &tmB, sA, sB, full, empty);
  } else {
    setmaxnreg_inc<CONSUMER_REGS>();
    const int row_in_tile = (wg - 1) * 64;
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    auto release = [&](int s) {
      if (threadIdx.x % 32 == 0) mbar_arrive(&empty[s]);
    };
    float d[64], d_next[64], total[64];
    int it = 0;  // k-tiles consumed so far, over all of this block's tiles: the ring position
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      fp8_gemm::tile_coords(t, tiles_m, tiles_n, group, tm, tn);
      const int row_a = tm * BM + row_in_tile + warp * 16 + lane / 4;  // this thread's rows: row_a, row_a + 8
      const bool has_row0 = row_a < M, has_row1 = row_a + 8 < M;
      const float* sb_blocks = scale_b + static_cast<size_t>(tn) * ktiles;  // B block row tn: [ktiles]
#pragma unroll
      for (int i = 0; i < 64; ++i) total[i] = 0.0f;
      // the scales of rows (row_a, row_a + 8) for the even and the odd k-tile in flight (scalars, so that
      // choosing by parity is a select between registers, never an indexed local array)
      float even0 = 0.0f, even1 = 0.0f, odd0 = 0.0f, odd1 = 0.0f;
      auto issue = [&](float* acc, int kt) {
        // --8<-- [start:scales]
        const float* sa_block = scale_a + static_cast<size_t>(kt) * M;  // K block kt's row scales
        const float sb = __ldg(sb_blocks + kt);
        const float sa0 = has_row0 ? __ldg(sa_block + row_a) : 0.0f;  // rows past M: zeros, never stored
        const float sa1 = has_row1 ? __ldg(sa_block + row_a + 8) : 0.0f;
        // --8<-- [end:scales]
        if (kt % 2 == 0) {  // the parity is known at compile time in the overlapped loop
          even0 = sa0 * sb, even1 = sa1 * sb;
        } else {
          odd0 = sa0 * sb, odd1 = sa1 * sb;
        }
        const int s = (it + kt) % STAGES;
        mbar_wait(&full[s], ((it + kt) / STAGES) & 1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += KSTEP)  // scale-d off on the first: each k-block's sum starts afresh
          wgmma_64x128x32_e4m3(acc, smem_desc_fp8(sA + s * A_TILE + row_in_tile * BK + kk),
                               smem_desc_fp8(sB + s * B_TILE + kk), kk > 0);
        wgmma_commit();
      };
      auto release_ktile = [&](int kt) { release((it + kt) % STAGES); };
      auto promote = [&](const float* acc, int kt) {
        // --8<-- [start:promote]
        // The promotion is where the scales apply: the partial sum of k-block kt is in units of
        // sa[kt][row] * sb[tn][kt], so it is multiplied by them before the fp32 add.
        const float scale0 = kt % 2 == 0 ? even0 : odd0, scale1 = kt % 2 == 0 ? even1 : odd1;
#pragma unroll
        for (int i = 0; i < 64; i += 4) {
          total[i] += acc[i] * scale0;
          total[i + 1] += acc[i + 1] * scale0;
          total[i + 2] += acc[i + 2] * scale1;
          total[i + 3] += acc[i + 3] * scale1;
        }
        // --8<-- [end:promote]
      };
      fp8_gemm::promoted_k_loop<OVERLAP>(ktiles, d, d_next, issue, release_ktile, promote);
      it += ktiles;
      store_accumulator<BN>(total, C, M, N, tm * BM + row_in_tile, tn * BN);  // scaled already
    }
  }
#endif
}
// --8<-- [end:kernel]

// --8<-- [start:quantise]
// What a serving pipeline does before a block-scaled FP8 GEMM: each block of values gets its own scale,
// amax / 448 over the block (1 if the block is all zeros), and x / scale is rounded to the nearest e4m3
// (cuda_fp8.h, saturating). A: a block is 128 values of one row; B: 128 rows x 128 values. Blocks at the
// edges (M, N or K not multiples of 128) are partial and scaled over the values they hold.
struct BlockFp8 {
  std::vector<uint8_t> codes;  // rows x K
  std::vector<float> scales;   // A: [kblocks][rows]; B: [row blocks][kblocks]
};
static BlockFp8 quantise_blocks(const std::vector<float>& x, int rows, int K, int rows_per_block,
                                bool kblock_major) {
  const int kblocks = course::ceil_div(K, SCALE_BLOCK), rblocks = course::ceil_div(rows, rows_per_block);
  BlockFp8 q;
  q.codes.resize(x.size());
  q.scales.resize(static_cast<size_t>(kblocks) * rblocks);
  for (int rb = 0; rb < rblocks; ++rb) {
    const int r0 = rb * rows_per_block, r1 = std::min(rows, r0 + rows_per_block);
    for (int kb = 0; kb < kblocks; ++kb) {
      const int k0 = kb * SCALE_BLOCK, k1 = std::min(K, k0 + SCALE_BLOCK);
      float amax = 0.0f;
      for (int r = r0; r < r1; ++r)
        for (int k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r) * K + k]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      const size_t at =
          kblock_major ? static_cast<size_t>(kb) * rblocks + rb : static_cast<size_t>(rb) * kblocks + kb;
      q.scales[at] = scale;
      for (int r = r0; r < r1; ++r)
        for (int k = k0; k < k1; ++k) {
          const size_t i = static_cast<size_t>(r) * K + k;
          q.codes[i] = __nv_fp8_e4m3(x[i] / scale).__x;
        }
    }
  }
  return q;
}
// Inputs whose blocks differ in size by up to 2^12 either way, so that every block's scale matters and a
// kernel applying a neighbour's scale is far off: normal(0, 4) values times 2^e, e a random integer in
// [-12, 12] drawn per scaling block; with `quiet`, every third row from the second a further 2^-8 smaller.
static std::vector<float> random_blocked(int rows, int K, int rows_per_block, uint64_t seed, bool quiet) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  const int kblocks = course::ceil_div(K, SCALE_BLOCK), rblocks = course::ceil_div(rows, rows_per_block);
  std::vector<float> block_size(static_cast<size_t>(rblocks) * kblocks);
  for (auto& f : block_size) f = std::ldexp(1.0f, exponent(rng));
  std::vector<float> v(static_cast<size_t>(rows) * K);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k)
      v[static_cast<size_t>(r) * K + k] =
          dist(rng) * block_size[static_cast<size_t>(r / rows_per_block) * kblocks + k / SCALE_BLOCK];
  if (quiet) course::quiet_rows(v, rows, K, 0x1p-8f);
  return v;
}
// --8<-- [end:quantise]

// --8<-- [start:reference]
// The float64 reference for the rows in `rows`: each K block's exact sum of decoded e4m3 products (every
// e4m3 value is exactly a double; cuda_fp8.h decodes it), times that block's two scales, summed over the
// blocks. sum_abs is the same with |products|, the bound on what the accumulation can get wrong. `plain`
// and plain_abs are the unscaled sums: what cuBLASLt's per-tensor GEMM with unit scales computes from the
// same codes (the timing peer).
struct Reference {
  std::vector<int> rows;
  std::vector<double> want, sum_abs, plain, plain_abs;  // rows.size() x N each
};
static Reference reference(const BlockFp8& A, const BlockFp8& B, int M, int N, int K, int max_rows) {
  Reference ref;
  ref.rows = fp8_gemm::sampled_rows(M, max_rows);
  const int nrows = static_cast<int>(ref.rows.size());
  const size_t count = static_cast<size_t>(nrows) * N;
  ref.want.assign(count, 0.0);
  ref.sum_abs.assign(count, 0.0);
  ref.plain.assign(count, 0.0);
  ref.plain_abs.assign(count, 0.0);
  double table[256];
  for (int c = 0; c < 256; ++c) {
    __nv_fp8_e4m3 v;
    v.__x = static_cast<__nv_fp8_storage_t>(c);
    table[c] = static_cast<double>(static_cast<float>(v));
  }
  const int kblocks = course::ceil_div(K, SCALE_BLOCK);
  fp8_gemm::for_each_cell(ref.rows, N, K, A.codes, B.codes, table, [&](size_t r, int n, const double* a,
                                                                         const uint8_t* b) {
    const size_t row = static_cast<size_t>(ref.rows[r]);
    double want = 0, sum_abs = 0, plain = 0, plain_abs = 0;
    for (int kb = 0; kb < kblocks; ++kb) {
      double s = 0, s_abs = 0;
      fp8_gemm::exact_dot(a, b, table, kb * SCALE_BLOCK, std::min(K, (kb + 1) * SCALE_BLOCK), s, s_abs);
      const double scale = static_cast<double>(A.scales[static_cast<size_t>(kb) * M + row]) *
                           B.scales[static_cast<size_t>(n / SCALE_BLOCK) * kblocks + kb];
      want += scale * s;
      sum_abs += scale * s_abs;
      plain += s;
      plain_abs += s_abs;
    }
    const size_t i = r * N + n;
    ref.want[i] = want, ref.sum_abs[i] = sum_abs, ref.plain[i] = plain, ref.plain_abs[i] = plain_abs;
  });
  return ref;
}
// --8<-- [end:reference]

// --8<-- [start:tolerance]
// |got - want| <= rtol |want| + atol, fp8_gemm.cu's promoted criterion plus the scaling's fp32 roundings:
//   rtol = 2^-8 (1 + 2^-6): one bf16 rounding of the output, and a little for fp32 arithmetic.
//   atol = (136 u_tc + (kblocks + 2) 2^-24) sum_abs, u_tc = 2^-13: within a K block the tensor core's
//          narrow accumulator (fp8_gemm.cu's model: 34 truncations of at most u_tc per 32-deep instruction,
//          4 instructions) errs by at most 136 u_tc of that block's sum |a_k b_k|, and the block's scale
//          carries the bound over to the scaled sums; then sa * sb, the multiply-add into total and the
//          kblocks fp32 adds each round once (2^-24 of at most sum_abs).
constexpr double kRtol = 0x1p-8 * 1.015625, kUnitTensorCore = 0x1p-13;
constexpr double kPromotedTerms = (KSTEP + 2.0) * BK / KSTEP;  // 136
static std::vector<double> tolerance(const std::vector<double>& sum_abs, int K) {
  const double factor = kPromotedTerms * kUnitTensorCore + (course::ceil_div(K, SCALE_BLOCK) + 2) * 0x1p-24;
  std::vector<double> atol(sum_abs.size());
  for (size_t i = 0; i < atol.size(); ++i) atol[i] = factor * sum_abs[i];
  return atol;
}
// --8<-- [end:tolerance]

// --8<-- [start:launch]
struct BlockKernel {
  int M, N, K;
  CUtensorMap a, b;
  bf16* C;
  int sms;
  BlockKernel(int m, int n, int k, const uint8_t* A, const uint8_t* B, bf16* c, int blocks)
      : M(m), N(n), K(k), a(m > 0 ? hopper::make_kmajor_map_fp8(A, m, k, BM) : CUtensorMap{}),
        b(n > 0 ? hopper::make_kmajor_map_fp8(B, n, k, BN) : CUtensorMap{}), C(c), sms(blocks) {}
  void operator()(const float* scale_a, const float* scale_b, bool overlap) const {
    const int tiles = course::ceil_div(M, BM) * course::ceil_div(N, BN);
    if (tiles == 0) return;  // an empty C: nothing to launch (a grid of 0 blocks is a launch error)
    const int grid = std::min(tiles, sms);
    if (overlap)
      fp8_gemm_block<true><<<grid, THREADS, kSmemBytes>>>(M, N, K, a, b, C, scale_a, scale_b, GROUP_ROWS);
    else
      fp8_gemm_block<false><<<grid, THREADS, kSmemBytes>>>(M, N, K, a, b, C, scale_a, scale_b, GROUP_ROWS);
    CUDA_CHECK_LAUNCH();
  }
};
// --8<-- [end:launch]

// Poison C, run, compare the reference's rows. With plant_below > 0 the check also runs, quietly, on the
// output with its small elements zeroed, and must reject it.
template <typename Run>
static bool run_and_check(const char* name, Run&& run, bf16* C, int M, int N, const std::vector<int>& rows,
                          const std::vector<double>& want, const std::vector<double>& atol, double plant_below) {
  const std::vector<double> got = fp8_gemm::run_and_gather(run, C, M, N, rows);
  return course::check_close_each_planted(name, got.data(), want.data(), atol.data(), got.size(), kRtol,
                                          plant_below);
}

int main(int argc, char** argv) {
  course::Args args(argc, argv);
  const fp8_gemm::Options opt(args, 0);
  const bool bench = opt.bench, overlap = opt.overlap();
  const std::string plant_text = args.get_str("--plant", "");
  args.finish();
  opt.check();
  course::Plant plant;
  if (!course::parse_plant(plant_text, {course::Plant::kZerosSmall, course::Plant::kWrongBlockScale}, plant))
    return course::kExitFail;
  if (plant == course::Plant::kWrongBlockScale && opt.k <= SCALE_BLOCK) {
    std::fprintf(stderr, "error: --plant wrong-block-scale needs two K blocks (--k > %d)\n", SCALE_BLOCK);
    return course::kExitFail;
  }

  course::require_compute_capability(9, 0, "wgmma, setmaxnreg and TMA are Hopper instructions");
  hopper::require_sm90a("wgmma and setmaxnreg are sm_90a instructions");
  for (const void* kernel : {reinterpret_cast<const void*>(fp8_gemm_block<false>),
                             reinterpret_cast<const void*>(fp8_gemm_block<true>)})
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
  const int blocks = fp8_gemm::persistent_blocks(opt.sms);

  if (!bench && (opt.m == 0 || opt.n == 0)) {
    // C has no elements: the launch wrapper must launch nothing and write nothing. A poisoned buffer stands
    // where C would be, and must come back exactly as it went.
    const size_t guard = 256;
    bf16* dC = course::device_alloc<bf16>(guard);
    course::poison(dC, guard * sizeof(bf16));
    const std::vector<bf16> before = course::to_host(dC, guard);
    BlockKernel(opt.m, opt.n, opt.k, nullptr, nullptr, dC, blocks)(nullptr, nullptr, overlap);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<bf16> after = course::to_host(dC, guard);
    course::device_free({dC});
    const bool untouched = std::memcmp(before.data(), after.data(), guard * sizeof(bf16)) == 0;
    return course::check_true("fp8_block_empty", untouched, guard, "(M or N is 0: nothing launched, nothing written)")
               ? 0
               : course::kExitFail;
  }
  cublasLtHandle_t lt = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  bool ok = true;
  for (const fp8_gemm::Shape& s : opt.shapes({{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 7168, 2048}})) {
    const int kblocks = course::ceil_div(s.k, SCALE_BLOCK), nblocks = course::ceil_div(s.n, SCALE_BLOCK);
    const BlockFp8 A = quantise_blocks(random_blocked(s.m, s.k, 1, opt.seed, true), s.m, s.k, 1, true);
    const BlockFp8 B =
        quantise_blocks(random_blocked(s.n, s.k, SCALE_BLOCK, opt.seed + 1, false), s.n, s.k, SCALE_BLOCK, false);
    const Reference ref = reference(A, B, s.m, s.n, s.k, bench ? 32 : s.m);  // benchmark: 32 sampled rows
    uint8_t* dA = course::to_device(A.codes);
    uint8_t* dB = course::to_device(B.codes);
    float* dsa = course::to_device(A.scales);
    float* dsb = course::to_device(B.scales);
    float* d_one = course::to_device(std::vector<float>{1.0f});
    bf16* dC = course::device_alloc<bf16>(static_cast<size_t>(s.m) * s.n);
    const BlockKernel kernel(s.m, s.n, s.k, dA, dB, dC, blocks);
    const fp8_gemm::Fp8Operands per_tensor{s.m, s.n, s.k, dA, dB, d_one, d_one, dC};
    const fp8_gemm::CublasLtFp8 cublas(lt, per_tensor, false);

    const double plant_below = plant == course::Plant::kZerosSmall ? fp8_gemm::zeros_small_below(ref.want) : 0.0;
    const std::vector<double> atol = tolerance(ref.sum_abs, s.k);
    // the selected promotion (both in the benchmark, which times both)
    if (bench || !overlap)
      ok = run_and_check("fp8_block_scaled", [&] { kernel(dsa, dsb, false); }, dC, s.m, s.n, ref.rows, ref.want,
                         atol, plant_below) && ok;
    if (bench || overlap)
      ok = run_and_check("fp8_block_scaled_overlap", [&] { kernel(dsa, dsb, true); }, dC, s.m, s.n, ref.rows,
                         ref.want, atol, plant_below) && ok;
    // --8<-- [start:plant]
    // --plant wrong-block-scale: the kernel reads each row's scale of the next K block (the last block
    // reads the first's), as a kernel indexing sa off by one block would. The check must reject it.
    if (plant == course::Plant::kWrongBlockScale) {
      std::vector<float> shifted(A.scales.size());
      for (int kb = 0; kb < kblocks; ++kb)
        std::copy_n(A.scales.begin() + static_cast<size_t>((kb + 1) % kblocks) * s.m, s.m,
                    shifted.begin() + static_cast<size_t>(kb) * s.m);
      float* d_shifted = course::to_device(shifted);
      const bool passed = course::verdict_quietly([&] {
        return run_and_check("fp8_block_scaled", [&] { kernel(d_shifted, dsb, overlap); }, dC, s.m, s.n, ref.rows,
                             ref.want, atol, 0.0);
      });
      const std::string blocks = "kblocks=" + std::to_string(kblocks);
      ok = course::check_true("planted_wrong_block_scale_caught", !passed, static_cast<size_t>(s.m) * s.n,
                              blocks.c_str()) && ok;
      course::device_free({d_shifted});
    }
    // --8<-- [end:plant]
    // The peer: cuBLASLt's per-tensor FP8 GEMM (unit scales) on the same codes, checked against the
    // unscaled sums with the same promoted bound.
    const std::vector<double> plain_atol = tolerance(ref.plain_abs, s.k);
    if (cublas.available)
      ok = run_and_check("cublaslt_fp8_per_tensor", [&] { cublas(per_tensor); }, dC, s.m, s.n, ref.rows,
                         ref.plain, plain_atol, 0.0) && ok;
    else
      std::printf("NOTE cublaslt_fp8_per_tensor: no cuBLASLt FP8 algorithm for %dx%dx%d (N must be a multiple "
                  "of 8; not run)\n", s.m, s.n, s.k);
    if (bench) {
      char case_name[96];
      std::snprintf(case_name, sizeof(case_name), "fp8 gemm A*B^T %dx%dx%d", s.m, s.n, s.k);
      const double flops = 2.0 * s.m * s.n * s.k;
      const double bytes = static_cast<double>(s.m) * s.k + static_cast<double>(s.n) * s.k + 2.0 * s.m * s.n;
      const double scale_bytes = 4.0 * kblocks * (static_cast<double>(s.m) + nblocks);
      course::print_bench(case_name, "fp8 wgmma, block-scaled 1x128 / 128x128 (e4m3, fp32 acc)",
                          course::time_kernel_ms([&] { kernel(dsa, dsb, false); }), bytes + scale_bytes, flops,
                          false, {{"m", s.m}, {"n", s.n}, {"k", s.k}});
      course::print_bench(case_name, "fp8 wgmma, overlapped block-scaled 1x128 / 128x128 (e4m3, fp32 acc)",
                          course::time_kernel_ms([&] { kernel(dsa, dsb, true); }), bytes + scale_bytes, flops,
                          false, {{"m", s.m}, {"n", s.n}, {"k", s.k}});
      if (cublas.available)
        course::print_bench(case_name, "cuBLASLt fp8 per-tensor (e4m3, fp32 acc)",
                            course::time_kernel_ms([&] { cublas(per_tensor); }), bytes, flops, true,
                            {{"m", s.m}, {"n", s.n}, {"k", s.k}});
    }
    course::device_free({dA, dB, dsa, dsb, d_one, dC});
  }
  CUBLAS_CHECK(cublasLtDestroy(lt));
  return ok ? 0 : course::kExitFail;
}
