// gemm_row_major_check.cuh: the checker for the cuBLAS exercise of docs/libraries/exercises.md. It
// calls YOUR gemm_row_major on random row-major matrices of shapes where no two of M, N and K are equal
// (so that a transposed or swapped call cannot pass by luck), with C filled with NaN first, and
// compares with a float64 CPU product.
//
// course: header
#pragma once
#include "../../common/check_cublas.cuh"
#include "../../common/exercise.cuh"
#include "../../common/gemm_reference.cuh"

// You write this function: C (M x N) = A (M x K) * B (K x N), all three row-major, with one cuBLAS call.
void gemm_row_major(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C);

static bool check_gemm(cublasHandle_t handle, int M, int N, int K, uint64_t seed) {
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N), C(static_cast<size_t>(M) * N);
  std::vector<double> want(C.size());
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  course::gemm_reference(M, N, K, A.data(), B.data(), want.data());
  float *dA = nullptr, *dB = nullptr, *dC = nullptr;
  CUDA_CHECK(cudaMalloc(&dA, A.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dB, B.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dC, C.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dA, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice));
  course::poison(dC, C.size() * sizeof(float));
  gemm_row_major(handle, M, N, K, dA, dB, dC);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
  char name[64];
  std::snprintf(name, sizeof(name), "gemm_row_major_%dx%dx%d", M, N, K);
  return course::exercise::compare(name, C.data(), want.data(), C.size(), 1e-4, 1e-4, static_cast<size_t>(N));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  bool ok = check_gemm(handle, 257, 131, 199, options.seed);
  ok = check_gemm(handle, 1, 1, 1, options.seed + 2) && ok;
  ok = check_gemm(handle, 33, 1000, 7, options.seed + 4) && ok;
  ok = check_gemm(handle, 500, 3, 64, options.seed + 6) && ok;
  CUBLAS_CHECK(cublasDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
