// count_above_check.cuh: the checker for exercise 2 of docs/first-kernels/exercises.md. It launches YOUR
// count_above kernel with one thread per element on random inputs, with a threshold t drawn from the
// seed and some elements exactly equal to t (they are not counted: the test is x[i] > t), and compares
// the count with the CPU's, on the size you give, on 0 and 1, and on a large one, where lost updates
// cannot hide. The counter sits between guard bytes. It checks the count, not the method: a kernel
// that funnels every element through one thread also passes (the page says so).
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

// You write this kernel (in exercises/count_above.cu): add 1 to *count for every i < n with x[i] > t.
__global__ void count_above(const float* x, size_t n, float t, unsigned long long* count);

static bool check_count(size_t n, uint64_t seed) {
  namespace ex = course::exercise;
  const float t = ex::draw_uniform(seed, -0.75f, 0.75f);
  std::vector<float> x(n);
  course::fill_uniform(x, seed);
  for (size_t i = 0; i < n; i += 13) x[i] = t;  // equal to t: not above it
  unsigned long long want = 0;
  for (float v : x) want += v > t;
  float* d_x = course::device_alloc<float>(std::max<size_t>(n, 1));
  if (n > 0) CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const ex::Guarded<unsigned long long> count(1);
  count.zero();
  const unsigned blocks = static_cast<unsigned>(std::max<size_t>(course::ceil_div<size_t>(n, 256), 1));
  count_above<<<blocks, 256>>>(d_x, n, t, count.get());
  CUDA_CHECK_LAUNCH();
  const unsigned long long got = count.read()[0];
  CUDA_CHECK(cudaFree(d_x));
  char name[64];
  std::snprintf(name, sizeof(name), "exercise_count_above_n%zu", n);
  if (got != want)
    std::printf("  %s: threshold t=%.9g: expected %llu elements above it, got %llu\n", name, t, want, got);
  // n counts as the number of inputs compared: the count is right only if every one was counted.
  char detail[96];
  std::snprintf(detail, sizeof(detail), "got=%llu want=%llu", got, want);
  const bool ok = course::check_true(name, got == want, std::max<size_t>(n, 1), detail);
  return count.guards_intact(name) && ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long n = args.get_int("--n", 1000003, 1, 1LL << 30);
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_count(static_cast<size_t>(n), options.seed);
  ok = check_count(0, options.seed + 1) && ok;
  ok = check_count(1, options.seed + 2) && ok;
  ok = check_count(4000037, options.seed + 3) && ok;  // large: a count that loses updates fails here
  return ok ? 0 : course::kExitFail;
}
