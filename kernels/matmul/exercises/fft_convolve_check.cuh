// fft_convolve_check.cuh: the checker for the cuFFT exercise of docs/fast-matmul-fft/exercises.md. It
// calls YOUR circular_convolve on random signals of lengths that are powers of two, primes and 1,
// with y between guard bytes and filled with NaN first, and compares with the direct O(n^2) sum in
// float64. The tolerance grows with log2(n) and with the largest sum of |x_j| |h_(i-j)|, as FFT
// rounding errors do. With --bench (which `python -m course.exercise` passes) it caps your function's
// time at three times cuFFT's own work for the same length (two plans, two forward and one inverse
// transform) on 2^20 samples, where the direct sum, on the GPU or the host, takes hundreds of times as
// long. It does not otherwise check that cuFFT does the work: a convolution as fast as cuFFT's passes.
//
// course: header
#pragma once
#include <cufft.h>

#include "../../common/check_cufft.cuh"
#include "../../common/exercise.cuh"

constexpr double kMaxTimeOverCufft = 3.0;  // the time cap
constexpr int kTimedLength = 1 << 20;

// You write this function: y[i] = sum over j of x[j] * h[(i - j) mod n], for i < n, through cuFFT.
void circular_convolve(const float* d_x, const float* d_h, float* d_y, int n);

static bool check_convolve(int n, uint64_t seed) {
  std::vector<float> x(n), h(n), y(n);
  course::fill_uniform(x, seed);
  course::fill_uniform(h, seed + 1);
  std::vector<double> want(n, 0.0);
  double largest = 0.0;  // max over i of sum_j |x_j h_(i-j)|: how large the rounding errors can get
  for (int i = 0; i < n; ++i) {
    double s = 0.0, bound = 0.0;
    for (int j = 0; j < n; ++j) {
      const double term = static_cast<double>(x[j]) * h[(i - j + n) % n];
      s += term;
      bound += std::fabs(term);
    }
    want[i] = s;
    largest = std::max(largest, bound);
  }
  float* d_x = course::to_device(x);
  float* d_h = course::to_device(h);
  const course::exercise::Guarded<float> d_y(n);
  circular_convolve(d_x, d_h, d_y.get(), n);
  CUDA_CHECK(cudaDeviceSynchronize());
  y = d_y.read();
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_h));
  char name[64];
  std::snprintf(name, sizeof(name), "fft_convolve_n%d", n);
  const double atol = 1e-6 * (std::log2(static_cast<double>(n)) + 1.0) * std::max(largest, 1.0);
  const bool ok = course::exercise::compare(name, y.data(), want.data(), static_cast<size_t>(n), 0.0, atol);
  return d_y.guards_intact(name) && ok;
}

static bool check_convolve_time(uint64_t seed) {
  const int n = kTimedLength, bins = n / 2 + 1;
  std::vector<float> x(n), h(n);
  course::fill_uniform(x, seed);
  course::fill_uniform(h, seed + 1);
  float* d_x = course::to_device(x);
  float* d_h = course::to_device(h);
  float* d_y = course::device_alloc<float>(n);
  // cuFFT's share of the work, as the exercise's function does it: plans, two R2C and one C2R.
  auto cufft_work = [&] {
    cufftComplex *spectrum_x = nullptr, *spectrum_h = nullptr;
    CUDA_CHECK(cudaMalloc(&spectrum_x, bins * sizeof(cufftComplex)));
    CUDA_CHECK(cudaMalloc(&spectrum_h, bins * sizeof(cufftComplex)));
    cufftHandle forward, inverse;
    CUFFT_CHECK(cufftPlan1d(&forward, n, CUFFT_R2C, 1));
    CUFFT_CHECK(cufftPlan1d(&inverse, n, CUFFT_C2R, 1));
    CUFFT_CHECK(cufftExecR2C(forward, d_x, spectrum_x));
    CUFFT_CHECK(cufftExecR2C(forward, d_h, spectrum_h));
    CUFFT_CHECK(cufftExecC2R(inverse, spectrum_h, d_y));
    CUFFT_CHECK(cufftDestroy(forward));
    CUFFT_CHECK(cufftDestroy(inverse));
    CUDA_CHECK(cudaFree(spectrum_x));
    CUDA_CHECK(cudaFree(spectrum_h));
  };
  char bench_case[64];
  std::snprintf(bench_case, sizeof(bench_case), "exercise fft_convolve n=%d fp32", n);
  const bool ok = course::exercise::time_cap("fft_convolve_time", bench_case, "circular_convolve (exercise)",
                                             [&] { circular_convolve(d_x, d_h, d_y, n); },
                                             "cuFFT plans and transforms (fp32)", cufft_work,
                                             3.0 * n * sizeof(float), 0.0, kMaxTimeOverCufft);
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_h));
  CUDA_CHECK(cudaFree(d_y));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = true;
  int i = 0;
  for (int n : {1000, 1, 2, 4099, 16384}) ok = check_convolve(n, options.seed + 2 * i++) && ok;
  if (options.bench) ok = check_convolve_time(options.seed + 2 * i) && ok;  // the time cap
  return ok ? 0 : course::kExitFail;
}
