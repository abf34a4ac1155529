// cublasxt_gemm.cu: cuBLASXt, the host-memory, multi-GPU front end of cuBLAS: an SGEMM on
// matrices that live in host memory, tiled and streamed through every selected GPU, against
// cuBLAS on one GPU with the copies counted and with the data already on the GPU.
//
// Taught in docs/libraries/multi-gpu-blas.md. Runs on any number of GPUs (1 included).
// Build: nvcc -O3 -arch=native -o build/libraries/cublasxt_gemm kernels/libraries/cublasxt_gemm.cu -lcublas
// Run:   ./build/libraries/cublasxt_gemm                 (checks cuBLASXt on odd sizes)
//        ./build/libraries/cublasxt_gemm --bench         (times an 8192^3 SGEMM three ways)
//
// course: gpu
// course: libs cublas
// course: run --m 517 --n 301 --k 263
// course: run --m 1 --n 1 --k 1
// course: run --m 517 --n 301 --k 263 --plant zeros-small
// course: bench --bench
#include <cublasXt.h>

#include <cstring>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/inputs.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// --8<-- [start:xt]
// cuBLASXt takes HOST pointers. It cuts C into blockDim x blockDim tiles, deals them out to the
// selected GPUs, and on each GPU streams the needed panels of A and B in, multiplies, and
// streams the tile of C back, overlapping copies with compute. Column-major, like cuBLAS.
static cublasXtHandle_t make_xt(int ngpus, int block_dim) {
  cublasXtHandle_t xt;
  CUBLAS_CHECK(cublasXtCreate(&xt));
  std::vector<int> devices(ngpus);
  for (int i = 0; i < ngpus; ++i) devices[i] = i;
  CUBLAS_CHECK(cublasXtDeviceSelect(xt, ngpus, devices.data()));
  CUBLAS_CHECK(cublasXtSetBlockDim(xt, block_dim));
  return xt;
}

static void xt_sgemm_row_major(cublasXtHandle_t xt, const float* A, const float* B, float* C, size_t m, size_t n,
                               size_t k) {
  const float alpha = 1.0f, beta = 0.0f;
  // The same operand swap as cuBLAS: row-major C = A B is column-major C^T = B^T A^T.
  CUBLAS_CHECK(cublasXtSgemm(xt, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, n, A, k, &beta, C, n));
}
// --8<-- [end:xt]

// plant: --plant zeros-small (the check is also run on C with zeros below the old fixed atol, 1e-4).
static bool check(int ngpus, int m, int n, int k, uint64_t seed, bool plant) {
  std::vector<float> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  course::quiet_rows(A, m, k);  // every third row of A 2^20 times smaller: small outputs beside large ones
  std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());  // poisoned, on the host
  std::vector<double> want(C.size());
  course::gemm_reference(m, n, k, A.data(), B.data(), want.data());
  // A small block size so that even the check's matrices are split into many tiles.
  cublasXtHandle_t xt = make_xt(ngpus, 128);
  xt_sgemm_row_major(xt, A.data(), B.data(), C.data(), m, n, k);  // returns when C is on the host
  CUBLAS_CHECK(cublasXtDestroy(xt));
  char name[48];
  std::snprintf(name, sizeof(name), "cublasxt_sgemm_%d_gpus", ngpus);
  // Each output's tolerance follows its k products' sizes, sum_k |a_ik b_kj|, times the fp32
  // accumulator's unit roundoff (course::sum_atol): a fixed 1e-4 let the quiet rows' outputs be zeros.
  std::vector<double> sum_abs(C.size());
  course::gemm_reference(m, n, k, course::abs_values(A).data(), course::abs_values(B).data(), sum_abs.data());
  const std::vector<double> atol = course::sum_atol(sum_abs, k, 0x1p-23);
  return course::check_close_each_planted(name, C.data(), want.data(), atol.data(), C.size(), 0, plant ? 1e-4 : 0);
}

// --8<-- [start:bench]
// 8192^3 SGEMM with the matrices in pinned host memory: cuBLASXt on every GPU, cuBLAS on one GPU
// with the copies in and out timed too, and cuBLAS on data already resident on the GPU.
static void bench(int ngpus, uint64_t seed) {
  const size_t s = 8192, e = s * s;
  const double flops = 2.0 * s * s * s, bytes = 3.0 * e * 4;
  float *hA, *hB, *hC, *dA, *dB, *dC;
  CUDA_CHECK(cudaMallocHost(&hA, e * 4));
  CUDA_CHECK(cudaMallocHost(&hB, e * 4));
  CUDA_CHECK(cudaMallocHost(&hC, e * 4));
  {  // random operands (never zeros: the GPU runs faster on them), copied into the pinned buffers
    std::vector<float> v(e);
    course::fill_uniform(v, seed);
    std::memcpy(hA, v.data(), e * 4);
    course::fill_uniform(v, seed + 1);
    std::memcpy(hB, v.data(), e * 4);
  }
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaMalloc(&dA, e * 4));
  CUDA_CHECK(cudaMalloc(&dB, e * 4));
  CUDA_CHECK(cudaMalloc(&dC, e * 4));
  CUDA_CHECK(cudaMemcpy(dA, hA, e * 4, cudaMemcpyHostToDevice));  // for the operands-on-the-GPU row
  CUDA_CHECK(cudaMemcpy(dB, hB, e * 4, cudaMemcpyHostToDevice));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const float one = 1.0f, zero = 0.0f;
  char c[64];
  std::snprintf(c, sizeof(c), "SGEMM 8192^3, operands in host memory");
  cublasXtHandle_t xt = make_xt(ngpus, 4096);
  const float t_xt = course::time_kernel_ms([&] { xt_sgemm_row_major(xt, hA, hB, hC, s, s, s); }, 1, 5);
  CUBLAS_CHECK(cublasXtDestroy(xt));
  const float t_copy = course::time_kernel_ms([&] {
    CUDA_CHECK(cudaMemcpy(dA, hA, e * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB, e * 4, cudaMemcpyHostToDevice));
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s, s, s, &one, dB, s, dA, s, &zero, dC, s));
    CUDA_CHECK(cudaMemcpy(hC, dC, e * 4, cudaMemcpyDeviceToHost));
  }, 1, 5);
  const float t_dev = course::time_kernel_ms(
      [&] { CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s, s, s, &one, dB, s, dA, s, &zero, dC, s)); },
      1, 5);
  char impl[64];
  std::snprintf(impl, sizeof(impl), "cuBLASXt on %d GPU(s), host operands", ngpus);
  course::print_bench(c, impl, t_xt, bytes, flops);
  course::print_bench(c, "cuBLAS on 1 GPU, copies in and out included", t_copy, bytes, flops, true);
  course::print_bench("SGEMM 8192^3, operands on the GPU", "cuBLAS on 1 GPU", t_dev, bytes, flops, true);
  // --8<-- [end:bench]
  CUBLAS_CHECK(cublasDestroy(h));
  for (float* p : {hA, hB, hC}) CUDA_CHECK(cudaFreeHost(p));
  for (float* p : {dA, dB, dC}) CUDA_CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Sizes are bounded by the CPU reference's time, not by cuBLASXt.
  const int m = (int)args.get_int("--m", 517, 1, 2048), n = (int)args.get_int("--n", 301, 1, 2048);
  const int k = (int)args.get_int("--k", 263, 1, 2048);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (!course::plant_fits_rows(plant, m)) return course::kExitFail;
  int ngpus = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ngpus));
  std::printf("%d GPU(s) selected for cuBLASXt\n", ngpus);
  const bool ok = check(ngpus, m, n, k, seed, plant);
  if (ok && run_bench) bench(ngpus, seed);
  return ok ? 0 : course::kExitFail;
}
