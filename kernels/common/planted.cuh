// planted.cuh: planted faults, evidence that a check can fail. Taught in docs/conventions.md.
//   plant_zeros_small, plant_zeros_small_device  zeros where the reference is small but nonzero
//   verdict_quietly        a check's verdict without its CHECK line
//   report_planted_zeros_small  the planted verdict line course/verdicts.py reads
//   check_close_each_planted    check_close_each, then (with --plant zeros-small) the planted verdict
//   Plant, plant_name, parse_plant  the faults --plant names, one vocabulary for every program
//   RunOptions             --seed, --bench and --plant read in one line
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include <fcntl.h>   // open, for verdict_quietly
#include <unistd.h>  // dup, dup2, close

#include "args.cuh"
#include "check.cuh"
#include "memory.cuh"
#include "verify.cuh"

namespace course {

// --8<-- [start:plant]
// Planted faults: evidence that a check can fail. A program that takes `--plant zeros-small` runs its
// real check once more, quietly, on output in which every element whose reference is nonzero but
// smaller than the old fixed tolerance has been replaced by zero (what a kernel that loses small
// outputs writes), and prints
//   CHECK PASS planted_zeros_small_caught n=<zeroed elements>
// only if the check rejected that output; a check that accepts it, or a run where no element was small
// enough to plant, prints CHECK FAIL.

// The faults `--plant` names, one vocabulary for every program (a program accepts the ones it plants):
//   zeros-small        zeros wherever the reference is nonzero but smaller than the old fixed tolerance
//   tile               one tile of 64 rows shifted by 1% of the output's typical magnitude (attention)
//   skip-bucket        one bucket of gradients left out of the all-reduce (data-parallel training)
//   skip-residual      one layer's residual update left out of a decode step
//   dropped-block      one block's partial sum of a grid reduction lost
//   argmax             greedy tokens in place of a sampler's draws
//   wrong-block-scale  each row of A read with the next K block's scale (block-scaled FP8 GEMM)
enum class Plant { kNone, kZerosSmall, kTile, kSkipBucket, kSkipResidual, kDroppedBlock, kArgmax, kWrongBlockScale };

inline const char* plant_name(Plant p) {
  switch (p) {
    case Plant::kZerosSmall: return "zeros-small";
    case Plant::kTile: return "tile";
    case Plant::kSkipBucket: return "skip-bucket";
    case Plant::kSkipResidual: return "skip-residual";
    case Plant::kDroppedBlock: return "dropped-block";
    case Plant::kArgmax: return "argmax";
    case Plant::kWrongBlockScale: return "wrong-block-scale";
    default: return "none";
  }
}
// --8<-- [end:plant]

// Reads --plant's value into `plant`: "" or "none" is no fault; a fault of `accepted` is itself. Anything
// else prints an error naming what is accepted and returns false (the caller exits with kExitFail).
inline bool parse_plant(const std::string& text, std::initializer_list<Plant> accepted, Plant& plant) {
  plant = Plant::kNone;
  if (text.empty() || text == "none") return true;
  std::string expected = "none";
  size_t left = accepted.size();
  for (const Plant p : accepted) {
    if (text == plant_name(p)) return plant = p, true;
    expected += (--left == 0 ? " or " : ", ") + std::string(plant_name(p));
  }
  std::fprintf(stderr, "error: --plant expects %s, got '%s'\n", expected.c_str(), text.c_str());
  return false;
}

// --plant for a program whose only fault is zeros-small: whether it was asked for. An unknown fault is an
// error (exit code 1).
inline bool plant_zeros_small_requested(const Args& args) {
  Plant plant;
  if (!parse_plant(args.get_str("--plant", ""), {Plant::kZerosSmall}, plant)) std::exit(kExitFail);
  return plant == Plant::kZerosSmall;
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
