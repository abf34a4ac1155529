// Solution to the cuFFT exercise (docs/fast-matmul-fft/exercises.md).
// Check it: python -m course.exercise fft_convolve --solution
//
// course: gpu
// course: libs cufft
// course: run --seed 101
// course: bench --bench --seed 102
#include "../fft_convolve_check.cuh"

// --8<-- [start:solution]
__global__ void multiply_spectra(cufftComplex* spectrum_x, const cufftComplex* spectrum_h, int bins, float scale) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= bins) return;
  const cufftComplex a = spectrum_x[k], b = spectrum_h[k];
  spectrum_x[k] = make_cuComplex((a.x * b.x - a.y * b.y) * scale, (a.x * b.y + a.y * b.x) * scale);
}

void circular_convolve(const float* d_x, const float* d_h, float* d_y, int n) {
  const int bins = n / 2 + 1;
  cufftComplex *spectrum_x = nullptr, *spectrum_h = nullptr;
  CUDA_CHECK(cudaMalloc(&spectrum_x, bins * sizeof(cufftComplex)));
  CUDA_CHECK(cudaMalloc(&spectrum_h, bins * sizeof(cufftComplex)));
  cufftHandle forward, inverse;
  CUFFT_CHECK(cufftPlan1d(&forward, n, CUFFT_R2C, 1));
  CUFFT_CHECK(cufftPlan1d(&inverse, n, CUFFT_C2R, 1));
  CUFFT_CHECK(cufftExecR2C(forward, const_cast<float*>(d_x), spectrum_x));
  CUFFT_CHECK(cufftExecR2C(forward, const_cast<float*>(d_h), spectrum_h));
  multiply_spectra<<<course::ceil_div(bins, 256), 256>>>(spectrum_x, spectrum_h, bins, 1.0f / n);
  CUDA_CHECK_LAUNCH();
  CUFFT_CHECK(cufftExecC2R(inverse, spectrum_x, d_y));  // overwrites spectrum_x: it is scratch now
  CUFFT_CHECK(cufftDestroy(forward));
  CUFFT_CHECK(cufftDestroy(inverse));
  CUDA_CHECK(cudaFree(spectrum_x));
  CUDA_CHECK(cudaFree(spectrum_h));
}
// --8<-- [end:solution]
