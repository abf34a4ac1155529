// course.cuh: the one helper header every course program includes.
//
// Taught in docs/conventions.md. Everything here is inline or a template, so any number of
// translation units can include it. It gives:
//   CUDA_CHECK(call)       abort with file, line and the failing expression if a CUDA call fails
//   CUDA_CHECK_LAUNCH()    check a kernel launch (configuration errors and, in debug, faults)
//   ceil_div(a, b)         blocks needed to cover a elements with b threads each
//   fill_uniform / poison  reproducible random inputs; NaN-poisoned outputs
//   check_close            relative+absolute comparison that prints the first mismatch and a
//                          machine-readable CHECK line the test harness reads
//   time_kernel_ms         CUDA-event timing: warm-up, L2 flush, median of many repeats
//   print_bench            a machine-readable BENCH line (JSON) for the GPU record, with extra fields
//   device_alloc, to_device, to_host, device_free   device memory in one line each
//   require_compute_capability  exit with the "waived" code when the GPU lacks a feature
//   is_timing_repeat       true in a benchmark's second timing process: it may check a sample
//   cpu_threads            the CPU cores this process may use (its affinity mask)
//   Args                   strict command-line options: unknown, missing or malformed ones are errors
//   SizeOptions            --n, --bench-n, --seed and --bench: a size checked and a size timed
//   library_fail, library_check  the shared error path of the library check macros (common/check_*.cuh)
//   check_close_each       check_close with an absolute tolerance per element (one that scales with the data)
//   verdict_quietly, plant_zeros_small, report_planted   planted faults: evidence that a check can fail
//   sum_atol, abs_values   the atol of each computed sum (a GEMM or convolution output) from its terms' sizes
//   quiet_rows             inputs whose rows differ in scale by 2^20, so that some outputs are small
//   check_close_each_planted  check_close_each, then (with --plant zeros-small) the planted verdict
//   RunOptions, require_multiple  --seed, --bench and --plant read in one line; a size's divisibility
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>   // open, for verdict_quietly
#include <sched.h>   // sched_getaffinity, for cpu_threads
#include <unistd.h>  // dup, dup2, close

namespace course {

// Exit codes the harness understands: 0 pass, 1 failure, 2 "waived" (the GPU lacks a feature
// this program needs, so it was skipped, not failed).
constexpr int kExitFail = 1;
constexpr int kExitWaived = 2;

[[noreturn]] inline void cuda_fail(cudaError_t err, const char* expr, const char* file, int line) {
  std::fprintf(stderr, "CUDA error %s (%s) at %s:%d\n  in: %s\n", cudaGetErrorName(err),
               cudaGetErrorString(err), file, line, expr);
  // "no CUDA-capable device" deserves a plain-language hint: it is the first error a reader without
  // a working driver sees.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    std::fprintf(stderr, "  hint: is an NVIDIA GPU present and is its driver loaded? Try `nvidia-smi`.\n");
  }
  std::exit(kExitFail);
}

// The error path of the CUDA libraries' check macros (kernels/common/check_cublas.cuh and the
// others): each library has its own status type, but every failure is reported the same way.
[[noreturn]] inline void library_fail(const char* library, const char* status_name, const char* status_text,
                                      const char* expr, const char* file, int line) {
  std::fprintf(stderr, "%s error %s (%s) at %s:%d\n  in: %s\n", library, status_name, status_text, file, line,
               expr);
  std::exit(kExitFail);
}

// One pattern for every library's status codes: each common/check_*.cuh defines its macro as
// library_check((call), the library's success code, its name, a function naming a status, a function
// describing it, #call, __FILE__, __LINE__). The two functions run only on failure.
template <typename Status>
inline void library_check(Status status, Status success, const char* library, const char* (*name)(Status),
                          const char* (*text)(Status), const char* expr, const char* file, int line) {
  if (status != success) library_fail(library, name(status), text(status), expr, file, line);
}

}  // namespace course

// --8<-- [start:check]
// A macro rather than a function so the message names the exact call, file and line.
#define CUDA_CHECK(call)                                                  \
  do {                                                                    \
    cudaError_t course_err_ = (call);                                     \
    if (course_err_ != cudaSuccess) {                                     \
      course::cuda_fail(course_err_, #call, __FILE__, __LINE__);          \
    }                                                                     \
  } while (0)

// Launch errors (bad configuration) are reported by cudaGetLastError; errors while the kernel
// runs surface at the next synchronising call, which CUDA_CHECK also catches. Define
// COURSE_SYNC_LAUNCHES to synchronise after every launch while debugging.
#ifdef COURSE_SYNC_LAUNCHES
#define CUDA_CHECK_LAUNCH()                     \
  do {                                          \
    CUDA_CHECK(cudaGetLastError());             \
    CUDA_CHECK(cudaDeviceSynchronize());        \
  } while (0)
#else
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
#endif
// --8<-- [end:check]

namespace course {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Reproducible inputs: a fixed seed by default so a failure can be replayed; the harness passes
// --seed to draw fresh inputs.
inline void fill_uniform(std::vector<float>& v, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (auto& x : v) x = dist(rng);
}

// Fill device memory with NaN bytes so that any element a kernel forgets to write fails the check.
inline void poison(void* device_ptr, size_t bytes) {
  CUDA_CHECK(cudaMemset(device_ptr, 0xFF, bytes));  // 0xFFFFFFFF is a NaN as float
}

// --8<-- [start:compare]
// Compare got against want with |got - want| <= atol + rtol * |want|; equal infinities match, and
// NaN never passes.
// Prints one line the harness parses:
//   CHECK PASS <name> n=<elements> max_abs_err=<e> rtol=<r> atol=<a>
//   CHECK FAIL <name> n=<elements> first_bad=<index> got=<g> want=<w>
template <typename T, typename R>
bool check_close(const char* name, const T* got, const R* want, size_t n, double rtol, double atol) {
  double max_abs_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    // Equal values match, equal infinities included (softmax of -inf rows), whatever the tolerance:
    // rtol * |inf| would be NaN when rtol is 0. The comparison is written so that NaN fails.
    const double err = g == w ? 0.0 : std::fabs(g - w);
    if (g != w && !(err <= atol + rtol * std::fabs(w))) {
      std::printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g\n", name, n, i, g, w);
      return false;
    }
    max_abs_err = std::max(max_abs_err, err);
  }
  if (n == 0) {
    std::printf("CHECK FAIL %s n=0 (nothing was compared)\n", name);
    return false;
  }
  std::printf("CHECK PASS %s n=%zu max_abs_err=%.3g rtol=%.1g atol=%.1g\n", name, n, max_abs_err, rtol,
              atol);
  return true;
}
// --8<-- [end:compare]

// For checks that are not element-wise comparisons (for example "the device reports sane limits"):
// n says how many facts were checked, so a check that checked nothing cannot pass.
inline bool check_true(const char* name, bool ok, size_t n, const char* detail = "") {
  if (ok && n > 0) {
    std::printf("CHECK PASS %s n=%zu %s\n", name, n, detail);
    return true;
  }
  std::printf("CHECK FAIL %s n=%zu %s\n", name, n, detail);
  return false;
}

// --8<-- [start:timing]
// Times `launch` (a callable that enqueues work on the default stream) with CUDA events.
// Warm-up runs first (module load, caches, clocks), then each timed repeat is preceded by a write
// of a buffer larger than L2 so that repeats do not read a warm cache. Returns the median in ms.
template <typename F>
float time_kernel_ms(F&& launch, int warmup = 3, int repeats = 20, bool flush_l2 = true) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  void* scratch = nullptr;
  const size_t scratch_bytes = flush_l2 ? static_cast<size_t>(l2_bytes) * 2 : 0;
  if (scratch_bytes) CUDA_CHECK(cudaMalloc(&scratch, scratch_bytes));

  for (int i = 0; i < warmup; ++i) launch();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times(repeats);
  for (int i = 0; i < repeats; ++i) {
    if (scratch_bytes) CUDA_CHECK(cudaMemsetAsync(scratch, i & 0xFF, scratch_bytes));
    CUDA_CHECK(cudaEventRecord(start));
    launch();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventElapsedTime(&times[i], start, stop));
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  if (scratch) CUDA_CHECK(cudaFree(scratch));
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}
// --8<-- [end:timing]

// --8<-- [start:bench]
// One benchmark result as a line the harness copies into the GPU record:
//   BENCH {"case": ..., "impl": ..., "time_ms": ..., "bytes": ..., "flops": ..., "peer": ..., <extra>}
// `bytes` is the fewest bytes the operation must move (each input read once, each output written
// once); `flops` the arithmetic it must do. Readers divide by time_ms for GB/s or TFLOP/s. `peer`
// marks the library or framework result the course's kernels are compared against. `extra` appends
// whole-number fields a chapter plots or tabulates: {{"size", 4096}, {"workspace_bytes", ws}}.
struct BenchField {
  template <typename Number>  // any integer or floating type, without a narrowing cast at the call
  BenchField(const char* field_name, Number field_value)
      : name(field_name), value(static_cast<double>(field_value)) {}
  const char* name;
  double value;  // printed as a whole number
};

inline void print_bench(const char* case_name, const char* impl, double time_ms, double bytes, double flops,
                        bool peer = false, std::initializer_list<BenchField> extra = {}) {
  std::printf(
      "BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": %s",
      case_name, impl, time_ms, bytes, flops, peer ? "true" : "false");
  for (const BenchField& field : extra) std::printf(", \"%s\": %.0f", field.name, field.value);
  std::printf("}\n");
  std::fflush(stdout);
}
// --8<-- [end:bench]

// Device memory: allocate, copy in, copy out, free a list of buffers.
template <typename T>
T* device_alloc(size_t count) {
  T* ptr = nullptr;
  CUDA_CHECK(cudaMalloc(&ptr, count * sizeof(T)));
  return ptr;
}

template <typename T>
T* to_device(const std::vector<T>& host) {
  T* ptr = device_alloc<T>(host.size());
  CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return ptr;
}

template <typename T>
std::vector<T> to_host(const T* device, size_t count) {
  std::vector<T> host(count);
  CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

inline void device_free(std::initializer_list<const void*> buffers) {
  for (const void* ptr : buffers) CUDA_CHECK(cudaFree(const_cast<void*>(ptr)));
}

// Exit with the "waived" code if the GPU is older than the program needs. The harness reports a
// waived program as skipped, never as passed.
// The CPU cores this process may run on (its affinity mask, which the GPU run narrows to one GPU's
// share of the host: course/gpu_run.py), for host-side float64 references spread over threads.
inline int cpu_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// A benchmark is timed in two processes (course/bench.py sets COURSE_TIMING_PROCESS to 1, 2, ...).
// The first checks what it times in full; a repeat times the same kernels on the same inputs and may
// check a sample of that work, so that an expensive float64 reference is not computed twice.
inline bool is_timing_repeat() {
  const char* process = std::getenv("COURSE_TIMING_PROCESS");
  return process != nullptr && std::strcmp(process, "1") != 0;
}

inline void require_compute_capability(int major, int minor, const char* why) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int have_major = 0, have_minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&have_major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&have_minor, cudaDevAttrComputeCapabilityMinor, device));
  if (have_major * 10 + have_minor < major * 10 + minor) {
    std::printf("WAIVED needs compute capability %d.%d or newer (%s); this GPU is %d.%d\n", major, minor,
                why, have_major, have_minor);
    std::exit(kExitWaived);
  }
}

// --8<-- [start:args]
// Command-line options: "--name value" pairs and "--flag" switches. A program looks up every option
// it understands, then calls finish() before any GPU work. finish() rejects whatever no lookup
// claimed (a typo such as --nn would otherwise run the default size and report results for the
// wrong problem), a missing value, a malformed number and a value out of range: it prints the first
// error and a usage line built from the lookups, and exits with kExitFail (never kExitWaived).
class Args {
 public:
  Args(int argc, char** argv) : argc_(argc), argv_(argv), used_(static_cast<size_t>(argc > 0 ? argc : 0), false) {}

  // A switch such as --bench.
  bool has(const char* flag) const {
    note(flag, "");
    bool found = false;
    for (int i = 1; i < argc_; ++i)
      if (std::strcmp(argv_[i], flag) == 0) used_[i] = true, found = true;
    return found;
  }

  // An integer option; a value outside [lo, hi] is an error.
  long long get_int(const char* name, long long fallback, long long lo = std::numeric_limits<long long>::min(),
                    long long hi = std::numeric_limits<long long>::max()) const {
    note(name, " N (default " + std::to_string(fallback) + ")");
    const char* text = value_of(name);
    if (!text) return fallback;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) return error(name, text, "an integer"), fallback;
    if (v < lo || v > hi) {
      const bool no_hi = hi == std::numeric_limits<long long>::max();
      return error(name, text, no_hi ? "an integer of at least " + std::to_string(lo)
                                     : "an integer from " + std::to_string(lo) + " to " + std::to_string(hi)),
             fallback;
    }
    return v;
  }

  // A finite floating-point option.
  double get_double(const char* name, double fallback) const {
    char shown[32];
    std::snprintf(shown, sizeof(shown), "%g", fallback);
    note(name, std::string(" X (default ") + shown + ")");
    const char* text = value_of(name);
    if (!text) return fallback;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !std::isfinite(v))
      return error(name, text, "a finite number"), fallback;
    return v;
  }

  // A string option (a file name, say).
  std::string get_str(const char* name, const std::string& fallback) const {
    note(name, " TEXT (default '" + fallback + "')");
    const char* text = value_of(name);
    return text ? std::string(text) : fallback;
  }

  // Call after the last lookup and before any GPU work.
  void finish() const {
    for (int i = 1; i < argc_ && error_.empty(); ++i)
      if (!used_[i]) error_ = std::string("unknown or repeated argument '") + argv_[i] + "'";
    if (error_.empty()) return;
    std::fprintf(stderr, "error: %s\nusage: %s%s\n", error_.c_str(), argc_ > 0 ? argv_[0] : "program",
                 usage_.c_str());
    std::exit(kExitFail);
  }

 private:
  int argc_;
  char** argv_;
  mutable std::vector<bool> used_;
  mutable std::string usage_, error_;  // the first error wins; finish() reports it

  void note(const char* name, const std::string& what) const {
    const std::string item = std::string(" [") + name + what + "]";
    if (usage_.find(item) == std::string::npos) usage_ += item;
  }

  void error(const char* name, const char* text, const std::string& expected) const {
    if (error_.empty()) error_ = std::string(name) + " expects " + expected + ", got '" + text + "'";
  }

  // The value after the first `name`, or nullptr when the option is absent. A name with nothing after
  // it, or followed by another option, is an error rather than a silent default.
  const char* value_of(const char* name) const {
    for (int i = 1; i < argc_; ++i) {
      if (std::strcmp(argv_[i], name) != 0) continue;
      used_[i] = true;
      if (i + 1 >= argc_ || (argv_[i + 1][0] == '-' && argv_[i + 1][1] == '-')) {
        if (error_.empty()) error_ = std::string(name) + " needs a value";
        return nullptr;
      }
      used_[i + 1] = true;
      return argv_[i + 1];
    }
    return nullptr;
  }
};
// --8<-- [end:args]

// The options of a program that checks its kernels at one size and times them at another: --n (the
// size checked), --bench-n (the size timed, with --bench) and --seed (the inputs). Each size is read
// as Args::get_int reads it, from {default, lowest, highest}; call args.finish() after.
struct IntOption {
  long long fallback, lo, hi;
};

struct SizeOptions {
  long long n;
  uint64_t seed;
  long long bench_n;
  bool bench;

  SizeOptions(const Args& args, IntOption checked, IntOption timed)
      : n(args.get_int("--n", checked.fallback, checked.lo, checked.hi)),
        seed(static_cast<uint64_t>(args.get_int("--seed", 2026))),
        bench_n(args.get_int("--bench-n", timed.fallback, timed.lo, timed.hi)),
        bench(args.has("--bench")) {}
};

// --8<-- [start:compare_each]
// check_close with an absolute tolerance per element: |got - want| <= rtol * |want| + atol[i]. A
// fixed atol is only right for one scale of data: where outputs are smaller than it, a kernel that
// writes zeros passes. atol[i] is computed beside the reference from what limits element i's accuracy:
// u times the condition of its sum (sum |terms|, a dot product's sum |a_k b_k|), or for an FFT a
// multiple of u log2(n) times its transform's norm. Prints the same CHECK lines as check_close.
template <typename T, typename R>
bool check_close_each(const char* name, const T* got, const R* want, const double* atol, size_t n, double rtol) {
  double max_abs_err = 0.0, max_share = 0.0;  // max_share: the largest error as a share of its tolerance
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    const double err = g == w ? 0.0 : std::fabs(g - w);
    const double tol = atol[i] + rtol * std::fabs(w);
    if (g != w && !(err <= tol)) {  // equal infinities match whatever rtol; NaN fails
      std::printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g tol=%.3g\n", name, n, i, g, w, tol);
      return false;
    }
    max_abs_err = std::max(max_abs_err, err);
    if (tol > 0) max_share = std::max(max_share, err / tol);
  }
  if (n == 0) {
    std::printf("CHECK FAIL %s n=0 (nothing was compared)\n", name);
    return false;
  }
  const double max_atol = *std::max_element(atol, atol + n), min_atol = *std::min_element(atol, atol + n);
  std::printf("CHECK PASS %s n=%zu max_abs_err=%.3g rtol=%.1g atol=%.2g..%.2g worst_err_over_tol=%.2g\n", name, n,
              max_abs_err, rtol, min_atol, max_atol, max_share);
  return true;
}
// --8<-- [end:compare_each]

// --8<-- [start:plant]
// Planted faults: evidence that a check can fail. A program that takes `--plant zeros-small` runs its
// real check once more, quietly, on output in which every element whose reference is nonzero but
// smaller than the old fixed tolerance has been replaced by zero (what a kernel that loses small
// outputs writes), and prints
//   CHECK PASS planted_zeros_small_caught n=<zeroed elements>
// only if the check rejected that output; a check that accepts it, or a run where no element was small
// enough to plant, prints CHECK FAIL.

// The fault `--plant` names: "" (none) or "zeros-small". Anything else is an error (exit code 1).
inline bool plant_zeros_small_requested(const Args& args) {
  const std::string fault = args.get_str("--plant", "");
  if (fault.empty()) return false;
  if (fault == "zeros-small") return true;
  std::fprintf(stderr, "error: --plant expects zeros-small, got '%s'\n", fault.c_str());
  std::exit(kExitFail);
}

// The options of a program that checks, times with --bench and plants a fault with --plant
// zeros-small: --seed (the inputs), --bench, --plant. Read after the program's own sizes.
struct RunOptions {
  uint64_t seed;
  bool bench;
  bool plant;

  explicit RunOptions(const Args& args)
      : seed(static_cast<uint64_t>(args.get_int("--seed", 2026, 0))),
        bench(args.has("--bench")),
        plant(plant_zeros_small_requested(args)) {}
};

// Exits with kExitFail unless option `name`'s value is a multiple of `step`; `why` says why it must be.
inline void require_multiple(const char* name, long long value, long long step, const char* why) {
  if (value % step == 0) return;
  std::fprintf(stderr, "error: %s must be a multiple of %lld (%s), got %lld\n", name, step, why, value);
  std::exit(kExitFail);
}

// Runs `check` (any callable returning a check's verdict, such as a lambda around check_close) with
// everything it prints to stdout discarded, and returns the verdict: the same check, without its CHECK
// line. Errors still reach stderr.
template <typename F>
bool verdict_quietly(F&& check) {
  std::fflush(stdout);
  const int saved = dup(fileno(stdout)), null_fd = open("/dev/null", O_WRONLY);
  if (saved < 0 || null_fd < 0) {
    std::fprintf(stderr, "error: verdict_quietly could not redirect stdout\n");
    std::exit(kExitFail);
  }
  dup2(null_fd, fileno(stdout));
  close(null_fd);
  const bool ok = check();
  std::fflush(stdout);
  dup2(saved, fileno(stdout));
  close(saved);
  return ok;
}

// Zeroes, in host memory, every got[i] whose want[i] is nonzero (and not NaN) with |want[i]| < below.
// Returns how many it zeroed.
template <typename T, typename R>
size_t plant_zeros_small(T* got, const R* want, size_t n, double below) {
  size_t planted = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = std::fabs(static_cast<double>(want[i]));
    if (w > 0 && w < below) got[i] = T(0), ++planted;
  }
  return planted;
}

// The same on an output in device memory (d_out[i] pairs with want[i]), for checks that run the kernel
// themselves: call it right after the kernel, as if the kernel had written the zeros.
template <typename T, typename R>
size_t plant_zeros_small_device(T* d_out, const R* want, size_t n, double below) {
  std::vector<T> host = to_host(d_out, n);
  const size_t planted = plant_zeros_small(host.data(), want, n, below);
  CUDA_CHECK(cudaMemcpy(d_out, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return planted;
}

// Prints the planted-fault verdict: PASS only if something was planted and the check rejected it.
inline bool report_planted_zeros_small(size_t planted, bool check_passed) {
  const bool caught = planted > 0 && !check_passed;
  std::printf("CHECK %s planted_zeros_small_caught n=%zu %s\n", caught ? "PASS" : "FAIL", planted,
              planted == 0 ? "(no element was small enough to plant: the run proves nothing)"
              : caught     ? "(the check rejected zeros written where outputs are small)"
                           : "(the check ACCEPTED zeros written where outputs are small)");
  std::fflush(stdout);
  return caught;
}
// --8<-- [end:plant]

// The planted-fault verdict of one of several checks in a program: the same line, naming the check.
inline bool report_planted_zeros_small(const char* check, size_t planted, bool check_passed) {
  const bool caught = planted > 0 && !check_passed;
  std::printf("CHECK %s planted_zeros_small_caught n=%zu check=%s %s\n", caught ? "PASS" : "FAIL", planted, check,
              planted == 0 ? "(no element was small enough to plant: the run proves nothing)"
              : caught     ? "(the check rejected zeros written where outputs are small)"
                           : "(the check ACCEPTED zeros written where outputs are small)");
  std::fflush(stdout);
  return caught;
}

// --8<-- [start:sum_atol]
// The absolute tolerance of each output that is a sum of `terms` products (a GEMM's dot products, a
// convolution's window), from sum_abs[i] = sum |a_k b_k| of output i, computed beside the reference:
//   atol[i] = (2 u_in + min(terms, 8 sqrt(terms)) u_acc) * sum_abs[i].
// u_in is the unit roundoff of inputs the GPU rounds but the reference does not (TF32: 2^-10, which also
// covers truncation; 0 where the reference reads the rounded inputs): each product then moves by at most
// 2 u_in of its size. u_acc is the accumulator's (fp32: 2^-23, which covers tensor cores' truncating
// adds): `terms` additions move a sum by at most terms u_acc sum_abs, and by 8 sqrt(terms) u_acc sum_abs
// with overwhelming probability when the roundings are independent (Higham and Mary, "A new approach to
// probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019). The tolerance follows each
// output's own terms: an output made of small terms (a quiet row) gets a small one, where a fixed atol let
// zeros pass.
inline std::vector<double> sum_atol(const std::vector<double>& sum_abs, long long terms, double u_acc,
                                    double u_in = 0) {
  const double t = static_cast<double>(terms > 0 ? terms : 1);
  const double factor = 2 * u_in + std::min(t, 8 * std::sqrt(t)) * u_acc;
  std::vector<double> atol(sum_abs.size());
  for (size_t i = 0; i < atol.size(); ++i) atol[i] = factor * sum_abs[i];
  return atol;
}
// --8<-- [end:sum_atol]

// |v| as floats (exact for float, half and bf16 inputs): run a reference on |A| and |B| to get each
// output's sum |a_k b_k| for sum_atol.
template <typename T>
std::vector<float> abs_values(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(static_cast<float>(v[i]));
  return out;
}

// Every third row of a rows-by-row_len matrix, from the second, made 2^20 times smaller (an exact
// scaling; `scale` another power of two, for fp16 data whose range ends sooner): the outputs those rows
// feed are small, as a quiet token's or a dark pixel's are, and a check must hold them to their own size.
// A matrix of one row keeps its scale.
inline void quiet_rows(std::vector<float>& v, size_t rows, size_t row_len, float scale = 0x1p-20f) {
  for (size_t r = 1; r < rows; r += 3)
    for (size_t j = 0; j < row_len; ++j) v[r * row_len + j] *= scale;
}

// check_close_each; with plant_below > 0 (a --plant zeros-small run) also the same check, quietly, on a
// copy of got with zeros wherever 0 < |want| < plant_below (the old fixed atol), and its verdict
// (report_planted_zeros_small, naming the check). Returns false if either fails.
template <typename T, typename R>
bool check_close_each_planted(const char* name, const T* got, const R* want, const double* atol, size_t n,
                              double rtol, double plant_below) {
  bool ok = check_close_each(name, got, want, atol, n, rtol);
  if (plant_below > 0) {
    std::vector<T> bad(got, got + n);
    const size_t planted = plant_zeros_small(bad.data(), want, n, plant_below);
    const bool passed = verdict_quietly([&] { return check_close_each(name, bad.data(), want, atol, n, rtol); });
    ok = report_planted_zeros_small(name, planted, passed) && ok;
  }
  return ok;
}

}  // namespace course
