// softmax_reference.cuh: what every softmax program of the memory chapter checks against: the float64
// CPU reference, the adversarial rows (masked, causal, fully masked, single finite score, NaN) and
// the check of one kernel's output.
//
// Taught in docs/memory-model/softmax.md. Included by softmax.cu and cluster_softmax.cu.
//
// course: header
#pragma once

#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/verify.cuh"

// --8<-- [start:reference]
// The same conventions as the kernels, written out case by case: a NaN anywhere makes the row NaN;
// a row with no finite maximum (every element -inf) is all zeros; otherwise the textbook formula.
static void softmax_cpu(const std::vector<float>& x, std::vector<double>& y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* in = &x[(size_t)r * cols];
    double* out = &y[(size_t)r * cols];
    bool has_nan = false;
    double m = -INFINITY, d = 0.0;
    for (int c = 0; c < cols; ++c) {
      if (std::isnan(in[c])) has_nan = true;
      else m = std::max(m, (double)in[c]);
    }
    if (has_nan || m == -INFINITY) {
      std::fill(out, out + cols, has_nan ? NAN : 0.0);
      continue;
    }
    for (int c = 0; c < cols; ++c) d += std::exp(in[c] - m);
    for (int c = 0; c < cols; ++c) out[c] = std::exp(in[c] - m) / d;
  }
}
// --8<-- [end:reference]

// --8<-- [start:inputs]
// Row r of the checked matrix is one of eight kinds (r % 8), so that every shape meets all of them.
enum RowKind { kRandom, kLeadingInf, kCausal, kFullyMasked, kSingleFinite, kNanAfterInf, kRandom2, kNan };

static void fill_rows(std::vector<float>& x, int rows, int cols, uint64_t seed) {
  const float inf = std::numeric_limits<float>::infinity();
  course::fill_uniform(x, seed, -8.0f, 8.0f);
  for (int r = 0; r < rows; ++r) {
    float* row = &x[(size_t)r * cols];
    switch (r % 8) {
      case kLeadingInf:  // three quarters -inf first: each lane's and each warp's first steps see only -inf
        std::fill(row, row + 3 * (cols / 4), -inf);
        break;
      case kCausal:  // attention's causal mask: query r sees keys 0..r
        if (r + 1 < cols) std::fill(row + r + 1, row + cols, -inf);
        break;
      case kFullyMasked:
        std::fill(row, row + cols, -inf);
        break;
      case kSingleFinite: {  // one finite score, at the last column on every other such row
        const int keep = (r / 8) % 2 ? cols - 1 : static_cast<int>((131LL * r) % cols);
        const float v = row[keep];
        std::fill(row, row + cols, -inf);
        row[keep] = v;
        break;
      }
      case kNanAfterInf:  // a NaN after a run of -inf: the -inf rule must not swallow it
        std::fill(row, row + cols / 2, -inf);
        row[cols / 2] = NAN;
        break;
      case kNan:
        row[(r * 7) % cols] = NAN;
        break;
      default:
        break;
    }
  }
}
// --8<-- [end:inputs]

// --8<-- [start:tolerance]
// Every output is exp(x - max) / sum, and every term of the sum is positive, so float32 rounding (expf
// within 2 ulp, the sum's drift, the rescaling of an online pass) changes each output by a share of
// itself, however small it is: the check is relative to each element. A fixed atol would not be: in a
// row of 262144 inputs in [-8, 8) the outputs are around 4e-6 and the smallest below 1e-11, so the atol of 1e-9
// this check once had let a kernel write zeros for a third of such a row. The only absolute slack left
// is float's smallest normal number, below which an output may correctly flush to zero.
constexpr double kSoftmaxRtol = 1e-4;
constexpr double kSoftmaxAtol = 1.1754943508222875e-38;  // FLT_MIN
constexpr double kSoftmaxOldAtol = 1e-9;                 // what --plant zeros-small zeroes below
// --8<-- [end:tolerance]

// Checks one version's output: rows that must be NaN separately (check_close never lets NaN pass), and
// only after a second run into an output of zeros, so that a row the kernel never wrote cannot pass
// as NaN; every other row against the reference, after a run into a NaN-poisoned output.
// `run(y)` enqueues the kernel under test with output y.
template <typename Run>
bool check_softmax(const char* check_name, Run&& run, float* d_y, int R, int C, const std::vector<double>& want) {
  const size_t n = static_cast<size_t>(R) * C, bytes = n * sizeof(float);
  std::vector<float> got(n), got_rows;
  std::vector<double> want_rows;
  course::poison(d_y, bytes);
  run(d_y);
  CUDA_CHECK(cudaMemcpy(got.data(), d_y, bytes, cudaMemcpyDeviceToHost));
  std::vector<bool> nan_row(R);
  for (int r = 0; r < R; ++r) {
    nan_row[r] = std::isnan(want[(size_t)r * C]);
    if (nan_row[r]) continue;
    got_rows.insert(got_rows.end(), got.begin() + (size_t)r * C, got.begin() + (size_t)(r + 1) * C);
    want_rows.insert(want_rows.end(), want.begin() + (size_t)r * C, want.begin() + (size_t)(r + 1) * C);
  }
  bool ok = course::check_close(check_name, got_rows.data(), want_rows.data(), got_rows.size(), kSoftmaxRtol,
                                kSoftmaxAtol);
  CUDA_CHECK(cudaMemset(d_y, 0, bytes));
  run(d_y);
  CUDA_CHECK(cudaMemcpy(got.data(), d_y, bytes, cudaMemcpyDeviceToHost));
  size_t nan_checked = 0, not_nan = 0;
  for (int r = 0; r < R; ++r) {
    if (!nan_row[r]) continue;
    for (int c = 0; c < C; ++c, ++nan_checked) not_nan += !std::isnan(got[(size_t)r * C + c]);
  }
  if (nan_checked > 0) {
    char name[64], detail[64];
    std::snprintf(name, sizeof(name), "%s_nan_rows", check_name);
    std::snprintf(detail, sizeof(detail), "not_nan=%zu", not_nan);
    ok = course::check_true(name, not_nan == 0, nan_checked, detail) && ok;
  }
  return ok;
}

// --plant zeros-small: the same check, quietly, on a kernel whose output has zeros wherever the reference
// is below the old atol; prints CHECK PASS planted_zeros_small_caught only if check_softmax rejects it.
template <typename Run>
bool check_softmax_planted(Run&& run, float* d_y, int R, int C, const std::vector<double>& want) {
  size_t planted = 0;
  const auto faulty = [&](float* y) {
    run(y);
    planted = course::plant_zeros_small_device(y, want.data(), want.size(), kSoftmaxOldAtol);
  };
  const bool passed = course::verdict_quietly([&] { return check_softmax("planted", faulty, d_y, R, C, want); });
  return course::report_planted_zeros_small(planted, passed);
}

// The checked matrix of a softmax program: R x C adversarial rows (fill_rows) and their float64 softmax
// on the host, the rows uploaded to d_x and an output buffer d_y on the device, freed with the object.
struct SoftmaxProblem {
  std::vector<float> h_x;
  std::vector<double> want;
  float *d_x = nullptr, *d_y = nullptr;
  SoftmaxProblem(int R, int C, uint64_t seed)
      : h_x(static_cast<size_t>(R) * C), want(static_cast<size_t>(R) * C) {
    fill_rows(h_x, R, C, seed);
    softmax_cpu(h_x, want, R, C);
    const size_t bytes = h_x.size() * sizeof(float);
    CUDA_CHECK(cudaMalloc(&d_x, bytes));
    CUDA_CHECK(cudaMalloc(&d_y, bytes));
    CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), bytes, cudaMemcpyHostToDevice));
  }
  SoftmaxProblem(const SoftmaxProblem&) = delete;
  SoftmaxProblem& operator=(const SoftmaxProblem&) = delete;
  ~SoftmaxProblem() {
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
  }
};
