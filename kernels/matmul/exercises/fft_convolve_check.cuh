// fft_convolve_check.cuh: the checker for the cuFFT exercise of docs/fast-matmul-fft/exercises.md. It
// calls YOUR circular_convolve on random signals of lengths that are powers of two, primes and 1,
// with y filled with NaN first, and compares with the direct O(n^2) sum in float64. The tolerance
// grows with log2(n) and with the largest sum of |x_j| |h_(i-j)|, as FFT rounding errors do.
//
// course: header
#pragma once
#include <cufft.h>

#include "../../common/check_cufft.cuh"
#include "../../common/exercise.cuh"

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
  float *d_x = nullptr, *d_h = nullptr, *d_y = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_h, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_y, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_h, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  course::poison(d_y, n * sizeof(float));
  circular_convolve(d_x, d_h, d_y, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(y.data(), d_y, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_h));
  CUDA_CHECK(cudaFree(d_y));
  char name[64];
  std::snprintf(name, sizeof(name), "fft_convolve_n%d", n);
  const double atol = 1e-6 * (std::log2(static_cast<double>(n)) + 1.0) * std::max(largest, 1.0);
  return course::exercise::compare(name, y.data(), want.data(), static_cast<size_t>(n), 0.0, atol);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = true;
  int i = 0;
  for (int n : {1000, 1, 2, 4099, 16384}) ok = check_convolve(n, options.seed + 2 * i++) && ok;
  return ok ? 0 : course::kExitFail;
}
