// exercise.cuh: what every exercise checker shares (kernels/*/exercises/*_check.cuh).
//
// Taught in docs/contributing.md (adding an exercise); used by the checkers that
// `python -m course.exercise NAME` builds and runs. On top of course.cuh it gives:
//   compare(...)        course::check_close, preceded by a report a reader can act on: how many
//                       elements are wrong, and the first few with their index (row and column for
//                       a matrix), the expected value and the value the kernel wrote
//   speed_bar(...)      the reader's kernel against a peer timed in the same run (a copy of the same
//                       bytes, or a library call): pass when it reaches the stated share of the peer's speed
//   Options             the options every checker takes: --seed (fresh inputs; the runner draws one and
//                       prints it) and --bench (the speed bar, for the exercises about speed)
//   Guarded<T>          a device output with poisoned guard bytes before and after it: a kernel that
//                       writes past either end fails guards_intact()
//   time_rotating_ms    a timing that rotates through copies of the buffers, and recheck(), which
//                       re-poisons one copy's output, launches once more and compares: a kernel that
//                       remembers its arguments and returns early on a repeated launch fails
//   margin_bar(...)     the reader's kernel against the course's naive kernel in the same run: pass
//                       when it is at least the stated factor faster
//   time_cap(...)       a library exercise's time against the library called directly: pass when it
//                       takes at most the stated multiple (a host or O(n^2) route is far slower)
//   draw_uniform(...)   a bound or threshold drawn from the seed, so that no constant can be hard-coded
//
// course: header
#pragma once
#include "course.cuh"

#include <memory>
#include <random>

namespace course::exercise {

// --8<-- [start:compare]
// Element-wise comparison with the rule of course::check_close (|got - want| <= atol + rtol * |want|,
// equal infinities match, NaN never passes), which prints the CHECK line. Before it, a failing
// comparison prints how many elements are wrong and the first `shown` of them. cols > 0 reads the
// arrays as matrices of that many columns and names row and column.
template <typename T, typename R>
bool compare(const char* name, const T* got, const R* want, size_t n, double rtol, double atol, size_t cols = 0,
             int shown = 5) {
  size_t wrong = 0, nan = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = g == w ? 0.0 : std::fabs(g - w);
    if (g == w || err <= atol + rtol * std::fabs(w)) continue;  // equal infinities match whatever rtol
    nan += std::isnan(g);  // the output starts as NaN: an element left NaN was never written
    if (static_cast<int>(wrong) < shown) {
      if (cols > 0)
        std::printf("  wrong at index %zu (row %zu, col %zu): expected %.9g, got %.9g\n", i, i / cols, i % cols, w,
                    g);
      else
        std::printf("  wrong at index %zu: expected %.9g, got %.9g\n", i, w, g);
    }
    ++wrong;
  }
  if (wrong > 0 && nan > 0)
    std::printf("  %s: %zu of %zu elements wrong (%zu of them NaN: never written by your kernel, "
                "or computed as NaN)\n", name, wrong, n, nan);
  else if (wrong > 0)
    std::printf("  %s: %zu of %zu elements wrong\n", name, wrong, n);
  return check_close(name, got, want, n, rtol, atol);
}
// --8<-- [end:compare]

// --8<-- [start:speed]
// The speed bar: pass when the reader's kernel takes at most peer_ms / min_share, that is when it
// reaches min_share of the peer's speed. Both times come from the same run (course::time_kernel_ms:
// warm-up, L2 flush, median), so the bar holds on any GPU. Prints both BENCH rows and a CHECK line.
inline bool speed_bar(const char* name, const char* bench_case, const char* impl, double your_ms,
                      const char* peer_impl, double peer_ms, double bytes, double flops, double min_share) {
  print_bench(bench_case, peer_impl, peer_ms, bytes, flops, true);
  print_bench(bench_case, impl, your_ms, bytes, flops, false);
  const double share = peer_ms / your_ms;
  std::printf("  %s: your kernel reaches %.0f%% of the speed of %s (the bar is %.0f%%)\n", name, 100.0 * share,
              peer_impl, 100.0 * min_share);
  char detail[160];
  std::snprintf(detail, sizeof(detail), "share=%.3f bar=%.3f", share, min_share);
  return check_true(name, share >= min_share, 1, detail);
}
// --8<-- [end:speed]

// --8<-- [start:guarded]
// A device buffer of n elements between two guard regions of kGuardBytes, all three filled with 0xFF
// bytes (NaN as float, -1 as int) by poison(). guards_intact() reads the guards back: any byte a kernel
// wrote there (past the end of its output, or before its start) fails the check, with its offset.
// compute-sanitizer's memcheck, which the runner uses by default, catches writes farther out.
template <typename T>
class Guarded {
 public:
  static constexpr size_t kGuardBytes = 4096;  // a multiple of 256: the buffer keeps cudaMalloc's alignment
  explicit Guarded(size_t n) : n_(n) {
    CUDA_CHECK(cudaMalloc(&base_, total_bytes()));
    poison();
  }
  ~Guarded() { cudaFree(base_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;

  T* get() const { return reinterpret_cast<T*>(base_ + kGuardBytes); }
  size_t size() const { return n_; }
  void poison() const { course::poison(base_, total_bytes()); }                 // buffer and guards
  void zero() const { CUDA_CHECK(cudaMemset(get(), 0, n_ * sizeof(T))); }      // guards stay poisoned
  std::vector<T> read() const {
    std::vector<T> host(n_);
    if (n_ > 0) CUDA_CHECK(cudaMemcpy(host.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  bool guards_intact(const char* name) const {
    std::vector<unsigned char> before(kGuardBytes), after(kGuardBytes);
    CUDA_CHECK(cudaMemcpy(before.data(), base_, kGuardBytes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(after.data(), base_ + kGuardBytes + n_ * sizeof(T), kGuardBytes, cudaMemcpyDeviceToHost));
    size_t written = 0, last_before = 0, first_after = 0;
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (before[i] != 0xFF && written++ == 0) last_before = kGuardBytes - i;
      if (after[i] != 0xFF && !first_after) first_after = i + 1;
    }
    for (size_t i = 0; i < kGuardBytes; ++i) written += after[i] != 0xFF;
    char check_name[96], detail[128];
    std::snprintf(check_name, sizeof(check_name), "%s_guards", name);
    if (last_before)
      std::printf("  %s: your kernel wrote before the start of the output (as far as %zu bytes before it)\n", name,
                  last_before);
    if (first_after)
      std::printf("  %s: your kernel wrote past the end of the output of %zu elements (byte %zu after it)\n", name,
                  n_, first_after - 1);
    // n counts the guard bytes checked, not the output's elements (an output may be empty): say so
    std::snprintf(detail, sizeof(detail), "guard bytes around the output of %zu elements: %zu written", n_, written);
    return check_true(check_name, written == 0, 2 * kGuardBytes, detail);
  }

 private:
  size_t total_bytes() const { return n_ * sizeof(T) + 2 * kGuardBytes; }
  unsigned char* base_ = nullptr;
  size_t n_;
};
// --8<-- [end:guarded]

// A bound or threshold drawn from the seed (uniform in [lo, hi)): a kernel with the value typed in fails.
inline float draw_uniform(uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// --8<-- [start:replay]
// Timing that a replaying kernel cannot game. launch(set) enqueues the kernel on buffer set `set`;
// the timed launches rotate through `sets` copies of inputs and outputs, so consecutive launches never
// share arguments. Afterwards the checker calls recheck(): set 0's output, launched many times already,
// is poisoned again, launched once more and compared. A kernel that remembers what it has computed
// and returns at once on a repeated launch leaves NaN there and fails.
template <typename F>
double time_rotating_ms(F&& launch, int sets, int warmup = 3, int repeats = 20) {
  int next = 0;
  return time_kernel_ms([&] { launch(next++ % sets); }, warmup, repeats);
}

template <typename Poison, typename F, typename Compare>
bool recheck(const char* name, Poison&& poison_set0, F&& launch, Compare&& compare_set0) {
  poison_set0();
  launch(0);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  char check_name[96];
  std::snprintf(check_name, sizeof(check_name), "%s_after_timing", name);
  std::printf("  %s: the output of one more launch on buffers already timed, poisoned first, is checked\n", name);
  return compare_set0(check_name);
}
// --8<-- [end:replay]

// --8<-- [start:margin]
// The reader's kernel against the course's naive kernel for the same task, timed in the same run: pass
// when naive_ms / your_ms >= min_speedup. Prints the naive kernel's BENCH row (speed_bar prints the
// reader's) and a CHECK line. A bar set as a share of a library alone can sit below the
// naive kernel; this one cannot.
inline bool margin_bar(const char* name, const char* bench_case, const char* impl, double your_ms,
                       const char* naive_impl, double naive_ms, double bytes, double flops, double min_speedup) {
  print_bench(bench_case, naive_impl, naive_ms, bytes, flops, false);
  const double speedup = naive_ms / your_ms;
  std::printf("  %s: %s is %.2fx as fast as %s (the bar is %.2fx)\n", name, impl, speedup, naive_impl,
              min_speedup);
  char detail[160];
  std::snprintf(detail, sizeof(detail), "speedup=%.3f bar=%.3f", speedup, min_speedup);
  return check_true(name, speedup >= min_speedup, 1, detail);
}
// --8<-- [end:margin]

// --8<-- [start:cap]
// A library exercise's time cap: the reader's function takes at most max_ratio times the library called
// directly, at a size where a host computation, a hand-written loop or an O(n^2) route is far slower.
// Times the reader once first, and stops there if that one call already breaks the cap many times over.
template <typename Yours, typename Library>
bool time_cap(const char* name, const char* bench_case, const char* impl, Yours&& yours, const char* library_impl,
              Library&& library, double bytes, double flops, double max_ratio) {
  const double library_ms = time_kernel_ms(library);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  yours();
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float once_ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&once_ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  const double your_ms = once_ms > 20.0 * max_ratio * library_ms + 1.0 ? once_ms : time_kernel_ms(yours);
  print_bench(bench_case, library_impl, library_ms, bytes, flops, true);
  print_bench(bench_case, impl, your_ms, bytes, flops, false);
  const double ratio = your_ms / library_ms;
  std::printf("  %s: your function takes %.2fx the time of %s (the cap is %.2fx)\n", name, ratio, library_impl,
              max_ratio);
  char detail[160];
  std::snprintf(detail, sizeof(detail), "ratio=%.3f cap=%.3f", ratio, max_ratio);
  return check_true(name, ratio <= max_ratio, 1, detail);
}
// --8<-- [end:cap]

// The options every checker takes. Read them before finish(), with the checker's own options.
struct Options {
  uint64_t seed;
  bool bench;
  explicit Options(const Args& args)
      : seed(static_cast<uint64_t>(args.get_int("--seed", 2026, 0))), bench(args.has("--bench")) {}
};

}  // namespace course::exercise
