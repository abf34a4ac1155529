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
//
// course: header
#pragma once
#include "course.cuh"

namespace course::exercise {

// --8<-- [start:compare]
// Element-wise comparison with the rule of course::check_close (|got - want| <= atol + rtol * |want|,
// equal infinities match, NaN never passes), which prints the CHECK line. Before it, a failing
// comparison prints how many elements are wrong and the first `shown` of them. cols > 0 reads the
// arrays as matrices of that many columns and names row and column.
template <typename T, typename R>
bool compare(const char* name, const T* got, const R* want, size_t n, double rtol, double atol, size_t cols = 0,
             int shown = 5) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = g == w ? 0.0 : std::fabs(g - w);
    if (err <= atol + rtol * std::fabs(w)) continue;
    if (static_cast<int>(wrong) < shown) {
      if (cols > 0)
        std::printf("  wrong at index %zu (row %zu, col %zu): expected %.9g, got %.9g\n", i, i / cols, i % cols, w, g);
      else
        std::printf("  wrong at index %zu: expected %.9g, got %.9g\n", i, w, g);
    }
    ++wrong;
  }
  if (wrong > 0)
    std::printf("  %s: %zu of %zu elements wrong (a NaN is an element your kernel never wrote)\n", name, wrong, n);
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

// The options every checker takes. Read them before finish(), with the checker's own options.
struct Options {
  uint64_t seed;
  bool bench;
  explicit Options(const Args& args)
      : seed(static_cast<uint64_t>(args.get_int("--seed", 2026, 0))), bench(args.has("--bench")) {}
};

}  // namespace course::exercise
