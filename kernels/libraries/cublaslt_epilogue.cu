// cublaslt_epilogue.cu: a linear layer Y = act(X * W + b) as one cuBLASLt matmul with a fused
// epilogue (bias plus ReLU or GELU), the algorithms its heuristic proposes, and the same layer as
// a cuBLAS GEMM followed by a separate bias-and-activation kernel.
//
// Taught in docs/libraries/cublaslt.md.
// Build: nvcc -O3 -arch=native -o build/libraries/cublaslt_epilogue
//        kernels/libraries/cublaslt_epilogue.cu -lcublasLt -lcublas
// Run:   ./build/libraries/cublaslt_epilogue               (checks both epilogues on odd sizes)
//        ./build/libraries/cublaslt_epilogue --bench       (times fused against unfused)
//
// course: gpu
// course: libs cublas cublasLt
// course: run --m 301 --n 136 --k 72
// course: run --m 1 --n 8 --k 8
// course: run --m 301 --n 136 --k 72 --plant zeros-small
// course: bench --bench
#include <cublasLt.h>
#include <cuda_bf16.h>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

enum class Act { kRelu, kGelu };

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
__host__ __device__ inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

// CPU reference: row-major Y[m][n] = act(sum_p X[m][p] W[p][n] + b[n]) in double, from the bf16
// values the GPU reads: the course's GEMM reference, then the bias and the activation.
static void linear_reference(int m, int n, int k, const __nv_bfloat16* X, const __nv_bfloat16* W,
                             const __nv_bfloat16* b, Act act, double* Y) {
  course::gemm_reference(m, n, k, X, W, Y);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double& y = Y[(size_t)i * n + j];
      const double z = y + course::to_double(b[j]);
      y = act == Act::kRelu ? std::max(z, 0.0)
                            : 0.5 * z * (1.0 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
    }
}

template <Act A>
__device__ inline float activate(float v) {
  return A == Act::kRelu ? fmaxf(v, 0.0f) : gelu_tanh(v);
}

// --8<-- [start:epilogue_kernel]
// The unfused path's second kernel: read the GEMM's output, add the bias, apply the activation,
// write it back. It moves 2 * m * n values through DRAM that the fused epilogue never moves, so it
// is written to run at memory speed: a block per row (the column is the loop index, so no division
// per element), and 16-byte accesses (8 bf16 values) when every row and the bias are 16-byte
// aligned, which the callers' sizes (n a multiple of 8) and cudaMalloc's alignment guarantee. The
// scalar loop handles what the vector loop leaves: whole rows when they are not aligned.
template <Act A>
__global__ void bias_act(__nv_bfloat16* __restrict__ Y, const __nv_bfloat16* __restrict__ b, int rows, int n,
                         bool vectorized) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    __nv_bfloat16* y = Y + (size_t)r * n;
    int done = 0;
    if (vectorized) {
      const int chunks = n / 8;
      for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        uint4 yv = reinterpret_cast<const uint4*>(y)[c];
        const uint4 bv = reinterpret_cast<const uint4*>(b)[c];
        auto* y2 = reinterpret_cast<__nv_bfloat162*>(&yv);
        const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&bv);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 v = __bfloat1622float2(y2[i]), w = __bfloat1622float2(b2[i]);
          y2[i] = __floats2bfloat162_rn(activate<A>(v.x + w.x), activate<A>(v.y + w.y));
        }
        reinterpret_cast<uint4*>(y)[c] = yv;
      }
      done = chunks * 8;
    }
    for (int c = done + threadIdx.x; c < n; c += blockDim.x)
      y[c] = __float2bfloat16(activate<A>(__bfloat162float(y[c]) + __bfloat162float(b[c])));
  }
}
// --8<-- [end:epilogue_kernel]

static void launch_bias_act(__nv_bfloat16* Y, const __nv_bfloat16* b, int rows, int n, Act act) {
  const bool vectorized =
      n % 8 == 0 && reinterpret_cast<uintptr_t>(Y) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
  const int blocks = std::min(rows, 1 << 16);
  if (act == Act::kRelu) bias_act<Act::kRelu><<<blocks, 256>>>(Y, b, rows, n, vectorized);
  else bias_act<Act::kGelu><<<blocks, 256>>>(Y, b, rows, n, vectorized);
  CUDA_CHECK_LAUNCH();
}

// Everything cuBLASLt needs to run one matmul, built once and reused: the descriptors are opaque
// objects that hold the problem, and the algorithm is chosen once by the heuristic.
struct LtLinear {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
};

// --8<-- [start:lt_setup]
// Row-major Y[m][n] = X[m][k] W[k][n] is column-major Y^T = W^T X^T (see the cuBLAS page), so
// cuBLASLt's "A" is W (n-by-k, ld n), its "B" is X (k-by-m, ld k) and D is n-by-m. The bias then
// has one value per row of D, which is what the BIAS epilogues broadcast.
static LtLinear make_lt_linear(cublasLtHandle_t lt, int m, int n, int k, Act act, const __nv_bfloat16* bias,
                               size_t workspace_bytes, int want_algos) {
  LtLinear L;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&L.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasLtEpilogue_t epi = act == Act::kRelu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const cudaDataType_t bias_type = CUDA_R_16BF;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&L.a, CUDA_R_16BF, n, k, n));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&L.b, CUDA_R_16BF, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&L.d, CUDA_R_16BF, n, m, n));

  // The heuristic ranks the kernels that can run this problem within the workspace we offer.
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  L.candidates.resize(want_algos);
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, L.op, L.a, L.b, L.d, L.d, pref, want_algos,
                                              L.candidates.data(), &found));
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (found == 0) {
    std::fprintf(stderr, "error: cuBLASLt found no algorithm for this matmul and epilogue\n");
    std::exit(course::kExitFail);
  }
  L.candidates.resize(found);
  L.algo = L.candidates[0].algo;  // the heuristic's first choice
  return L;
}

static void lt_run(cublasLtHandle_t lt, const LtLinear& L, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* X,
                   const __nv_bfloat16* W, __nv_bfloat16* Y, void* workspace, size_t workspace_bytes) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(lt, L.op, &alpha, W, L.a, X, L.b, &beta, Y, L.d, Y, L.d, &algo, workspace,
                              workspace_bytes, /*stream=*/0));
}
// --8<-- [end:lt_setup]

static void destroy(LtLinear& L) {
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(L.a));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(L.b));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(L.d));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(L.op));
}

// The unfused path: a plain cuBLAS GEMM, then the epilogue kernel.
static void unfused_run(cublasHandle_t h, const __nv_bfloat16* X, const __nv_bfloat16* W, const __nv_bfloat16* bias,
                        __nv_bfloat16* Y, int m, int n, int k, Act act) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, W, CUDA_R_16BF, n, X, CUDA_R_16BF, k, &beta,
                            Y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  launch_bias_act(Y, bias, m, n, act);
}

// --8<-- [start:tolerance]
// The tolerance of y = act(z) when z may be off by e_z (the GEMM's error, bounded per element by
// course::sum_atol from its terms' sizes): the error of z carried through the activation's slope, at most
// |act'(z)| + e_z max|act''| near z (ReLU: 1 where z + e_z > 0, none where the output is surely 0; GELU:
// |GELU'(z)| + e_z, since |GELU''| < 1), plus GELU's own evaluation in fp32: a fused epilogue may use the
// hardware's approximate tanh (PTX tanh.approx.f32, relative error about 2^-11), which moves
// 0.5 z (1 + tanh) by up to 2^-12 |z|: allowed twice over, 2^-11 |z|. The bf16 rounding of y itself is
// the caller's rtol. The allowance also covers the gap between this tanh form and the exact z Phi(z)
// (at most 0.36 of it), so an epilogue that computes either passes. A fixed atol of 1e-2 exceeded GELU's
// whole negative tail (|GELU(z)| < 1e-2 for z < -2.9) and every output near z = 0: zeros passed there.
static double gelu_tanh_slope(double z) {
  const double c = 0.7978845608028654, t = std::tanh(c * (z + 0.044715 * z * z * z));
  return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z);
}

static double activation_atol(Act act, double z, double e_z) {
  if (act == Act::kRelu) return z + e_z > 0 ? e_z : 0.0;
  return (std::fabs(gelu_tanh_slope(z)) + e_z) * e_z + 0x1p-11 * std::fabs(z);
}
// --8<-- [end:tolerance]

// the bf16 rounding of each output (unit roundoff 2^-8: 8 significant bits), twice over
constexpr double kBf16Rtol = 0x1p-7;
constexpr double kOldAtol = 1e-2;      // the fixed atol these checks used: --plant zeros-small zeroes below it

static bool check(cublasLtHandle_t lt, cublasHandle_t h, int m, int n, int k, uint64_t seed, void* ws,
                  size_t ws_bytes, bool plant) {
  std::vector<float> X((size_t)m * k), W((size_t)k * n), b(n);
  course::fill_uniform(X, seed);
  course::fill_uniform(W, seed + 1);
  course::fill_uniform(b, seed + 2);
  const auto X16 = course::to_bf16(X), W16 = course::to_bf16(W), b16 = course::to_bf16(b);
  __nv_bfloat16 *dX = course::to_device(X16), *dW = course::to_device(W16), *db = course::to_device(b16), *dY;
  CUDA_CHECK(cudaMalloc(&dY, (size_t)m * n * sizeof(__nv_bfloat16)));
  std::vector<__nv_bfloat16> Y16((size_t)m * n);
  std::vector<float> Y((size_t)m * n);
  std::vector<double> want((size_t)m * n), gemm((size_t)m * n), sum_abs((size_t)m * n), atol((size_t)m * n);
  // The GEMM alone and its terms' sizes: z = gemm + b is off by at most acc[i] in fp32 (k products and
  // the bias); the unfused path also rounds the GEMM's output to bf16 (up to 2^-8 of it) before the bias.
  course::gemm_reference(m, n, k, X16.data(), W16.data(), gemm.data());
  course::gemm_reference(m, n, k, course::abs_values(X16).data(), course::abs_values(W16).data(), sum_abs.data());
  for (size_t i = 0; i < sum_abs.size(); ++i) sum_abs[i] += std::fabs(course::to_double(b16[i % n]));
  const std::vector<double> acc = course::sum_atol(sum_abs, k + 1, 0x1p-23);
  bool ok = true;
  for (Act act : {Act::kRelu, Act::kGelu}) {
    linear_reference(m, n, k, X16.data(), W16.data(), b16.data(), act, want.data());
    const char* tag = act == Act::kRelu ? "relu" : "gelu";
    for (int path = 0; path < 2; ++path) {
      for (size_t i = 0; i < atol.size(); ++i) {
        const double e_z = acc[i] + (path == 1 ? 0x1p-8 * (std::fabs(gemm[i]) + acc[i]) : 0.0);
        atol[i] = activation_atol(act, gemm[i] + course::to_double(b16[i % n]), e_z);
      }
      course::poison(dY, Y16.size() * sizeof(__nv_bfloat16));
      if (path == 0) {
        LtLinear L = make_lt_linear(lt, m, n, k, act, db, ws_bytes, 1);
        lt_run(lt, L, L.algo, dX, dW, dY, ws, ws_bytes);
        destroy(L);
      } else {
        unfused_run(h, dX, dW, db, dY, m, n, k, act);
      }
      CUDA_CHECK(cudaMemcpy(Y16.data(), dY, Y16.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < Y.size(); ++i) Y[i] = __bfloat162float(Y16[i]);
      char name[64];
      std::snprintf(name, sizeof(name), "%s_bias_%s", path == 0 ? "lt_fused" : "cublas_then_kernel", tag);
      ok &= course::check_close_each_planted(name, Y.data(), want.data(), atol.data(), Y.size(), kBf16Rtol,
                                             plant ? kOldAtol : 0);
    }
  }
  for (void* p : {(void*)dX, (void*)dW, (void*)db, (void*)dY}) CUDA_CHECK(cudaFree(p));
  return ok;
}

// The epilogue kernel alone on rows that are not 16-byte aligned (width n + 1), so that its scalar
// loop is checked too; the unfused runs above check its vector loop.
static bool check_bias_act_scalar(int m, int n, uint64_t seed, bool plant) {
  const int width = n + 1;
  std::vector<float> y((size_t)m * width), b(width);
  course::fill_uniform(y, seed + 3, -3.0f, 3.0f);
  course::fill_uniform(b, seed + 4);
  const auto y16 = course::to_bf16(y), b16 = course::to_bf16(b);
  __nv_bfloat16 *dY = course::to_device(y16), *db = course::to_device(b16);
  launch_bias_act(dY, db, m, width, Act::kGelu);
  std::vector<__nv_bfloat16> got16(y16.size());
  CUDA_CHECK(cudaMemcpy(got16.data(), dY, got16.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  std::vector<float> got(got16.size());
  std::vector<double> want(got16.size()), atol(got16.size());
  for (size_t i = 0; i < got.size(); ++i) {
    got[i] = __bfloat162float(got16[i]);
    const double z = course::to_double(y16[i]) + course::to_double(b16[i % width]);
    want[i] = 0.5 * z * (1.0 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
    atol[i] = activation_atol(Act::kGelu, z, 0x1p-24 * std::fabs(z));  // z: one fp32 addition
  }
  for (void* p : {(void*)dY, (void*)db}) CUDA_CHECK(cudaFree(p));
  // GELU's own evaluation and one bf16 rounding of the result against a float64 reference.
  return course::check_close_each_planted("bias_gelu_kernel_unaligned_rows", got.data(), want.data(), atol.data(),
                                          got.size(), kBf16Rtol, plant ? kOldAtol : 0);
}

// print_bench's line plus "algo_rank": the heuristic's rank of the cuBLASLt algorithm timed (-1: not cuBLASLt).
static void bench_line(const char* c, const char* impl, float ms, double bytes, double flops, bool peer, int algo) {
  course::print_bench(c, impl, ms, bytes, flops, peer, {{"algo_rank", algo}});
}

// --8<-- [start:bench]
static void bench(cublasLtHandle_t lt, cublasHandle_t h, void* ws, size_t ws_bytes, uint64_t seed) {
  const int m = 8192, n = 4096, k = 1024;  // 8192 tokens through a 1024 -> 4096 layer
  // Random inputs (the tensor cores draw less power on zeros or constants, and clock higher).
  std::vector<float> hX((size_t)m * k), hW((size_t)k * n), hb(n);
  course::fill_uniform(hX, seed);
  course::fill_uniform(hW, seed + 1);
  course::fill_uniform(hb, seed + 2);
  __nv_bfloat16 *X = course::to_device(course::to_bf16(hX)), *W = course::to_device(course::to_bf16(hW)),
                *b = course::to_device(course::to_bf16(hb)), *Y;
  CUDA_CHECK(cudaMalloc(&Y, (size_t)m * n * sizeof(__nv_bfloat16)));
  const double flops = 2.0 * m * n * k, bytes = 2.0 * ((double)m * k + (double)k * n + n + (double)m * n);
  const char* c = "linear 8192x1024 -> 4096, bf16, bias+GELU";

  LtLinear L = make_lt_linear(lt, m, n, k, Act::kGelu, b, ws_bytes, 8);
  const float fused = course::time_kernel_ms([&] { lt_run(lt, L, L.algo, X, W, Y, ws, ws_bytes); });
  bench_line(c, "cuBLASLt fused epilogue, heuristic's first choice", fused, bytes, flops, true, 0);
  // Every other candidate the heuristic returned, timed the same way: is the first choice best?
  for (size_t i = 1; i < L.candidates.size(); ++i) {
    const float t = course::time_kernel_ms([&] { lt_run(lt, L, L.candidates[i].algo, X, W, Y, ws, ws_bytes); });
    int id = 0, tile = 0;
    size_t written = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&L.candidates[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id),
                                                      &written));
    CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&L.candidates[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                      sizeof(tile), &written));
    char impl[96];
    std::snprintf(impl, sizeof(impl), "cuBLASLt fused, candidate %zu (algo %d, tile %d)", i, id, tile);
    bench_line(c, impl, t, bytes, flops, false, (int)i);
  }
  const float unfused = course::time_kernel_ms([&] { unfused_run(h, X, W, b, Y, m, n, k, Act::kGelu); });
  bench_line(c, "cuBLAS GEMM + separate bias+GELU kernel", unfused, bytes + 4.0 * m * n, flops, false, -1);
  // The epilogue kernel alone: what fusion saves at most. Its bytes are one read and one write of Y
  // (and the bias), so its GB/s says how close it runs to the memory's speed.
  const float epilogue = course::time_kernel_ms([&] { launch_bias_act(Y, b, m, n, Act::kGelu); });
  bench_line(c, "bias+GELU kernel alone", epilogue, 4.0 * m * n + 2.0 * n, 0, false, -1);
  destroy(L);
  // --8<-- [end:bench]
  for (void* p : {(void*)X, (void*)W, (void*)b, (void*)Y}) CUDA_CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Sizes are bounded by the CPU reference's time. cuBLASLt's bf16 kernels want leading dimensions
  // that are multiples of 8 (16 bytes); the heuristic returns nothing otherwise for some epilogues.
  const int m = (int)args.get_int("--m", 301, 1, 2048), n = (int)args.get_int("--n", 136, 8, 2048);
  const int k = (int)args.get_int("--k", 72, 8, 2048);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (n % 8 || k % 8) {
    std::fprintf(stderr, "error: --n and --k must be multiples of 8 (cuBLASLt's bf16 alignment)\n");
    return course::kExitFail;
  }
  cublasLtHandle_t lt;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  CUBLAS_CHECK(cublasCreate(&h));
  // cuBLASLt takes its workspace from the caller: 32 MiB is what NVIDIA suggests for Hopper.
  const size_t ws_bytes = 32u << 20;
  void* ws = nullptr;
  CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  bool ok = check(lt, h, m, n, k, seed, ws, ws_bytes, plant);
  ok &= check_bias_act_scalar(m, n, seed, plant);
  if (ok && run_bench) bench(lt, h, ws, ws_bytes, seed);
  CUDA_CHECK(cudaFree(ws));
  CUBLAS_CHECK(cublasDestroy(h));
  CUBLAS_CHECK(cublasLtDestroy(lt));
  return ok ? 0 : course::kExitFail;
}
