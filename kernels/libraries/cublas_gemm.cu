// cublas_gemm.cu: matrix multiplication through cuBLAS. SGEMM (fp32), the same GEMM with TF32
// tensor-core math, a bf16 GEMM on tensor cores (cublasGemmEx), row-major matrices through a
// column-major library, and a strided batched GEMM.
//
// Taught in docs/libraries/cublas.md.
// Build: nvcc -O3 -arch=native -o build/libraries/cublas_gemm kernels/libraries/cublas_gemm.cu -lcublas
// Run:   ./build/libraries/cublas_gemm                 (checks every variant on odd sizes)
//        ./build/libraries/cublas_gemm --bench         (also times them at 4096^3 and 8192^3)
//
// course: gpu
// course: libs cublas
// course: run --m 257 --n 131 --k 199 --batch 7
// course: run --m 1 --n 1 --k 1 --batch 1
// course: run --m 257 --n 131 --k 199 --batch 7 --plant zeros-small
// course: bench --bench
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

// Fills device memory with reproducible values in [-1, 1) without a host round trip, so the
// 8192^3 benchmark does not spend seconds generating and copying inputs.
template <typename T>
__global__ void fill_hash(T* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
    p[i] = static_cast<T>(static_cast<float>(h) * (2.0f / 4294967296.0f) - 1.0f);
  }
}

template <typename T>
static void fill_device(T* p, size_t n, uint32_t seed) {
  fill_hash<<<1024, 256>>>(p, n, seed);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:rowmajor]
// cuBLAS stores matrices column-major (Fortran order): element (i, j) of an m-by-n matrix with
// leading dimension ld sits at i + j * ld. A row-major m-by-n matrix read column-major is its
// transpose, n-by-m. So to compute row-major C = A * B we ask cuBLAS for C^T = B^T * A^T, which it
// sees as plain column-major matrices: swap the operands and swap m with n. No data moves.
static void sgemm_row_major(cublasHandle_t h, const float* A, const float* B, float* C, int m, int n, int k) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N,
                           n, m, k,          // C^T is n-by-m
                           &alpha,
                           B, n,             // B^T: n-by-k, leading dimension n
                           A, k,             // A^T: k-by-m, leading dimension k
                           &beta,
                           C, n));           // C^T: n-by-m, leading dimension n
}
// --8<-- [end:rowmajor]

// --8<-- [start:gemmex]
// The general entry point: the storage types of A, B and C and the compute type are separate
// arguments. bf16 inputs with fp32 accumulation run on tensor cores; so do fp32 inputs with
// CUBLAS_COMPUTE_32F_FAST_TF32, which rounds them to TF32 (10-bit mantissa) inside the GEMM.
static void gemm_ex_row_major(cublasHandle_t h, const void* A, const void* B, void* C, int m, int n, int k,
                              cudaDataType_t ab_type, cudaDataType_t c_type, cublasComputeType_t compute) {
  const float alpha = 1.0f, beta = 0.0f;  // float because the compute type is 32F
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, ab_type, n, A, ab_type, k, &beta,
                            C, c_type, n, compute, CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:gemmex]

// --8<-- [start:batched]
// batch independent row-major GEMMs whose matrices sit at fixed strides in three buffers: one
// call, one launch, instead of batch launches of small GEMMs that each leave most SMs idle.
static void gemm_strided_batched(cublasHandle_t h, const __nv_bfloat16* A, const __nv_bfloat16* B, float* C,
                                 int m, int n, int k, int batch) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                          B, CUDA_R_16BF, n, (long long)k * n,
                                          A, CUDA_R_16BF, k, (long long)m * k, &beta,
                                          C, CUDA_R_32F, n, (long long)m * n, batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:batched]

// --8<-- [start:tolerance]
// Each output is a sum of k products, so its tolerance comes from the size of those products,
// sum_k |a_ik b_kj| (a reference run on |A| and |B|), times the unit roundoff of what rounds: the fp32
// accumulator (2^-23), and for TF32 also the inputs (2^-10). A fixed atol (it was 1e-4 to 2e-2) let an
// output smaller than itself come back as zero; the quiet rows of A below make such outputs.
static std::vector<double> gemm_atol(int m, int n, int k, const std::vector<float>& A, const std::vector<float>& B,
                                     double u_in) {
  std::vector<double> sum_abs((size_t)m * n);
  course::gemm_reference(m, n, k, course::abs_values(A).data(), course::abs_values(B).data(), sum_abs.data());
  return course::sum_atol(sum_abs, k, 0x1p-23, u_in);
}
// --8<-- [end:tolerance]

// plant_below: with --plant zeros-small, each check is also run on its output with zeros where the
// reference is below the old fixed atol (course::check_close_each_planted); 0 otherwise.
static bool check_all(cublasHandle_t h, int m, int n, int k, int batch, uint64_t seed, bool plant) {
  bool ok = true;
  std::vector<float> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
  std::vector<double> want((size_t)m * n);
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  course::quiet_rows(A, m, k);  // every third row of A 2^20 times smaller: small outputs beside large ones
  const std::vector<double> atol = gemm_atol(m, n, k, A, B, 0), atol_tf32 = gemm_atol(m, n, k, A, B, 0x1p-10);
  float *dA = course::to_device(A), *dB = course::to_device(B), *dC = course::device_alloc<float>(C.size());
  course::gemm_reference(m, n, k, A.data(), B.data(), want.data());

  // fp32 in, fp32 math: only summation order differs from the reference.
  course::poison(dC, C.size() * sizeof(float));
  sgemm_row_major(h, dA, dB, dC, m, n, k);
  C = course::to_host(dC, C.size());
  ok &= course::check_close_each_planted("sgemm_row_major", C.data(), want.data(), atol.data(), C.size(), 0,
                                         plant ? 1e-4 : 0);

  // TF32: inputs lose 13 mantissa bits, so each product moves by up to 2^-9 of its size.
  course::poison(dC, C.size() * sizeof(float));
  gemm_ex_row_major(h, dA, dB, dC, m, n, k, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32);
  C = course::to_host(dC, C.size());
  ok &= course::check_close_each_planted("gemm_tf32", C.data(), want.data(), atol_tf32.data(), C.size(), 0,
                                         plant ? 2e-2 : 0);

  // bf16: the reference reads the same rounded inputs the GPU multiplies, so that the tolerance
  // measures the GEMM and not the rounding of its inputs.
  const std::vector<__nv_bfloat16> A16 = course::to_bf16(A), B16 = course::to_bf16(B);
  std::vector<double> want16((size_t)m * n), sum_abs16((size_t)m * n);
  course::gemm_reference(m, n, k, A16.data(), B16.data(), want16.data());
  course::gemm_reference(m, n, k, course::abs_values(A16).data(), course::abs_values(B16).data(), sum_abs16.data());
  const std::vector<double> atol16 = course::sum_atol(sum_abs16, k, 0x1p-23);
  __nv_bfloat16 *dA16 = course::to_device(A16), *dB16 = course::to_device(B16);
  course::poison(dC, C.size() * sizeof(float));
  gemm_ex_row_major(h, dA16, dB16, dC, m, n, k, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F);
  C = course::to_host(dC, C.size());
  ok &= course::check_close_each_planted("gemm_bf16_fp32_out", C.data(), want16.data(), atol16.data(), C.size(), 0,
                                         plant ? 1e-4 : 0);

  // Strided batched: batch different (A_i, B_i) pairs, each checked against its own reference.
  std::vector<float> Ab((size_t)batch * m * k), Bb((size_t)batch * k * n), Cb((size_t)batch * m * n);
  course::fill_uniform(Ab, seed + 2);
  course::fill_uniform(Bb, seed + 3);
  course::quiet_rows(Ab, (size_t)batch * m, k);
  const std::vector<__nv_bfloat16> Ab16 = course::to_bf16(Ab), Bb16 = course::to_bf16(Bb);
  const std::vector<float> Ab_abs = course::abs_values(Ab16), Bb_abs = course::abs_values(Bb16);
  std::vector<double> wantb(Cb.size()), sum_absb(Cb.size());
  for (int b = 0; b < batch; ++b) {
    course::gemm_reference(m, n, k, Ab16.data() + (size_t)b * m * k, Bb16.data() + (size_t)b * k * n,
                           wantb.data() + (size_t)b * m * n);
    course::gemm_reference(m, n, k, Ab_abs.data() + (size_t)b * m * k, Bb_abs.data() + (size_t)b * k * n,
                           sum_absb.data() + (size_t)b * m * n);
  }
  const std::vector<double> atolb = course::sum_atol(sum_absb, k, 0x1p-23);
  __nv_bfloat16 *dAb = course::to_device(Ab16), *dBb = course::to_device(Bb16);
  float* dCb = course::device_alloc<float>(Cb.size());
  course::poison(dCb, Cb.size() * sizeof(float));
  gemm_strided_batched(h, dAb, dBb, dCb, m, n, k, batch);
  Cb = course::to_host(dCb, Cb.size());
  ok &= course::check_close_each_planted("gemm_strided_batched_bf16", Cb.data(), wantb.data(), atolb.data(),
                                         Cb.size(), 0, plant ? 1e-4 : 0);

  course::device_free({dA, dB, dC, dA16, dB16, dAb, dBb, dCb});
  return ok;
}

// Prints a BENCH line with the matrix size as an extra field for plots.
static void bench_line(const char* case_name, const char* impl, float ms, double bytes, double flops, int size) {
  course::print_bench(case_name, impl, ms, bytes, flops, false, {{"size", size}});
}

// --8<-- [start:bench]
static void bench(cublasHandle_t h) {
  const int big = 8192, mid = 4096;
  const size_t nbig = (size_t)big * big;
  float *A = course::device_alloc<float>(nbig), *B = course::device_alloc<float>(nbig),
        *C = course::device_alloc<float>(nbig);
  __nv_bfloat16 *A16 = course::device_alloc<__nv_bfloat16>(nbig), *B16 = course::device_alloc<__nv_bfloat16>(nbig),
                *C16 = course::device_alloc<__nv_bfloat16>(nbig);
  fill_device(A, nbig, 1u); fill_device(B, nbig, 2u);
  fill_device(A16, nbig, 3u); fill_device(B16, nbig, 4u);

  for (int s : {mid, big}) {
    const double flops = 2.0 * s * s * s;
    char name[64];
    std::snprintf(name, sizeof(name), "GEMM %d^3", s);
    const float t32 = course::time_kernel_ms([&] { sgemm_row_major(h, A, B, C, s, s, s); });
    bench_line(name, "cuBLAS SGEMM fp32", t32, 3.0 * s * s * 4, flops, s);
    const float ttf = course::time_kernel_ms(
        [&] { gemm_ex_row_major(h, A, B, C, s, s, s, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32); });
    bench_line(name, "cuBLAS TF32 tensor cores", ttf, 3.0 * s * s * 4, flops, s);
    const float t16 = course::time_kernel_ms(
        [&] { gemm_ex_row_major(h, A16, B16, C16, s, s, s, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F); });
    bench_line(name, "cuBLAS bf16 tensor cores", t16, 3.0 * s * s * 2, flops, s);
  }

  // 256 small GEMMs: one strided batched call against a loop of single calls.
  const int bs = 256, batch = 256;
  const double flops = 2.0 * bs * bs * bs * batch, bytes = 2.0 * bs * bs * batch * 2 + 4.0 * bs * bs * batch;
  const float tb = course::time_kernel_ms([&] { gemm_strided_batched(h, A16, B16, C, bs, bs, bs, batch); });
  const float tl = course::time_kernel_ms([&] {
    for (int b = 0; b < batch; ++b)
      gemm_strided_batched(h, A16 + (size_t)b * bs * bs, B16 + (size_t)b * bs * bs, C + (size_t)b * bs * bs,
                           bs, bs, bs, 1);
  });
  course::print_bench("256 GEMMs of 256^3, bf16", "strided batched, one call", tb, bytes, flops, true);
  course::print_bench("256 GEMMs of 256^3, bf16", "loop of 256 calls", tl, bytes, flops);
  // --8<-- [end:bench]
  course::device_free({A, B, C, A16, B16, C16});
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Sizes are bounded by the CPU reference's time, not by cuBLAS.
  const int m = (int)args.get_int("--m", 257, 1, 2048), n = (int)args.get_int("--n", 131, 1, 2048);
  const int k = (int)args.get_int("--k", 199, 1, 2048), batch = (int)args.get_int("--batch", 7, 1, 64);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (!course::plant_fits_rows(plant, m)) return course::kExitFail;
  // --8<-- [start:handle]
  // A handle holds cuBLAS's state for the device that was current when it was created (the stream,
  // the math mode, a workspace). Create it once: creation costs far more than a small GEMM. cuBLAS
  // calls may share a handle across host threads, but a setting one thread changes (stream, math
  // mode) applies to every thread's later calls, so NVIDIA advises a handle per thread.
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  // --8<-- [end:handle]
  const bool ok = check_all(handle, m, n, k, batch, seed, plant);
  if (ok && run_bench) bench(handle);
  CUBLAS_CHECK(cublasDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
