// clamp_check.cuh: the checker for exercise 1 of docs/first-kernels/exercises.md. It draws random
// inputs, launches YOUR clamp_kernel on a deliberately small, fixed grid (8 blocks of 128 threads),
// and compares the result with a CPU reference. Only a grid-stride loop covers every element.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

// You write this kernel (in exercises/clamp.cu): y[i] = min(max(x[i], lo), hi) for every i < n.
__global__ void clamp_kernel(const float* x, float* y, size_t n, float lo, float hi);

static bool check_clamp(size_t n, uint64_t seed) {
  std::vector<float> x(n), y(n), want(n);
  course::fill_uniform(x, seed, -2.0f, 2.0f);
  for (size_t i = 0; i < n; ++i) want[i] = std::min(std::max(x[i], -1.0f), 1.0f);
  float *d_x = nullptr, *d_y = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_y, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  course::poison(d_y, n * sizeof(float));
  clamp_kernel<<<8, 128>>>(d_x, d_y, n, -1.0f, 1.0f);  // 1024 threads, whatever n is
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(y.data(), d_y, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_y));
  char name[64];
  std::snprintf(name, sizeof(name), "exercise_clamp_n%zu", n);
  return course::exercise::compare(name, y.data(), want.data(), n, 0.0, 0.0);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const course::exercise::Options options{args};
  args.finish();
  bool ok = true;
  for (size_t size : {n, size_t{1}, size_t{1025}}) ok = check_clamp(size, options.seed + size) && ok;
  return ok ? 0 : course::kExitFail;
}
