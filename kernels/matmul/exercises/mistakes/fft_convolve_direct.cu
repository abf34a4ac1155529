// A plausible wrong answer to the fft_convolve exercise (docs/fast-matmul-fft/exercises.md), which its
// checker must reject: the direct O(n^2) sum on the GPU, no FFT: right, and hundreds of times slower
// than cuFFT at 2^20 samples, so the time cap fails.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise fft_convolve --file kernels/matmul/exercises/mistakes/fft_convolve_direct.cu
//
// course: compile-only
// course: libs cufft
#include "../fft_convolve_check.cuh"

// --8<-- [start:mistake]
__global__ void convolve_direct(const float* x, const float* h, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int j = 0; j < n; ++j) s += x[j] * h[(i - j + n) % n];
  y[i] = s;
}

void circular_convolve(const float* d_x, const float* d_h, float* d_y, int n) {
  convolve_direct<<<course::ceil_div(n, 256), 256>>>(d_x, d_h, d_y, n);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:mistake]
