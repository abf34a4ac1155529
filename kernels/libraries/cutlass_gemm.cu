// cutlass_gemm.cu: GEMM through CUTLASS's C++ templates (the 2.x device-level API): a bf16
// tensor-core GEMM and an fp32 SIMT SGEMM, each checked against the CPU and timed against cuBLAS
// on the same sizes.
//
// Taught in docs/libraries/cutlass.md. Needs the header-only CUTLASS (pip wheel nvidia-cutlass,
// folder cutlass_library/source/include); the course passes its folder with -isystem. Without
// the headers the program compiles to a stub that reports itself waived.
// Build: nvcc -std=c++17 -O3 -arch=native --expt-relaxed-constexpr -isystem .cutlass/include
//        -o build/libraries/cutlass_gemm kernels/libraries/cutlass_gemm.cu -lcublas
// Run:   ./build/libraries/cutlass_gemm                  (checks both GEMMs)
//        ./build/libraries/cutlass_gemm --bench          (times them against cuBLAS at 4096^3)
//
// course: gpu
// course: libs cublas
// course: headers cutlass
// course: run --m 251 --n 136 --k 72
// course: run --m 1 --n 8 --k 8
// course: run --m 251 --n 136 --k 72 --plant zeros-small
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// The options, read the same way whether or not the CUTLASS headers are there, so that a typo is an
// error (exit 1) even in the stub below.
struct Options {
  int m, n, k;
  uint64_t seed;
  bool bench;
  bool plant;  // --plant zeros-small
};

static Options parse_options(int argc, char** argv) {
  const course::Args args{argc, argv};
  Options o{};
  o.m = (int)args.get_int("--m", 251, 1, 2048);  // bounded by the CPU reference's time
  o.n = (int)args.get_int("--n", 136, 8, 2048);
  o.k = (int)args.get_int("--k", 72, 8, 2048);
  o.seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  o.bench = args.has("--bench");
  o.plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (o.plant && o.m < 2) {
    std::fprintf(stderr,
                 "error: --plant zeros-small needs --m 2 or more (the quiet rows of A start at the second)\n");
    std::exit(course::kExitFail);
  }
  if (o.n % 8 || o.k % 8) {  // the bf16 kernel reads 8 elements (16 bytes) at a time along n and k
    std::fprintf(stderr, "error: --n and --k must be multiples of 8 (bf16 alignment)\n");
    std::exit(course::kExitFail);
  }
  return o;
}

#if __has_include(<cutlass/gemm/device/gemm.h>)
#include <cutlass/gemm/device/gemm.h>

#include "../common/bf16.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"

// --8<-- [start:types]
// A CUTLASS GEMM is a type: element types and layouts of A, B and C, the accumulator type, which
// units do the math (OpClassTensorOp: tensor cores; OpClassSimt: ordinary FMA) and the
// architecture whose instructions to use. Every other parameter (tile shapes, pipeline stages,
// epilogue) has a default for that combination, and each can be overridden.
using GemmBf16 = cutlass::gemm::device::Gemm<
    cutlass::bfloat16_t, cutlass::layout::RowMajor,   // A: m x k
    cutlass::bfloat16_t, cutlass::layout::RowMajor,   // B: k x n
    float, cutlass::layout::RowMajor,                 // C and D: m x n
    float,                                            // accumulator
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80>;  // mma.sync tensor cores (Ampere's, also on Hopper)

using GemmF32 = cutlass::gemm::device::Gemm<float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor,
                                            float, cutlass::layout::RowMajor>;  // defaults: SIMT, fp32
// --8<-- [end:types]

// --8<-- [start:run]
// D = alpha * A * B + beta * C. Leading dimensions are given per operand, row-major as declared,
// so there is no transposition trick as with cuBLAS. can_implement rejects sizes that break the
// kernel's alignment (the bf16 kernel reads 8 elements at a time along k and n).
template <typename Gemm, typename TA, typename TC>
static cutlass::Status run_gemm(const TA* A, const TA* B, TC* D, int m, int n, int k) {
  typename Gemm::Arguments args({m, n, k}, {A, k}, {B, n}, {D, n}, {D, n}, {1.0f, 0.0f});
  Gemm gemm;
  cutlass::Status s = gemm.can_implement(args);
  if (s != cutlass::Status::kSuccess) return s;
  return gemm(args);  // initialise and launch on the default stream; no workspace for these kernels
}
// --8<-- [end:run]

#define CUTLASS_CHECK(call)                                                                       \
  do {                                                                                            \
    cutlass::Status s_ = (call);                                                                  \
    if (s_ != cutlass::Status::kSuccess) {                                                        \
      std::fprintf(stderr, "CUTLASS error %s at %s:%d\n  in: %s\n", cutlass::cutlassGetStatusString(s_), \
                   __FILE__, __LINE__, #call);                                                    \
      std::exit(course::kExitFail);                                                               \
    }                                                                                             \
    CUDA_CHECK_LAUNCH();                                                                          \
  } while (0)

template <typename T>
static T* upload(const std::vector<T>& v) {
  T* p;
  CUDA_CHECK(cudaMalloc(&p, v.size() * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// Each output's tolerance follows its k products' sizes, sum_k |a_ik b_kj| (a reference on |A| and |B|),
// times the fp32 accumulator's unit roundoff (course::sum_atol); a fixed atol of 1e-4 let the small
// outputs of A's quiet rows come back as zeros. The reference reads the inputs the GPU multiplies.
template <typename T>
static std::vector<double> gemm_atol(int m, int n, int k, const std::vector<T>& A, const std::vector<T>& B) {
  std::vector<double> sum_abs((size_t)m * n);
  course::gemm_reference(m, n, k, course::abs_values(A).data(), course::abs_values(B).data(), sum_abs.data());
  return course::sum_atol(sum_abs, k, 0x1p-23);
}

static bool check(int m, int n, int k, uint64_t seed, bool plant) {
  std::vector<float> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  course::quiet_rows(A, m, k);  // every third row of A 2^20 times smaller: small outputs beside large ones
  const double plant_below = plant ? 1e-4 : 0;  // --plant zeros-small: zeros below the old fixed atol
  std::vector<double> want(C.size());
  float *dA = upload(A), *dB = upload(B), *dC;
  CUDA_CHECK(cudaMalloc(&dC, C.size() * sizeof(float)));
  course::poison(dC, C.size() * sizeof(float));
  course::gemm_reference(m, n, k, A.data(), B.data(), want.data());
  CUTLASS_CHECK((run_gemm<GemmF32>(dA, dB, dC, m, n, k)));
  CUDA_CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = course::check_close_each_planted("cutlass_sgemm_simt", C.data(), want.data(),
                                             gemm_atol(m, n, k, A, B).data(), C.size(), 0, plant_below);

  // The reference reads the bf16-rounded inputs, the values the tensor cores multiply.
  const std::vector<__nv_bfloat16> A16 = course::to_bf16(A), B16 = course::to_bf16(B);
  course::gemm_reference(m, n, k, A16.data(), B16.data(), want.data());
  // cutlass::bfloat16_t and __nv_bfloat16 are both the 16-bit bf16 format.
  auto* dA16 = reinterpret_cast<cutlass::bfloat16_t*>(upload(A16));
  auto* dB16 = reinterpret_cast<cutlass::bfloat16_t*>(upload(B16));
  course::poison(dC, C.size() * sizeof(float));
  CUTLASS_CHECK((run_gemm<GemmBf16>(dA16, dB16, dC, m, n, k)));
  CUDA_CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
  ok &= course::check_close_each_planted("cutlass_gemm_bf16_tensorop", C.data(), want.data(),
                                         gemm_atol(m, n, k, A16, B16).data(), C.size(), 0, plant_below);
  for (void* p : {(void*)dA, (void*)dB, (void*)dC, (void*)dA16, (void*)dB16}) CUDA_CHECK(cudaFree(p));
  return ok;
}

// --8<-- [start:bench]
static void bench(uint64_t seed) {
  const int s = 4096;
  const size_t e = (size_t)s * s;
  const double flops = 2.0 * s * s * s;
  // Random inputs: tensor cores draw less power on zeros, and clocks rise to match.
  std::vector<float> hA(e), hB(e);
  course::fill_uniform(hA, seed);
  course::fill_uniform(hB, seed + 1);
  float *A = upload(hA), *B = upload(hB), *C;
  CUDA_CHECK(cudaMalloc(&C, e * 4));
  auto* A16 = reinterpret_cast<cutlass::bfloat16_t*>(upload(course::to_bf16(hA)));
  auto* B16 = reinterpret_cast<cutlass::bfloat16_t*>(upload(course::to_bf16(hB)));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const float one = 1.0f, zero = 0.0f;
  const float t_cublas16 = course::time_kernel_ms([&] {
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s, s, s, &one, B16, CUDA_R_16BF, s, A16, CUDA_R_16BF, s,
                              &zero, C, CUDA_R_32F, s, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  const float t_cutlass16 =
      course::time_kernel_ms([&] { CUTLASS_CHECK((run_gemm<GemmBf16>(A16, B16, C, s, s, s))); });
  const float t_cublas32 = course::time_kernel_ms(
      [&] { CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s, s, s, &one, B, s, A, s, &zero, C, s)); });
  const float t_cutlass32 = course::time_kernel_ms([&] { CUTLASS_CHECK((run_gemm<GemmF32>(A, B, C, s, s, s))); });
  course::print_bench("GEMM 4096^3, bf16 in, fp32 out", "cuBLAS cublasGemmEx", t_cublas16, e * (2 + 2 + 4.0), flops,
                      true);
  course::print_bench("GEMM 4096^3, bf16 in, fp32 out", "CUTLASS 2.x Sm80 TensorOp (mma.sync)", t_cutlass16,
                      e * (2 + 2 + 4.0), flops);
  course::print_bench("GEMM 4096^3, fp32", "cuBLAS SGEMM", t_cublas32, e * 12.0, flops, true);
  course::print_bench("GEMM 4096^3, fp32", "CUTLASS 2.x SIMT SGEMM", t_cutlass32, e * 12.0, flops);
  // --8<-- [end:bench]
  CUBLAS_CHECK(cublasDestroy(h));
  for (void* p : {(void*)A, (void*)B, (void*)C, (void*)A16, (void*)B16}) CUDA_CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  course::require_compute_capability(8, 0, "the bf16 GEMM is built for Ampere's mma.sync tensor cores");
  const bool ok = check(o.m, o.n, o.k, o.seed, o.plant);
  if (ok && o.bench) bench(o.seed);
  return ok ? 0 : course::kExitFail;
}

#else  // no CUTLASS headers: say so, and count as waived rather than failed

int main(int argc, char** argv) {
  parse_options(argc, argv);
  std::printf("WAIVED needs the CUTLASS headers (pip install nvidia-cutlass; pass cutlass_library/source/include)\n");
  return course::kExitWaived;
}

#endif
