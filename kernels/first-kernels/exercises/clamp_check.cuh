// clamp_check.cuh: the checker for exercise 1 of docs/first-kernels/exercises.md. It draws random
// inputs and random bounds lo < hi (so no bound can be typed in), puts elements exactly on both bounds,
// launches YOUR clamp_kernel on a deliberately small, fixed grid (8 blocks of 128 threads) and compares
// the result with a CPU reference, on sizes 0, 1, 1025 and a large one. The output sits between guard
// bytes: a write past its end fails. Only a grid-stride loop covers every element.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

// You write this kernel (in exercises/clamp.cu): y[i] = min(max(x[i], lo), hi) for every i < n.
__global__ void clamp_kernel(const float* x, float* y, size_t n, float lo, float hi);

static bool check_clamp(size_t n, uint64_t seed) {
  namespace ex = course::exercise;
  const float lo = ex::draw_uniform(seed, -2.0f, -0.25f), hi = ex::draw_uniform(seed + 1, 0.25f, 2.0f);
  std::vector<float> x(n), want(n);
  course::fill_uniform(x, seed, -3.0f, 3.0f);
  for (size_t i = 0; i < n; i += 97) x[i] = i % 2 ? lo : hi;  // elements equal to a bound
  for (size_t i = 0; i < n; ++i) want[i] = std::min(std::max(x[i], lo), hi);
  float* d_x = course::device_alloc<float>(std::max<size_t>(n, 1));
  if (n > 0) CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const ex::Guarded<float> y(n);
  clamp_kernel<<<8, 128>>>(d_x, y.get(), n, lo, hi);  // 1024 threads, whatever n is
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaFree(d_x));
  char name[64];
  std::snprintf(name, sizeof(name), "exercise_clamp_n%zu", n);
  std::printf("  %s: bounds lo=%.9g hi=%.9g\n", name, lo, hi);
  bool ok = n == 0 || ex::compare(name, y.read().data(), want.data(), n, 0.0, 0.0);
  return y.guards_intact(name) && ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const course::exercise::Options options{args};
  args.finish();
  bool ok = true;
  for (size_t size : {n, size_t{0}, size_t{1}, size_t{1025}}) ok = check_clamp(size, options.seed + size) && ok;
  return ok ? 0 : course::kExitFail;
}
