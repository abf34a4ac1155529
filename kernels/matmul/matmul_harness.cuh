// matmul_harness.cuh: everything the matmul programs share beyond their kernels: device matrices, the
// float64 reference with its error bounds, the correctness checks, the benchmark loop, the planted-fault
// runs and the command line. A kernel file includes it at its END (the pattern of ThunderKittens'
// launch.cu), after defining its kernels and a `struct Program` that says what to run:
//
//   struct Problem { int M, N, K; const Elem *A, *B; Elem* C; float alpha = 1, beta = 0; };  (any order)
//   struct Program {
//     using Elem = float or __nv_bfloat16;
//     static constexpr course::BLayout kLayout;  B is K x N (C = A B) or N x K (C = A B^T)
//     static constexpr const char* kCheck;       CHECK names: <kCheck>v1_200x135x72, <kCheck>v1_vs_cublas_4096
//     static constexpr const char* kCase;        the BENCH case, a printf format of S, S, S
//     static constexpr int kDefault[3];          --m, --n, --k when not given
//     static constexpr int kKMultiple;           K must be a multiple of it (TMA's 16-byte row strides: 8)
//     static constexpr bool kAlphaBeta;          also check alpha = 1.5, beta = -0.5 on a random C
//     static constexpr int kPlantVersion;        the version whose output the planted-fault runs corrupt
//     static constexpr int kBenchSizes[];        S of the S x S x S benchmark, ascending
//     static constexpr const char* kImpl[];      each version's BENCH impl name, by id; id 0 is cuBLAS, the peer
//     struct Options {                           the program's own options, read from the command line
//       explicit Options(const course::Args&); bool selected(int id) const;
//       void setup();                            waive on the wrong GPU, set kernel attributes
//     };
//     struct Launcher {                          built once per problem (tensor maps), outside the timed runs
//       Launcher(const Problem&, const Options&); void operator()(int id, const Problem&) const;
//     };
//     optional: static std::vector<E> extras();   further launchers, each {id (>= 100), label, details},
//                                                 checked beside the versions and timed by --tune
//     optional: static bool timed_at(int id, int S);   false leaves a slow version out of size S's timings
//     optional: static void after_bench(const Problem&);   printed after each benchmark size
//   };
//   and a cuBLAS handle `g_cublas`, which the harness creates and destroys.
//
// The command line: --m --n --k --seed (checked run), --bench (and the benchmark), --profile ID (one launch
// of version ID on random inputs, no check: for ncu), --tune (every extra launcher timed and checked),
// --plant zeros|tile (the planted-fault run: the check must reject a corrupted result; see plant_run).
//
// course: header
#pragma once

#include <cmath>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"

namespace matmul {

template <typename P, typename = void>
struct has_extras : std::false_type {};
template <typename P>
struct has_extras<P, std::void_t<decltype(&P::extras)>> : std::true_type {};
template <typename P, typename = void>
struct has_timed_at : std::false_type {};
template <typename P>
struct has_timed_at<P, std::void_t<decltype(&P::timed_at)>> : std::true_type {};
template <typename P, typename = void>
struct has_after_bench : std::false_type {};
template <typename P>
struct has_after_bench<P, std::void_t<decltype(&P::after_bench)>> : std::true_type {};

template <typename T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) return x; else return static_cast<T>(x);  // bf16: round to nearest
}

// Uniform random values in [-1, 1], rounded to the element type: the reference sees exactly what the GPU
// multiplies.
template <typename T>
std::vector<T> random_matrix(size_t n, uint64_t seed) {
  std::vector<float> f(n);
  course::fill_uniform(f, seed);
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = from_float<T>(f[i]);
  return out;
}
template <typename T>
std::vector<float> to_float(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(course::to_double(v[i]));
  return f;
}
template <typename T>
std::vector<T> absolute(const std::vector<T>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = from_float<T>(static_cast<float>(std::fabs(course::to_double(v[i]))));
  return out;
}

// A, B and C on the device; A and B copied from the host, C left for the kernel (poisoned before checks).
template <typename T>
struct DeviceMats {
  T *A, *B, *C;
  DeviceMats(const std::vector<T>& a, const std::vector<T>& b, size_t c)
      : A(course::to_device(a)), B(course::to_device(b)), C(course::device_alloc<T>(c)) {}
  ~DeviceMats() { course::device_free({A, B, C}); }
  DeviceMats(const DeviceMats&) = delete;
  DeviceMats& operator=(const DeviceMats&) = delete;
};

// --8<-- [start:bound]
// How far a computed element may be from the reference. A sum of K products in fp32 carries rounding
// errors that grow with the sizes of its terms, not of its result: the bound is per element,
// proportional to scale_ij = |alpha| sum_k |a_ik| |b_kj| + |beta c_ij|, so it shrinks with the data and
// an output that is small because its terms cancel is still held to the errors of its terms.
//   |got - want| <= out_rel |want| + acc u scale,   u = 2^-24 (fp32's unit roundoff),
//   acc = copies x (2 sqrt(K) + 4): rounding errors of a K-term sum grow like sqrt(K) (random signs;
//   a 2x margin covers tensor cores' truncating adders), copies = 2 when `want` is itself an fp32 result;
//   out_rel: the output's own rounding, 2^-8 per bf16 rounding (0 for fp32 outputs).
struct Tolerance {
  double out_rel, acc;
  static Tolerance make(int K, double out_rel, int copies) {
    return {out_rel, copies * (2.0 * std::sqrt(static_cast<double>(K)) + 4.0) * std::ldexp(1.0, -24)};
  }
  double operator()(double want, double scale) const { return out_rel * std::fabs(want) + acc * scale; }
};

// The first element outside the bound (NaN never passes), or n if there is none: a verdict, printing nothing.
template <typename G, typename W, typename S>
size_t first_violation(const G* got, const W* want, const S* scale, size_t n, const Tolerance& tol,
                       double* worst = nullptr) {
  double w_ratio = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::fabs(g - w), t = tol(w, static_cast<double>(scale[i]));
    if (!(err <= t)) return i;
    if (t > 0) w_ratio = std::max(w_ratio, err / t);
  }
  if (worst) *worst = w_ratio;
  return n;
}

// The same comparison as a CHECK line: the worst error as a fraction of its element's bound, or the first
// element outside it.
template <typename G, typename W, typename S>
bool check_bounded(const char* name, const G* got, const W* want, const S* scale, size_t n, const Tolerance& tol) {
  double worst = 0.0;
  const size_t bad = first_violation(got, want, scale, n, tol, &worst);
  if (n == 0 || bad < n) {
    if (n == 0) std::printf("CHECK FAIL %s n=0 (nothing was compared)\n", name);
    else
      std::printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g bound=%.3g\n", name, n, bad,
                  static_cast<double>(got[bad]), static_cast<double>(want[bad]),
                  tol(static_cast<double>(want[bad]), static_cast<double>(scale[bad])));
    return false;
  }
  std::printf("CHECK PASS %s n=%zu worst_err_over_bound=%.3g\n", name, n, worst);
  return true;
}
// --8<-- [end:bound]

// --8<-- [start:reference]
// The float64 reference of C = alpha A B + beta C0 (C0 is not read when beta is 0, as BLAS promises), and
// beside it each element's scale: |alpha| sum_k |a_ik| |b_kj| + |beta c0_ij|.
template <typename T>
void reference(int M, int N, int K, course::BLayout layout, const std::vector<T>& A, const std::vector<T>& B,
               double alpha, double beta, const std::vector<T>& C0, std::vector<double>& C,
               std::vector<double>& scale) {
  const size_t nc = static_cast<size_t>(M) * N;
  C.resize(nc);
  scale.resize(nc);
  course::gemm_reference(M, N, K, A.data(), B.data(), C.data(), layout, scale.data());
  for (size_t i = 0; i < nc; ++i) {
    const double c0 = beta != 0.0 ? course::to_double(C0[i]) : 0.0;
    C[i] = alpha * C[i] + beta * c0;
    scale[i] = std::fabs(alpha) * scale[i] + std::fabs(beta * c0);
  }
}
// --8<-- [end:reference]

// The same scale for the benchmark sizes, where a CPU reference would take minutes: sum_k |a_ik| |b_kj|
// from cuBLAS in fp32 on |A| and |B| (every term positive, so fp32's error is below K u of the result).
template <typename T>
std::vector<float> scale_on_gpu(cublasHandle_t handle, int M, int N, int K, course::BLayout layout,
                                const std::vector<T>& A, const std::vector<T>& B) {
  const cudaDataType_t type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
  const T* dA = course::to_device(absolute(A));
  const T* dB = course::to_device(absolute(B));
  float* dS = course::device_alloc<float>(static_cast<size_t>(M) * N);
  const float one = 1.0f, zero = 0.0f;
  const bool nk = layout == course::BLayout::kNxK;  // row-major C = A B (or A B^T) is column-major C^T = B^(T) A^T
  CUBLAS_CHECK(cublasGemmEx(handle, nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, dB, type, nk ? K : N,
                            dA, type, K, &zero, dS, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  std::vector<float> scale = course::to_host(dS, static_cast<size_t>(M) * N);
  course::device_free({dA, dB, dS});
  return scale;
}

template <typename Program>
struct Harness {
  using Elem = typename Program::Elem;
  using Options = typename Program::Options;
  static constexpr bool kFloat = std::is_same_v<Elem, float>;
  static constexpr double kOutRel = kFloat ? 0.0 : 0x1p-8;  // one rounding of the output to bf16
  static constexpr int kVersions = static_cast<int>(std::size(Program::kImpl));

  const Options& opts;
  double cublas_bytes = 0.0;

  static Problem problem(int M, int N, int K, const DeviceMats<Elem>& d) {
    Problem p{};
    p.M = M, p.N = N, p.K = K, p.A = d.A, p.B = d.B, p.C = d.C;
    return p;
  }
  static std::vector<Elem> run(const typename Program::Launcher& launch, int id, const Problem& p) {
    const size_t nc = static_cast<size_t>(p.M) * p.N;
    course::poison(p.C, nc * sizeof(Elem));  // 0xFF bytes: NaN in fp32 and bf16 alike
    launch(id, p);
    CUDA_CHECK(cudaDeviceSynchronize());
    return course::to_host(p.C, nc);
  }
  size_t b_count(int N, int K) const { return static_cast<size_t>(K) * N; }

  // --8<-- [start:check_all]
  // Every version, and every extra launcher, against the float64 reference on M x N x K: with beta = 0 on
  // a NaN-poisoned C (every element written, C not read), and for programs with alpha and beta also
  // alpha = 1.5, beta = -0.5 on a random C.
  bool check_all(int M, int N, int K, uint64_t seed) const {
    const size_t nc = static_cast<size_t>(M) * N;
    const auto A = random_matrix<Elem>(static_cast<size_t>(M) * K, seed),
               B = random_matrix<Elem>(b_count(N, K), seed + 1);
    const auto C0 = random_matrix<Elem>(nc, seed + 2);
    DeviceMats<Elem> d(A, B, nc);
    const Problem p0 = problem(M, N, K, d);
    const typename Program::Launcher launch(p0, opts);
    const Tolerance tol = Tolerance::make(K, kOutRel, 1);
    std::vector<std::pair<int, std::string>> targets;
    for (int id = 0; id < kVersions; ++id)
      if (opts.selected(id)) targets.push_back({id, "v" + std::to_string(id)});
    if constexpr (has_extras<Program>::value)
      for (const auto& e : Program::extras())
        targets.push_back({e.id, e.label});  // every shape an autotuner may pick
    bool ok = true;
    for (int pass = 0; pass < (Program::kAlphaBeta ? 2 : 1); ++pass) {
      const double alpha = pass ? 1.5 : 1.0, beta = pass ? -0.5 : 0.0;
      std::vector<double> want, scale;
      reference(M, N, K, Program::kLayout, A, B, alpha, beta, C0, want, scale);
      for (const auto& [id, label] : targets) {
        Problem p = p0;
        std::vector<Elem> got;
        if constexpr (Program::kAlphaBeta) {
          [&](auto& q) { q.alpha = static_cast<float>(alpha), q.beta = static_cast<float>(beta); }(p);
          if (pass) {  // beta != 0 reads C: start from C0, not from poison
            CUDA_CHECK(cudaMemcpy(d.C, C0.data(), nc * sizeof(Elem), cudaMemcpyHostToDevice));
            launch(id, p);
            got = course::to_host(d.C, nc);
          }
        }
        if (got.empty()) got = run(launch, id, p);
        char name[96];
        std::snprintf(name, sizeof(name), "%s%s%s_%dx%dx%d", Program::kCheck, label.c_str(),
                      Program::kAlphaBeta ? (pass ? "_beta" : "_beta0") : "", M, N, K);
        ok &= check_bounded(name, to_float(got).data(), want.data(), scale.data(), nc, tol);
      }
    }
    return ok;
  }
  // --8<-- [end:check_all]

  // --8<-- [start:bench]
  // One S x S x S problem (alpha = 1, beta = 0) on fresh random inputs, as the benchmark and the
  // planted-fault run use it: the inputs and their device copies, the launcher, version 0's (cuBLAS's)
  // result, each element's error scale and the bound (both results rounded, both fp32 sums).
  struct Square {
    size_t n;
    std::vector<Elem> A, B;
    DeviceMats<Elem> d;
    Problem p;
    typename Program::Launcher launch;
    std::vector<float> ref, scale;
    Tolerance tol;
    Square(int S, uint64_t seed, const Options& opts)
        : n(static_cast<size_t>(S) * S), A(random_matrix<Elem>(n, seed)), B(random_matrix<Elem>(n, seed + 1)),
          d(A, B, n), p(problem(S, S, S, d)), launch(p, opts), ref(to_float(run(launch, 0, p))),
          scale(scale_on_gpu(g_cublas, S, S, S, Program::kLayout, A, B)), tol(Tolerance::make(S, 2 * kOutRel, 2)) {}
  };

  // Times every version on S x S x S (alpha = 1, beta = 0) in the same run as cuBLAS, after checking each
  // result against cuBLAS's on the same inputs; a version that fails gets no BENCH row.
  bool bench_size(int S, uint64_t seed) const {
    const Square prob(S, seed, opts);
    char cs[64];
    std::snprintf(cs, sizeof(cs), Program::kCase, S, S, S);
    const double flops = 2.0 * S * S * static_cast<double>(S), bytes = 3.0 * prob.n * sizeof(Elem);
    bool ok = true;
    for (int id = 0; id < kVersions; ++id) {
      if (!opts.selected(id)) continue;
      if constexpr (has_timed_at<Program>::value)
        if (!Program::timed_at(id, S)) continue;
      if (id != 0) {
        const auto got = to_float(run(prob.launch, id, prob.p));
        char name[64];
        std::snprintf(name, sizeof(name), "%sv%d_vs_cublas_%d", Program::kCheck, id, S);
        if (!check_bounded(name, got.data(), prob.ref.data(), prob.scale.data(), prob.n, prob.tol)) {
          ok = false;
          continue;
        }
      }
      // Slow versions at large sizes: fewer repeats (each run takes long enough to time on its own).
      const float once = course::time_kernel_ms([&] { prob.launch(id, prob.p); }, 1, 1);
      const int repeats = once > 50.0f ? 3 : 20;
      const float ms = course::time_kernel_ms([&] { prob.launch(id, prob.p); }, repeats > 3 ? 3 : 1, repeats);
      // size: the plots' x axis; workspace: device memory beyond the operands (cuBLAS's handle and workspace)
      const double ws = id == 0 ? cublas_bytes : 0.0;
      course::print_bench(cs, Program::kImpl[id], ms, bytes, flops, id == 0,
                          {{"size", S}, {"workspace_bytes", ws}, {"peak_bytes", bytes + ws}});
    }
    if constexpr (has_after_bench<Program>::value) Program::after_bench(prob.p);
    return ok;
  }
  // --8<-- [end:bench]

  // --8<-- [start:plant]
  // The planted-fault run: does the benchmark's check reject a wrong result at the largest benchmark size?
  // Version kPlantVersion's output must pass against cuBLAS's (else the run fails); then one fault is
  // planted in a copy of it and the same comparison, quietly, must reject it:
  //   zeros  every element with |ref| below 1/16 of the output's RMS set to 0 (a kernel that skips the
  //          small outputs)
  //   tile   one 64 x 64 tile of C missing the last 64 terms of its sums (a tile that stops one k-step early)
  bool plant_run(const std::string& fault, uint64_t seed) const {
    const int S = Program::kBenchSizes[std::size(Program::kBenchSizes) - 1];
    const Square prob(S, seed, opts);
    auto got = to_float(run(prob.launch, Program::kPlantVersion, prob.p));
    char name[64];
    std::snprintf(name, sizeof(name), "%sv%d_unplanted_vs_cublas_%d", Program::kCheck, Program::kPlantVersion, S);
    if (!check_bounded(name, got.data(), prob.ref.data(), prob.scale.data(), prob.n, prob.tol)) return false;
    size_t planted = 0;
    if (fault == "zeros") {
      double sq = 0.0;
      for (float r : prob.ref) sq += static_cast<double>(r) * r;
      const double small = std::sqrt(sq / prob.n) / 16.0;
      for (size_t i = 0; i < prob.n; ++i)
        if (std::fabs(prob.ref[i]) < small) got[i] = 0.0f, ++planted;
    } else {  // tile: rows and columns [S/2, S/2 + 64), terms k = S - 64 .. S - 1 left out
      const int r0 = S / 2, c0 = S / 2, k0 = S - 64;
      for (int i = r0; i < r0 + 64; ++i)
        for (int j = c0; j < c0 + 64; ++j, ++planted) {
          double part = 0.0;
          for (int k = k0; k < S; ++k) {
            const size_t b = Program::kLayout == course::BLayout::kKxN ? static_cast<size_t>(k) * S + j
                                                                      : static_cast<size_t>(j) * S + k;
            part += course::to_double(prob.A[static_cast<size_t>(i) * S + k]) * course::to_double(prob.B[b]);
          }
          got[static_cast<size_t>(i) * S + j] -= static_cast<float>(part);
        }
    }
    const bool caught = first_violation(got.data(), prob.ref.data(), prob.scale.data(), prob.n, prob.tol) < prob.n;
    std::printf("CHECK %s planted_%s_caught n=%zu planted=%zu size=%d (%s)\n", caught ? "PASS" : "FAIL",
                fault.c_str(), prob.n, planted, S,
                caught ? "the check rejected the planted fault" : "the check MISSED the planted fault");
    return caught && planted > 0;
  }
  // --8<-- [end:plant]

  // --tune: every extra launcher timed on M x N x K beside cuBLAS, and checked against cuBLAS's result.
  bool tune(int M, int N, int K, uint64_t seed) const {
    const size_t nc = static_cast<size_t>(M) * N;
    const auto A = random_matrix<Elem>(static_cast<size_t>(M) * K, seed),
               B = random_matrix<Elem>(b_count(N, K), seed + 1);
    DeviceMats<Elem> d(A, B, nc);
    const Problem p = problem(M, N, K, d);
    const typename Program::Launcher launch(p, opts);
    const double flops = 2.0 * M * N * static_cast<double>(K);
    const float peer = course::time_kernel_ms([&] { launch(0, p); });
    const auto ref = to_float(course::to_host(d.C, nc));
    const auto scale = scale_on_gpu(g_cublas, M, N, K, Program::kLayout, A, B);
    const Tolerance tol = Tolerance::make(K, 2 * kOutRel, 2);
    std::printf("TUNE v0 cuBLAS ms=%.4f tflops=%.2f\n", peer, flops / peer / 1e9);
    // A fast shape that computes the wrong thing must not win: each one's C (poisoned before its runs) is
    // compared with cuBLAS's.
    bool ok = true;
    if constexpr (has_extras<Program>::value)
      for (const auto& e : Program::extras()) {
        course::poison(d.C, nc * sizeof(Elem));
        const float ms = course::time_kernel_ms([&] { launch(e.id, p); });
        std::printf("TUNE %s ms=%.4f tflops=%.2f pct_cublas=%.1f  %s\n", e.label, ms, flops / ms / 1e9,
                    100.0 * peer / ms, e.details);
        char name[64];
        std::snprintf(name, sizeof(name), "tune_%s_matches_cublas", e.label);
        ok &= check_bounded(name, to_float(course::to_host(d.C, nc)).data(), ref.data(), scale.data(), nc, tol);
      }
    const float peer2 = course::time_kernel_ms([&] { launch(0, p); });  // cuBLAS again: the spread
    std::printf("TUNE v0 cuBLAS again ms=%.4f tflops=%.2f\n", peer2, flops / peer2 / 1e9);
    return ok;
  }

  // --profile ID: one launch on random inputs, for a profiler; no check.
  void profile(int id, int M, int N, int K, uint64_t seed) const {
    DeviceMats<Elem> d(random_matrix<Elem>(static_cast<size_t>(M) * K, seed),
                       random_matrix<Elem>(b_count(N, K), seed + 1), static_cast<size_t>(M) * N);
    const Problem p = problem(M, N, K, d);
    const typename Program::Launcher launch(p, opts);
    launch(id, p);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("profiled version %d at %dx%dx%d\n", id, M, N, K);
  }
};

}  // namespace matmul

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const auto& def = Program::kDefault;
  const int M = static_cast<int>(args.get_int("--m", def[0], 1, 16384));
  const int N = static_cast<int>(args.get_int("--n", def[1], 1, 16384));
  const int K = static_cast<int>(args.get_int("--k", def[2], Program::kKMultiple, 16384));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool bench = args.has("--bench"), tune = args.has("--tune");
  const int profile = static_cast<int>(args.get_int("--profile", -1, 0, 1000));  // -1: not profiling
  const std::string plant = args.get_str("--plant", "");
  Program::Options opts(args);
  args.finish();
  if (K % Program::kKMultiple != 0) {
    std::fprintf(stderr, "error: --k must be a multiple of %d (TMA needs 16-byte row strides), got %d\n",
                 Program::kKMultiple, K);
    return course::kExitFail;
  }
  if (profile >= static_cast<int>(std::size(Program::kImpl))) {
    std::fprintf(stderr, "error: --profile takes a version from 0 to %zu, got %d\n", std::size(Program::kImpl) - 1,
                 profile);
    return course::kExitFail;
  }
  if (!plant.empty() && plant != "zeros" && plant != "tile") {
    std::fprintf(stderr, "error: --plant takes zeros or tile, got '%s'\n", plant.c_str());
    return course::kExitFail;
  }
  const int modes = static_cast<int>(profile >= 0) + static_cast<int>(tune) + static_cast<int>(bench) +
                    static_cast<int>(!plant.empty());
  if (modes > 1) {
    std::fprintf(stderr, "error: --profile, --tune, --bench and --plant are separate modes; give one\n");
    return course::kExitFail;
  }
  opts.setup();
  // cuBLAS's own device memory (handle and workspace), measured as the drop in free memory around its
  // first call.
  size_t free0 = 0, free1 = 0, total = 0;
  CUDA_CHECK(cudaFree(nullptr));  // create the context first so it is not counted
  CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  CUBLAS_CHECK(cublasCreate(&g_cublas));
  matmul::Harness<Program> h{opts};
  {
    using Elem = Program::Elem;
    matmul::DeviceMats<Elem> warm(matmul::random_matrix<Elem>(64 * 64, seed),
                                  matmul::random_matrix<Elem>(64 * 64, seed), 64 * 64);
    const Problem p = h.problem(64, 64, 64, warm);
    const Program::Launcher launch(p, opts);
    launch(0, p);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  CUDA_CHECK(cudaMemGetInfo(&free1, &total));
  h.cublas_bytes = free0 > free1 ? static_cast<double>(free0 - free1) : 0.0;

  bool ok = true;
  if (profile >= 0) {
    h.profile(profile, M, N, K, seed);
  } else if (tune) {
    ok = h.tune(M, N, K, seed);
  } else if (!plant.empty()) {
    ok = h.plant_run(plant, seed + 10);
  } else {
    ok = h.check_all(M, N, K, seed);
    if (ok && bench) {
      std::printf("cuBLAS device memory (handle + workspace, via cudaMemGetInfo): %.0f bytes\n", h.cublas_bytes);
      for (int S : Program::kBenchSizes) ok &= h.bench_size(S, seed + 10);
    }
  }
  CUBLAS_CHECK(cublasDestroy(g_cublas));
  return ok ? 0 : course::kExitFail;
}
