// gemm_row_major_check.cuh: the checker for the cuBLAS exercise of docs/libraries/exercises.md. It
// calls YOUR gemm_row_major on random row-major matrices of shapes where no two of M, N and K are equal
// (so that a transposed or swapped call cannot pass by luck), with C between guard bytes and filled
// with NaN first, and compares with a float64 CPU product. It reads cuBLAS's own log of the calls your
// function makes: exactly one GEMM, no transpose flag, nothing else (no cublasSgeam transpose). With
// --bench (which `python -m course.exercise` passes) it caps your function's time at 1.6 times cuBLAS
// called directly, on three shapes where one matrix is far larger than the others (8192 x 8192 against a
// side of 16): a route that transposes or copies that matrix, or computes on the host, takes several
// times as long.
//
// course: header
#pragma once
#include <regex>
#include <string>

#include "../../common/check_cublas.cuh"
#include "../../common/exercise.cuh"
#include "../../common/gemm_reference.cuh"

constexpr double kMaxTimeOverCublas = 1.6;  // the time cap

// You write this function: C (M x N) = A (M x K) * B (K x N), all three row-major, with one cuBLAS call.
void gemm_row_major(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C);

// cuBLAS's API log (cublasSetLoggerCallback), kept only while `capturing`: one entry per call, which
// names the function and each argument, transpose flags included.
struct CublasLog {
  static inline std::string text;
  static inline bool capturing = false;
  static void callback(const char* message) {
    if (capturing) text += message;
  }
  struct Calls {
    std::vector<std::string> names;
    bool transposed = false;
  };
  template <typename F>
  static Calls capture(F&& calls) {
    text.clear();
    capturing = true;
    calls();
    capturing = false;
    Calls found;
    const std::regex call(R"(function\s+\S+\s+(cublas\w+)\s*\()");
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it)
      found.names.push_back((*it)[1]);
    found.transposed = text.find("CUBLAS_OP_T") != std::string::npos || text.find("CUBLAS_OP_C") != std::string::npos;
    return found;
  }
};

static bool is_gemm(const std::string& name) {
  return name.find("gemm") != std::string::npos || name.find("Gemm") != std::string::npos;
}

// Whether the log names a call and shows its transpose flags here: a probe call, transposed on purpose.
static bool cublas_log_works(cublasHandle_t handle) {
  float* d = course::device_alloc<float>(3);  // a, b and c of a 1 x 1 x 1 product
  CUDA_CHECK(cudaMemset(d, 0, 3 * sizeof(float)));
  const float alpha = 1.0f, beta = 0.0f;
  const CublasLog::Calls probe = CublasLog::capture([&] {
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 1, &alpha, d, 1, d + 1, 1, &beta, d + 2, 1));
  });
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaFree(d));
  const bool works = probe.names.size() == 1 && is_gemm(probe.names[0]) && probe.transposed;
  if (!works)
    std::printf("  cuBLAS's log does not show its calls on this system: the check of the calls is skipped\n");
  return works;
}

static bool check_calls(const char* name, const CublasLog::Calls& calls) {
  std::string listed;
  for (const std::string& n : calls.names) listed += (listed.empty() ? "" : ", ") + n;
  const bool one_gemm = calls.names.size() == 1 && is_gemm(calls.names[0]);
  if (calls.names.empty())
    std::printf("  %s: your function made no cuBLAS call: the product must come from cuBLAS\n", name);
  else if (!one_gemm)
    std::printf("  %s: your function made %zu cuBLAS calls (%s): the exercise is one GEMM and nothing else\n",
                name, calls.names.size(), listed.c_str());
  if (calls.transposed)
    std::printf("  %s: your function passed a transpose flag (CUBLAS_OP_T): the exercise is without one\n", name);
  char check_name[96], detail[160];
  std::snprintf(check_name, sizeof(check_name), "%s_cublas_calls", name);
  std::snprintf(detail, sizeof(detail), "calls=%zu transposed=%d", calls.names.size(), calls.transposed ? 1 : 0);
  return course::check_true(check_name, one_gemm && !calls.transposed, 1, detail);
}

static bool check_gemm(cublasHandle_t handle, int M, int N, int K, uint64_t seed, bool log_works) {
  namespace ex = course::exercise;
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N);
  std::vector<double> want(static_cast<size_t>(M) * N);
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  course::gemm_reference(M, N, K, A.data(), B.data(), want.data());
  float* dA = course::to_device(A);
  float* dB = course::to_device(B);
  const ex::Guarded<float> dC(want.size());
  const CublasLog::Calls calls = CublasLog::capture([&] { gemm_row_major(handle, M, N, K, dA, dB, dC.get()); });
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  char name[64];
  std::snprintf(name, sizeof(name), "gemm_row_major_%dx%dx%d", M, N, K);
  bool ok = ex::compare(name, dC.read().data(), want.data(), want.size(), 1e-4, 1e-4, static_cast<size_t>(N));
  ok = dC.guards_intact(name) && ok;
  return (!log_works || check_calls(name, calls)) && ok;
}

// The time cap on a shape where one matrix is far larger than the other two.
static bool check_gemm_time(cublasHandle_t handle, int M, int N, int K, uint64_t seed) {
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N);
  course::fill_uniform(A, seed);
  course::fill_uniform(B, seed + 1);
  float* dA = course::to_device(A);
  float* dB = course::to_device(B);
  float* dC = course::device_alloc<float>(static_cast<size_t>(M) * N);
  const float alpha = 1.0f, beta = 0.0f;
  char name[64], bench_case[64];
  std::snprintf(name, sizeof(name), "gemm_row_major_time_%dx%dx%d", M, N, K);
  std::snprintf(bench_case, sizeof(bench_case), "exercise gemm_row_major %dx%dx%d fp32", M, N, K);
  const double bytes = 4.0 * (static_cast<double>(M) * K + static_cast<double>(K) * N + static_cast<double>(M) * N);
  const bool ok = course::exercise::time_cap(
      name, bench_case, "gemm_row_major (exercise)", [&] { gemm_row_major(handle, M, N, K, dA, dB, dC); },
      "cublasSgemm (fp32, called directly)",
      [&] {
        CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, dB, N, dA, K, &beta, dC, N));
      },
      bytes, 2.0 * M * N * static_cast<double>(K), kMaxTimeOverCublas);
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  CUBLAS_CHECK(cublasLoggerConfigure(1, 0, 0, nullptr));
  CUBLAS_CHECK(cublasSetLoggerCallback(CublasLog::callback));
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  const bool log_works = cublas_log_works(handle);
  bool ok = check_gemm(handle, 257, 131, 199, options.seed, log_works);
  ok = check_gemm(handle, 1, 1, 1, options.seed + 2, log_works) && ok;
  ok = check_gemm(handle, 33, 1000, 7, options.seed + 4, log_works) && ok;
  ok = check_gemm(handle, 500, 3, 64, options.seed + 6, log_works) && ok;
  if (options.bench) {  // the time cap
    ok = check_gemm_time(handle, 8192, 8192, 16, options.seed + 8) && ok;   // C dominates
    ok = check_gemm_time(handle, 8192, 16, 8192, options.seed + 10) && ok;  // A dominates
    ok = check_gemm_time(handle, 16, 8192, 8192, options.seed + 12) && ok;  // B dominates
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
