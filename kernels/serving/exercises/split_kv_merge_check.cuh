// split_kv_merge_check.cuh: the checker for the split-KV merge exercise of docs/serving/exercises.md.
// It builds partial results as split-KV decode attention's first kernel leaves them (for chunk s of
// row r: m = the chunk's largest score, l = sum exp(score - m), acc[d] = sum exp(score - m) v[d]),
// launches YOUR merge_partials kernel with one block of 128 threads per row, the output filled with
// NaN first, and compares it with the same merge done in float64. The rows include every edge a
// decoder meets: chunks with no keys (m = -inf, l = 0, acc = 0), rows where every chunk is empty
// (the output must be zeros), and rows whose scores are near 100 (exp(m) overflows fp32: only a merge
// that subtracts the maximum first survives). The tolerance per element follows the float sums'
// rounding, so writing zeros where outputs are small fails.
//
// course: header
#pragma once
#include <random>

#include "../../common/exercise.cuh"

constexpr int kMergeThreads = 128;

// You write this kernel: out[r][d] = sum_s acc[r][s][d] e^(m[r][s] - M) / sum_s l[r][s] e^(m[r][s] - M)
// with M = max_s m[r][s]; zeros for a row whose chunks are all empty. Layouts, row-major:
// part_m and part_l [rows][splits], part_acc [rows][splits][dim], out [rows][dim].
__global__ void merge_partials(const float* __restrict__ part_m, const float* __restrict__ part_l,
                               const float* __restrict__ part_acc, float* __restrict__ out, int rows, int splits,
                               int dim);

struct MergeCase {
  std::vector<float> m, l, acc;       // the partials, as the first kernel writes them (fp32)
  std::vector<double> want, atol;     // the merge in float64, and each element's tolerance
};

static MergeCase make_case(int rows, int splits, int dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> score(-8.0, 8.0), value(-1.0, 1.0);
  std::uniform_int_distribution<int> keys(1, 40);
  MergeCase c;
  c.m.assign(static_cast<size_t>(rows) * splits, -INFINITY);
  c.l.assign(c.m.size(), 0.0f);
  c.acc.assign(c.m.size() * dim, 0.0f);
  std::vector<double> v(dim);
  for (int r = 0; r < rows; ++r) {
    const double shift = r % 5 == 1 ? 100.0 : 0.0;  // e^100 overflows fp32
    for (int s = 0; s < splits; ++s) {
      const bool empty = r % 5 == 2 || (r % 5 == 3 && s % 2 == 1);  // a whole row, or every other chunk
      if (empty) continue;
      const int n = keys(rng);
      std::vector<double> sc(n);
      double m = -INFINITY, l = 0.0;
      for (double& x : sc) x = score(rng) + shift, m = std::max(m, x);
      std::vector<double> acc(dim, 0.0);
      for (int j = 0; j < n; ++j) {
        const double w = std::exp(sc[j] - m);
        l += w;
        for (double& x : v) x = value(rng);
        for (int d = 0; d < dim; ++d) acc[d] += w * v[d];
      }
      const size_t i = static_cast<size_t>(r) * splits + s;
      c.m[i] = static_cast<float>(m), c.l[i] = static_cast<float>(l);
      for (int d = 0; d < dim; ++d) c.acc[i * dim + d] = static_cast<float>(acc[d]);
    }
  }
  // The reference merge, in float64 from the fp32 partials. Tolerance: a float merge of `splits`
  // terms rounds each product and sum, so its error is a few units of fp32 (2^-24) per term, relative
  // to the terms' magnitudes sum |acc| e^(m - M) / L; a row of empty chunks must give exactly 0.
  c.want.assign(static_cast<size_t>(rows) * dim, 0.0);
  c.atol.assign(c.want.size(), 0.0);
  const double u = std::ldexp(1.0, -24) * 8 * (splits + 2);
  for (int r = 0; r < rows; ++r) {
    double big = -INFINITY;
    for (int s = 0; s < splits; ++s)
      big = std::max(big, static_cast<double>(c.m[static_cast<size_t>(r) * splits + s]));
    if (big == -INFINITY) continue;
    double total = 0.0;
    for (int s = 0; s < splits; ++s) {
      const size_t i = static_cast<size_t>(r) * splits + s;
      total += c.l[i] * std::exp(c.m[i] - big);
    }
    for (int d = 0; d < dim; ++d) {
      double sum = 0.0, sum_abs = 0.0;
      for (int s = 0; s < splits; ++s) {
        const size_t i = static_cast<size_t>(r) * splits + s;
        const double w = std::exp(c.m[i] - big);
        sum += c.acc[i * dim + d] * w, sum_abs += std::fabs(c.acc[i * dim + d]) * w;
      }
      c.want[static_cast<size_t>(r) * dim + d] = sum / total;
      c.atol[static_cast<size_t>(r) * dim + d] = u * (sum_abs / total + std::fabs(sum / total));
    }
  }
  return c;
}

static bool check_merge(int rows, int splits, int dim, uint64_t seed) {
  const MergeCase c = make_case(rows, splits, dim, seed);
  float* d_m = course::to_device(c.m);
  float* d_l = course::to_device(c.l);
  float* d_acc = course::to_device(c.acc);
  float* d_out = course::device_alloc<float>(c.want.size());
  course::poison(d_out, c.want.size() * sizeof(float));
  merge_partials<<<rows, kMergeThreads>>>(d_m, d_l, d_acc, d_out, rows, splits, dim);
  CUDA_CHECK_LAUNCH();
  const std::vector<float> got = course::to_host(d_out, c.want.size());
  course::device_free({d_m, d_l, d_acc, d_out});
  size_t wrong = 0, nan = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = got[i] == c.want[i] ? 0.0 : std::fabs(got[i] - c.want[i]);
    if (err <= c.atol[i]) continue;  // written so that NaN is wrong
    nan += std::isnan(got[i]);
    if (wrong++ < 5)
      std::printf("  wrong at row %zu, dim %zu (row %% 5 == %zu): expected %.9g, got %.9g\n", i / dim, i % dim,
                  i / dim % 5, c.want[i], static_cast<double>(got[i]));
  }
  if (wrong) std::printf("  %zu of %zu elements wrong (rows %% 5: 1 scores near 100, 2 every chunk empty, 3 "
                         "every other chunk empty)\n", wrong, got.size());
  if (nan) std::printf("  %zu of them NaN: never written by your kernel, or computed as 0/0\n", nan);
  char name[64];
  std::snprintf(name, sizeof(name), "merge_partials_%dx%dx%d", rows, splits, dim);
  return course::check_close_each(name, got.data(), c.want.data(), c.atol.data(), got.size(), 0.0);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_merge(1009, 13, 200, options.seed);  // dim above the block's 128 threads
  ok = check_merge(1, 1, 1, options.seed + 1) && ok;
  ok = check_merge(7, 64, 64, options.seed + 2) && ok;
  return ok ? 0 : course::kExitFail;
}
