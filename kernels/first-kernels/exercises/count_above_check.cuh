// count_above_check.cuh: the checker for exercise 2 of docs/first-kernels/exercises.md. It launches YOUR
// count_above kernel with one thread per element on random inputs and compares the count with
// the CPU's, on the size you give and on a large one, where lost updates cannot hide.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

// You write this kernel (in exercises/count_above.cu): add 1 to *count for every i < n with x[i] > t.
__global__ void count_above(const float* x, size_t n, float t, unsigned long long* count);

static bool check_count(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  course::fill_uniform(x, seed);
  unsigned long long want = 0, got = 0;
  for (float v : x) want += v > 0.25f;
  float* d_x = nullptr;
  unsigned long long* d_count = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_count, sizeof(unsigned long long)));
  CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_count, 0, sizeof(unsigned long long)));
  count_above<<<static_cast<unsigned>(course::ceil_div<size_t>(n, 256)), 256>>>(d_x, n, 0.25f, d_count);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(&got, d_count, sizeof(got), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_count));
  char name[64];
  std::snprintf(name, sizeof(name), "exercise_count_above_n%zu", n);
  // n counts as the number of inputs compared: the count is right only if every one was counted.
  char detail[96];
  std::snprintf(detail, sizeof(detail), "got=%llu want=%llu", got, want);
  return course::check_true(name, got == want, n, detail);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long n = args.get_int("--n", 1000003, 1, 1LL << 30);
  const course::exercise::Options options{args};
  args.finish();
  const bool a = check_count(static_cast<size_t>(n), options.seed);
  const bool b = check_count(1, options.seed + 1);
  const bool c = check_count(4000037, options.seed + 2);  // large: a count that loses updates fails here
  return a && b && c ? 0 : course::kExitFail;
}
