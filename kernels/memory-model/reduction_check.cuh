// reduction_check.cuh: the check of a sum of n floats, shared by reduction.cu and coop_reduction.cu: its
// tolerance, from the longest chain of float additions the version puts any element through, and the
// planted fault (--plant dropped-block) that shows the check can see one block's partial sum go missing.
//
// Taught in docs/memory-model/reduction.md. Host code only: reduction.cuh stays compilable by NVRTC
// (versus_pytorch.py), so nothing here may move into it.
//
// course: header
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/planted.cuh"
#include "../common/verify.cuh"
#include "reduction.cuh"  // kReduceThreads, kGridThreads

// --8<-- [start:tolerance]
// A sum whose every element passes through at most `chain` float additions is off by at most
// chain u sum|x| (u = 2^-23 for fp32 accumulators), and by 8 sqrt(chain) u sum|x| with overwhelming
// probability: course::sum_atol with terms = chain. The chain, counted from the code:
//  - version 1 (n atomics on one address, in any order) and CUB (an order we do not model): n;
//  - versions 2 and 3: a tree of 256 (at most 16 steps), then one atomicAdd per block, in any order;
//  - the grid versions: each thread's float4s one after another (two adds inside each float4), kUnroll
//    accumulators combined, one n % 4 leftover, the block's tree (9), then reduce_partials: each of
//    its threads' share of the partials and its tree (9). 32 covers every constant term.
// A fixed factor (the 1e-5 sum|x| this check once had) was right for one n only.
// For a long chain that bound is loose (version 1 at n = 10^6: 8000 u sum|x|, above |sum x| itself for
// inputs of both signs, so a zero would pass). Hence a second, data-based one, the same rounding model
// (each addition off by at most u times its result, independently) applied to the running sums s_k of
// the inputs in index order: 32 u sqrt(sum_k s_k^2). The kernels' partial sums are no larger than those
// for inputs of random sign (a tree's are smaller; atomics run in roughly index order), and the factor
// 32 leaves a wide margin over the 1 to 3 standard deviations the model predicts. The smaller applies.
inline double running_sums_norm(const std::vector<float>& x) {
  double s = 0.0, q = 0.0;
  for (float v : x) s += v, q += s * s;
  return std::sqrt(q);
}
inline long long chain_any_order(long long n) { return n; }
inline long long chain_block_atomics(long long n) { return course::ceil_div<long long>(n, kReduceThreads) + 16; }
inline long long chain_grid(long long n, int blocks) {
  const long long per_block = course::ceil_div<long long>(n / 4, blocks);
  const long long float4s_per_thread = course::ceil_div<long long>(per_block, kGridThreads) + 1;
  return float4s_per_thread + course::ceil_div<long long>(blocks, kGridThreads) + 32;
}

struct SumReference {
  double sum, abs_sum, running_norm;  // sum x, sum |x| and running_sums_norm(x), in float64
};

inline double sum_tolerance(const SumReference& ref, long long chain) {
  const double u = std::ldexp(1.0, -23);
  return std::min(course::sum_atol({ref.abs_sum}, chain, u)[0], 32 * u * ref.running_norm);
}

inline bool check_sum(const char* name, float got, const SumReference& ref, long long chain) {
  return course::check_close(name, &got, &ref.sum, 1, 0.0, sum_tolerance(ref, chain));
}
// --8<-- [end:tolerance]

// --8<-- [start:plant]
// --plant dropped-block: the result of a grid version with one block's partial sum taken out, as if that
// block's write were lost (a missing fence, a wrong block count). The block is the one whose chunk (the
// layout of reduce_chunks_body: `blocks` contiguous runs of float4s) sums to the most in magnitude: a
// block whose elements happen to cancel to nearly zero can be lost without any sum check noticing.
// Prints CHECK PASS planted_dropped_block_caught only if check_sum rejects the planted result.
inline bool plant_dropped_block_requested(const course::Args& args) {
  course::Plant plant;
  if (!course::parse_plant(args.get_str("--plant", ""), {course::Plant::kDroppedBlock}, plant))
    std::exit(course::kExitFail);
  return plant == course::Plant::kDroppedBlock;
}

inline bool check_dropped_block(const char* name, float got, const SumReference& ref, long long chain,
                                const std::vector<float>& x, int blocks) {
  const long long n4 = static_cast<long long>(x.size()) / 4;
  const long long chunk = course::ceil_div<long long>(course::ceil_div<long long>(n4, blocks), kGridThreads) *
                          kGridThreads;  // float4s per block, as reduce_chunks_body
  int worst = -1;
  double dropped = 0.0;
  for (int b = 0; b < blocks; ++b) {
    double s = 0.0;
    for (long long i = 4 * b * chunk; i < 4 * std::min((b + 1) * chunk, n4); ++i) s += x[static_cast<size_t>(i)];
    if (worst < 0 || std::fabs(s) > std::fabs(dropped)) worst = b, dropped = s;
  }
  const bool planted = worst >= 0 && dropped != 0.0;
  const float bad = static_cast<float>(static_cast<double>(got) - dropped);
  const bool passed = course::verdict_quietly([&] { return check_sum(name, bad, ref, chain); });
  const bool caught = planted && !passed;
  std::printf("CHECK %s planted_dropped_block_caught n=1 check=%s block=%d of %d partial=%.6g tol=%.3g %s\n",
              caught ? "PASS" : "FAIL", name, worst, blocks, dropped, sum_tolerance(ref, chain),
              !planted  ? "(no block with a nonzero sum: the run proves nothing)"
              : caught  ? "(the check rejected the sum without that block)"
                        : "(the check ACCEPTED the sum without that block)");
  std::fflush(stdout);
  return caught;
}
// --8<-- [end:plant]
