// sgemm_tiled_check.cuh: the checker for the tiled SGEMM exercise of docs/fast-matmul-fft/exercises.md.
// It launches YOUR sgemm_tiled with blocks of 32 x 32 threads, one block per 32 x 32 tile of C, on
// random row-major matrices whose sides are not multiples of 32, with C filled with NaN first, and
// compares with a float64 CPU product; C sits between guard bytes. With --bench it also times, on
// 2000 x 2000 x 2000 in the same run, your kernel, cuBLAS's SGEMM (FP32, no TF32) and the course's
// untiled kernel (v2 of kernels/matmul/sgemm.cu: coalesced, every operand read from global memory),
// checks your result there against cuBLAS's, and requires 8% of cuBLAS's speed and 1.2 times the
// untiled kernel's speed: a shared-memory tile clears both; the untiled kernel cannot clear its own
// bar. The timed launches rotate through three copies of the buffers, and one more launch on buffers
// already timed, C poisoned again, is checked (a kernel that skips repeated launches fails).
//
// course: header
#pragma once
#include "../../common/check_cublas.cuh"
#include "../../common/exercise.cuh"
#include "../../common/gemm_reference.cuh"

constexpr int kGemmTile = 32;               // a block computes a 32 x 32 tile of C, one element per thread
constexpr double kMinShareOfCublas = 0.08;  // the speed bar against cuBLAS
constexpr double kMinSpeedupOverUntiled = 1.2;  // and against the untiled kernel
constexpr int kTimedSets = 3;               // buffer copies the timed launches rotate through

// You write this kernel: C (M x N) = A (M x K) * B (K x N), all row-major.
__global__ void sgemm_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C);

// The naive peer: v2 of kernels/matmul/sgemm.cu (alpha 1, beta 0), consecutive threads on consecutive
// columns, every A and B element read from global memory (through the caches) for each multiply-add.
__global__ void sgemm_untiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
      acc += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + col];
    C[static_cast<long long>(row) * N + col] = acc;
  }
}

static void launch_sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
  const dim3 block(kGemmTile, kGemmTile), grid(course::ceil_div(N, kGemmTile), course::ceil_div(M, kGemmTile));
  sgemm_tiled<<<grid, block>>>(M, N, K, A, B, C);
}

static bool check_sgemm(cublasHandle_t handle, int M, int N, int K, uint64_t seed, bool bench) {
  namespace ex = course::exercise;
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N);
  const size_t c_size = static_cast<size_t>(M) * N;
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  const int sets = bench ? kTimedSets : 1;
  std::vector<float*> dA(sets), dB(sets);
  std::vector<std::unique_ptr<ex::Guarded<float>>> dC(sets);
  for (int s = 0; s < sets; ++s) {
    dA[s] = course::to_device(A);
    dB[s] = course::to_device(B);
    dC[s] = std::make_unique<ex::Guarded<float>>(c_size);
  }
  auto run = [&](int s) { launch_sgemm_tiled(M, N, K, dA[s], dB[s], dC[s]->get()); };
  run(0);
  CUDA_CHECK_LAUNCH();
  char name[64];
  std::snprintf(name, sizeof(name), "sgemm_tiled_%dx%dx%d", M, N, K);
  std::vector<double> want(c_size);
  double rtol = 1e-4;
  if (!bench) {
    course::gemm_reference(M, N, K, A.data(), B.data(), want.data());
  } else {  // too large for the CPU reference: compare with cuBLAS's result
    // The peer, cuBLAS, on the same row-major data: C^T = B^T A^T in its column-major view.
    float* dPeer = course::device_alloc<float>(c_size);
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, dB[0], N, dA[0], K, &beta, dPeer, N));
    const std::vector<float> peer_c = course::to_host(dPeer, c_size);
    std::copy(peer_c.begin(), peer_c.end(), want.begin());
    rtol = 1e-3;
    CUDA_CHECK(cudaFree(dPeer));
  }
  auto compare_set0 = [&](const char* check_name) {
    const bool right = ex::compare(check_name, dC[0]->read().data(), want.data(), c_size, rtol, rtol,
                                   static_cast<size_t>(N));
    return dC[0]->guards_intact(check_name) && right;
  };
  bool ok = compare_set0(name);
  if (ok && bench) {
    float* dPeer = course::device_alloc<float>(c_size);
    const float alpha = 1.0f, beta = 0.0f;
    const double peer_ms = course::time_kernel_ms([&] {
      CUBLAS_CHECK(
          cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, dB[1], N, dA[1], K, &beta, dPeer, N));
    });
    // Launched as sgemm.cu launches it: 32 x 32 threads per block.
    const dim3 untiled_block(32, 32), untiled_grid(course::ceil_div(N, 32), course::ceil_div(M, 32));
    const double untiled_ms = course::time_kernel_ms(
        [&] { sgemm_untiled<<<untiled_grid, untiled_block>>>(M, N, K, dA[2], dB[2], dPeer); });
    const double your_ms = ex::time_rotating_ms(run, sets);
    char bench_case[64];
    std::snprintf(bench_case, sizeof(bench_case), "exercise sgemm %dx%dx%d fp32", M, N, K);
    const double bytes = 4.0 * (static_cast<double>(M) * K + static_cast<double>(K) * N + static_cast<double>(M) * N);
    const double flops = 2.0 * M * N * static_cast<double>(K);
    ok = ex::speed_bar("sgemm_tiled_speed", bench_case, "sgemm_tiled (exercise)", your_ms, "cuBLAS SGEMM (fp32)",
                       peer_ms, bytes, flops, kMinShareOfCublas);
    ok = ex::margin_bar("sgemm_tiled_speed_over_untiled", bench_case, "sgemm_tiled (exercise)", your_ms,
                        "sgemm_untiled (v2 coalesced, fp32)", untiled_ms, bytes, flops, kMinSpeedupOverUntiled) && ok;
    ok = ex::recheck(name, [&] { dC[0]->poison(); }, run, compare_set0) && ok;
    CUDA_CHECK(cudaFree(dPeer));
  }
  for (int s = 0; s < sets; ++s) {
    CUDA_CHECK(cudaFree(dA[s]));
    CUDA_CHECK(cudaFree(dB[s]));
  }
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
