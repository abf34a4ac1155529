// Exercise (docs/fast-matmul-fft/exercises.md): circular convolution through the convolution theorem
// with cuFFT: transform both signals, multiply the spectra, transform back, and scale.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise fft_convolve
//
// course: compile-only
// course: libs cufft
#include "fft_convolve_check.cuh"

// --8<-- [start:stub]
// TODO: spectrum_x[k] = spectrum_x[k] * spectrum_h[k] * scale (complex product) for every k < bins.
__global__ void multiply_spectra(cufftComplex* spectrum_x, const cufftComplex* spectrum_h, int bins, float scale) {
  (void)spectrum_x, (void)spectrum_h, (void)bins, (void)scale;
}

void circular_convolve(const float* d_x, const float* d_h, float* d_y, int n) {
  const int bins = n / 2 + 1;  // a real signal's spectrum: the other half is its mirror image
  cufftComplex *spectrum_x = nullptr, *spectrum_h = nullptr;
  CUDA_CHECK(cudaMalloc(&spectrum_x, bins * sizeof(cufftComplex)));
  CUDA_CHECK(cudaMalloc(&spectrum_h, bins * sizeof(cufftComplex)));
  cufftHandle forward, inverse;
  CUFFT_CHECK(cufftPlan1d(&forward, n, CUFFT_R2C, 1));
  CUFFT_CHECK(cufftPlan1d(&inverse, n, CUFFT_C2R, 1));
  // TODO (4 lines):
  //  1. cufftExecR2C(forward, ...) of d_x into spectrum_x and of d_h into spectrum_h
  //     (cuFFT takes non-const pointers: const_cast<float*>(d_x));
  //  2. launch multiply_spectra over the bins, with the scale that undoes cuFFT's unnormalised
  //     inverse (a forward then inverse transform multiplies by n);
  //  3. cufftExecC2R(inverse, spectrum_x, d_y). Wrap the cuFFT calls in CUFFT_CHECK.
  (void)d_x, (void)d_h, (void)d_y;
  CUFFT_CHECK(cufftDestroy(forward));
  CUFFT_CHECK(cufftDestroy(inverse));
  CUDA_CHECK(cudaFree(spectrum_x));
  CUDA_CHECK(cudaFree(spectrum_h));
}
// --8<-- [end:stub]
