// args.cuh: strict command-line options. Taught in docs/conventions.md.
//   Args                   "--name value" and "--flag": unknown, missing or malformed options are errors
//   SizeOptions            --n, --bench-n, --seed and --bench: a size checked and a size timed
//   (RunOptions, which also reads --plant, is planted.cuh's)
//   require_multiple       exit unless an option's value is a multiple of a step
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "check.cuh"

namespace course {

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

// Exits with kExitFail unless option `name`'s value is a multiple of `step`; `why` says why it must be.
inline void require_multiple(const char* name, long long value, long long step, const char* why) {
  if (value % step == 0) return;
  std::fprintf(stderr, "error: %s must be a multiple of %lld (%s), got %lld\n", name, step, why, value);
  std::exit(kExitFail);
}

}  // namespace course
