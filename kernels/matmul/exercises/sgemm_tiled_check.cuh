// sgemm_tiled_check.cuh: the checker for the tiled SGEMM exercise of docs/fast-matmul-fft/exercises.md.
// It launches YOUR sgemm_tiled with blocks of 32 x 32 threads, one block per 32 x 32 tile of C, on
// random row-major matrices whose sides are not multiples of 32, with C filled with NaN first, and
// compares with a float64 CPU product. With --bench it also times your kernel against cuBLAS's SGEMM
// (FP32, no TF32) on 2000 x 2000 x 2000 in the same run, checks your result there against cuBLAS's,
// and requires 8% of cuBLAS's speed: a shared-memory tile clears it; reading A and B from global
// memory for every multiply-add does not.
//
// course: header
#pragma once
#include "../../common/check_cublas.cuh"
#include "../../common/exercise.cuh"
#include "../../common/gemm_reference.cuh"

constexpr int kGemmTile = 32;               // a block computes a 32 x 32 tile of C, one element per thread
constexpr double kMinShareOfCublas = 0.08;  // the speed bar

// You write this kernel: C (M x N) = A (M x K) * B (K x N), all row-major.
__global__ void sgemm_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C);

static void launch_sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
  const dim3 block(kGemmTile, kGemmTile), grid(course::ceil_div(N, kGemmTile), course::ceil_div(M, kGemmTile));
  sgemm_tiled<<<grid, block>>>(M, N, K, A, B, C);
}

static bool check_sgemm(cublasHandle_t handle, int M, int N, int K, uint64_t seed, bool bench) {
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N), C(static_cast<size_t>(M) * N);
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  float *dA = nullptr, *dB = nullptr, *dC = nullptr, *dPeer = nullptr;
  CUDA_CHECK(cudaMalloc(&dA, A.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dB, B.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dC, C.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dPeer, C.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dA, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice));
  course::poison(dC, C.size() * sizeof(float));
  launch_sgemm_tiled(M, N, K, dA, dB, dC);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
  // The peer, cuBLAS, on the same row-major data: C^T = B^T A^T in its column-major view.
  const float alpha = 1.0f, beta = 0.0f;
  auto peer = [&] {
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, dB, N, dA, K, &beta, dPeer, N));
  };
  char name[64];
  std::snprintf(name, sizeof(name), "sgemm_tiled_%dx%dx%d", M, N, K);
  bool ok;
  if (!bench) {
    std::vector<double> want(C.size());
    course::gemm_reference(M, N, K, A.data(), B.data(), want.data());
    ok = course::exercise::compare(name, C.data(), want.data(), C.size(), 1e-4, 1e-4, static_cast<size_t>(N));
  } else {  // too large for the CPU reference: compare with cuBLAS's result, then time both
    std::vector<float> want(C.size());
    peer();
    CUDA_CHECK(cudaMemcpy(want.data(), dPeer, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
    ok = course::exercise::compare(name, C.data(), want.data(), C.size(), 1e-3, 1e-3, static_cast<size_t>(N));
    if (ok) {
      const double peer_ms = course::time_kernel_ms(peer);
      const double your_ms = course::time_kernel_ms([&] { launch_sgemm_tiled(M, N, K, dA, dB, dC); });
      char bench_case[64];
      std::snprintf(bench_case, sizeof(bench_case), "exercise sgemm %dx%dx%d fp32", M, N, K);
      const double bytes = 4.0 * (static_cast<double>(M) * K + static_cast<double>(K) * N + static_cast<double>(M) * N);
      ok = course::exercise::speed_bar("sgemm_tiled_speed", bench_case, "sgemm_tiled (exercise)", your_ms,
                                       "cuBLAS SGEMM (fp32)", peer_ms, bytes, 2.0 * M * N * static_cast<double>(K),
                                       kMinShareOfCublas);
    }
  }
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
  CUDA_CHECK(cudaFree(dPeer));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  bool ok = check_sgemm(handle, 257, 131, 199, options.seed, false);
  ok = check_sgemm(handle, 1, 1, 1, options.seed + 2, false) && ok;
  ok = check_sgemm(handle, 33, 1000, 37, options.seed + 4, false) && ok;
  if (options.bench) ok = check_sgemm(handle, 2000, 2000, 2000, options.seed + 6, true) && ok;
  CUBLAS_CHECK(cublasDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
