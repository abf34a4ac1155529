// curand_generate.cu: cuRAND's host API (a generator object that fills device buffers) and device
// API (per-thread generator states inside your kernel), seeds, offsets and orderings, and what
// makes a random stream reproducible.
//
// Taught in docs/libraries/curand.md.
// Build: nvcc -O3 -arch=native -o build/libraries/curand_generate kernels/libraries/curand_generate.cu -lcurand
// Run:   ./build/libraries/curand_generate                (checks statistics and reproducibility)
//        ./build/libraries/curand_generate --bench        (times each generator)
//
// course: gpu
// course: libs curand
// course: run --n 1000003
// course: run --n 4099
// course: bench --bench
#include <curand_kernel.h>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_curand.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

static std::vector<float> to_host(const float* d, size_t n) {
  std::vector<float> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// --8<-- [start:host_api]
// The host API: create a generator of a given algorithm, seed it, optionally move it along its
// sequence (offset) and choose how the sequence is laid out in memory (ordering), then fill a
// device buffer. Each call continues where the last one stopped.
static curandGenerator_t make_generator(curandRngType_t type, unsigned long long seed, unsigned long long offset,
                                        curandOrdering_t order) {
  curandGenerator_t g;
  CURAND_CHECK(curandCreateGenerator(&g, type));
  CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(g, seed));
  CURAND_CHECK(curandSetGeneratorOffset(g, offset));
  CURAND_CHECK(curandSetGeneratorOrdering(g, order));
  return g;
}
// --8<-- [end:host_api]

// Mean and variance in double, for the statistical checks.
static void moments(const std::vector<float>& v, double& mean, double& var) {
  double s = 0, s2 = 0;
  for (float x : v) { s += x; s2 += (double)x * x; }
  mean = s / v.size();
  var = s2 / v.size() - mean * mean;
}

// --8<-- [start:device_api]
// The device API: every thread owns a Philox state. curand_init(seed, subsequence, offset): the
// same seed for all threads, a different subsequence per thread (independent streams), and an
// offset that skips that many 32-bit values into the subsequence. Each thread then draws count
// numbers and writes them interleaved, out[i * threads + t].
__global__ void philox_uniform(float* out, int threads, int count, unsigned long long seed,
                               unsigned long long offset) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, /*subsequence=*/t, offset, &state);
  for (int i = 0; i < count; ++i) out[(size_t)i * threads + t] = curand_uniform(&state);
}
// --8<-- [end:device_api]

static bool check(size_t n, uint64_t seed) {
  bool ok = true;
  float *a, *b;
  CUDA_CHECK(cudaMalloc(&a, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b, n * sizeof(float)));

  // Host API, statistics: uniform on (0, 1] has mean 1/2 and variance 1/12; 5 standard errors.
  course::poison(a, n * sizeof(float));
  curandGenerator_t g = make_generator(CURAND_RNG_PSEUDO_PHILOX4_32_10, seed, 0, CURAND_ORDERING_PSEUDO_DEFAULT);
  CURAND_CHECK(curandGenerateUniform(g, a, n));
  std::vector<float> u = to_host(a, n);
  double mean, var;
  moments(u, mean, var);
  const double se = std::sqrt(1.0 / 12.0 / n);
  const bool in_range = std::all_of(u.begin(), u.end(), [](float x) { return x > 0.0f && x <= 1.0f; });
  ok &= course::check_true("uniform_in_0_1", in_range, n);
  ok &= course::check_true("uniform_mean_and_variance",
                           std::fabs(mean - 0.5) < 5 * se && std::fabs(var - 1.0 / 12) < 0.01, n);

  // Normal: an even count, because the Box-Muller transform makes values in pairs.
  const size_t even = n & ~size_t(1);
  CURAND_CHECK(curandGenerateNormal(g, a, even, /*mean=*/0.0f, /*stddev=*/1.0f));
  std::vector<float> z = to_host(a, even);
  z.resize(even);
  moments(z, mean, var);
  ok &= course::check_true("normal_mean_and_variance",
                           std::fabs(mean) < 5 / std::sqrt((double)even) && std::fabs(var - 1.0) < 0.05, even);
  CURAND_CHECK(curandDestroyGenerator(g));

  // --8<-- [start:reproducible]
  // Reproducibility: the same generator type, seed, offset and ordering give the same bits,
  // run after run. A different seed gives a different stream.
  const unsigned long long s = seed;
  curandGenerator_t g1 = make_generator(CURAND_RNG_PSEUDO_PHILOX4_32_10, s, 0, CURAND_ORDERING_PSEUDO_DEFAULT);
  curandGenerator_t g2 = make_generator(CURAND_RNG_PSEUDO_PHILOX4_32_10, s, 0, CURAND_ORDERING_PSEUDO_DEFAULT);
  curandGenerator_t g3 = make_generator(CURAND_RNG_PSEUDO_PHILOX4_32_10, s + 1, 0, CURAND_ORDERING_PSEUDO_DEFAULT);
  CURAND_CHECK(curandGenerateUniform(g1, a, n));
  CURAND_CHECK(curandGenerateUniform(g2, b, n));
  const std::vector<float> r1 = to_host(a, n), r2 = to_host(b, n);
  CURAND_CHECK(curandGenerateUniform(g3, b, n));
  const std::vector<float> r3 = to_host(b, n);
  ok &= course::check_close("same_seed_same_numbers", r2.data(), r1.data(), n, 0.0, 0.0);
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) same += r1[i] == r3[i];
  ok &= course::check_true("other_seed_other_numbers", same < n / 1000 + 2, n);
  // --8<-- [end:reproducible]
  for (auto gg : {g1, g2, g3}) CURAND_CHECK(curandDestroyGenerator(gg));

  // --8<-- [start:device_check]
  // Device API: the offset argument skips exactly that many values. Thread t's stream started at
  // offset k must equal the stream started at 0, shifted by k.
  const int threads = 257, count = 40, k = 13;
  float *d0, *dk;
  CUDA_CHECK(cudaMalloc(&d0, (size_t)threads * count * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dk, (size_t)threads * count * sizeof(float)));
  course::poison(d0, (size_t)threads * count * sizeof(float));
  course::poison(dk, (size_t)threads * count * sizeof(float));
  philox_uniform<<<course::ceil_div(threads, 128), 128>>>(d0, threads, count, seed, 0);
  CUDA_CHECK_LAUNCH();
  philox_uniform<<<course::ceil_div(threads, 128), 128>>>(dk, threads, count - k, seed, k);
  CUDA_CHECK_LAUNCH();
  const std::vector<float> h0 = to_host(d0, (size_t)threads * count), hk = to_host(dk, (size_t)threads * (count - k));
  // Element (i, t) of the offset run is element (i + k, t) of the plain run: compare those rows.
  ok &= course::check_close("device_offset_skips_ahead", hk.data(), h0.data() + (size_t)k * threads,
                            (size_t)threads * (count - k), 0.0, 0.0);
  // --8<-- [end:device_check]

  // Ordering: PSEUDO_DEFAULT and PSEUDO_SEEDED lay the same generator's numbers out differently,
  // so a change of ordering (or of cuRAND's default) changes results even with the same seed.
  curandGenerator_t gs = make_generator(CURAND_RNG_PSEUDO_XORWOW, s, 0, CURAND_ORDERING_PSEUDO_SEEDED);
  curandGenerator_t gd = make_generator(CURAND_RNG_PSEUDO_XORWOW, s, 0, CURAND_ORDERING_PSEUDO_DEFAULT);
  CURAND_CHECK(curandGenerateUniform(gs, a, n));
  CURAND_CHECK(curandGenerateUniform(gd, b, n));
  const std::vector<float> os = to_host(a, n), od = to_host(b, n);
  same = 0;
  for (size_t i = 0; i < n; ++i) same += os[i] == od[i];
  std::printf("xorwow: %zu of %zu values agree between SEEDED and DEFAULT ordering\n", same, n);
  for (auto gg : {gs, gd}) CURAND_CHECK(curandDestroyGenerator(gg));
  for (void* p : {(void*)a, (void*)b, (void*)d0, (void*)dk}) CUDA_CHECK(cudaFree(p));
  return ok;
}

// --8<-- [start:bench]
static void bench() {
  const size_t n = size_t(1) << 26;  // 64 Mi floats, 256 MiB
  float* d;
  CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
  const struct { curandRngType_t type; const char* name; } gens[] = {
      {CURAND_RNG_PSEUDO_PHILOX4_32_10, "Philox4x32-10"},
      {CURAND_RNG_PSEUDO_XORWOW, "XORWOW (cuRAND's default)"},
      {CURAND_RNG_PSEUDO_MRG32K3A, "MRG32k3a"},
      {CURAND_RNG_PSEUDO_MTGP32, "MTGP32"},
  };
  for (const auto& gen : gens) {
    curandGenerator_t g;
    CURAND_CHECK(curandCreateGenerator(&g, gen.type));
    CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(g, 1234));
    const float tu = course::time_kernel_ms([&] { CURAND_CHECK(curandGenerateUniform(g, d, n)); });
    course::print_bench("64 Mi uniform floats", gen.name, tu, 4.0 * n, 0);
    const float tn = course::time_kernel_ms([&] { CURAND_CHECK(curandGenerateNormal(g, d, n, 0.0f, 1.0f)); });
    course::print_bench("64 Mi normal floats", gen.name, tn, 4.0 * n, 0);
    CURAND_CHECK(curandDestroyGenerator(g));
  }
  // --8<-- [end:bench]
  CUDA_CHECK(cudaFree(d));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // The statistical checks need a sample of at least 4096 values.
  const long long n = args.get_int("--n", 1000003, 4096, 1LL << 28);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  args.finish();
  int version = 0;
  CURAND_CHECK(curandGetVersion(&version));
  std::printf("cuRAND %d (headers %d)\n", version,
              CURAND_VER_MAJOR * 1000 + CURAND_VER_MINOR * 100 + CURAND_VER_PATCH);
  const bool ok = check((size_t)n, seed);
  if (ok && run_bench) bench();
  return ok ? 0 : course::kExitFail;
}
