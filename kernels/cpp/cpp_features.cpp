// cpp_features.cpp: the C++ that CUDA code uses: references, templates, RAII, constexpr and lambdas,
// each in the shape it takes in later chapters.
//
// Taught in docs/cpp/cpp-for-cuda.md.
// Build: mkdir -p build/cpp && g++ -std=c++17 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/cpp_features
//        kernels/cpp/cpp_features.cpp
// Run:   ./build/cpp/cpp_features [--n 1000]
//
// course: run --n 1
// course: run --n 1003
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "check.h"

// --8<-- [start:references]
// A reference is another name for an existing object: no null, no reseating, no `*` to write.
// Pass big read-only things by const reference (no copy), and outputs by (non-const) reference.
static void min_max(const std::vector<float>& v, float& lo, float& hi) {
  lo = hi = v.empty() ? 0.0f : v[0];
  for (float x : v) {
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
}
// --8<-- [end:references]

// --8<-- [start:templates]
// A template is compiled once per type (and per value) it is used with. CUDA kernels are templated
// on the element type and on tile sizes, so the compiler knows the sizes and can unroll loops.
template <typename T, int kUnroll>
T dot(const T* a, const T* b, int n) {
  static_assert(kUnroll > 0, "unroll factor must be positive");  // checked at compile time
  T acc[kUnroll] = {};
  int i = 0;
  for (; i + kUnroll <= n; i += kUnroll)
    for (int u = 0; u < kUnroll; ++u) acc[u] += a[i + u] * b[i + u];  // kUnroll is a constant: unrollable
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  T sum = 0;
  for (int u = 0; u < kUnroll; ++u) sum += acc[u];
  return sum;
}
// --8<-- [end:templates]

// --8<-- [start:constexpr]
// constexpr: evaluated by the compiler when its inputs are constants, so it can size arrays and feed
// static_assert. course.cuh's ceil_div is written this way.
constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
static_assert(ceil_div(1000, 256) == 4, "4 blocks of 256 threads cover 1000 elements");
constexpr int kThreads = 256;
// --8<-- [end:constexpr]

// --8<-- [start:raii]
// RAII (resource acquisition is initialisation): the constructor acquires, the destructor releases,
// so the resource is freed on every path out of the scope, early returns included. The same class
// could own device memory (cudaMalloc in the constructor, cudaFree in the destructor). Copying is
// forbidden (two owners would free twice); moving hands ownership over.
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n), data_(static_cast<float*>(std::malloc(n * sizeof(float)))) {
    if (!data_) {
      std::fprintf(stderr, "error: cannot allocate %zu floats\n", n);
      std::exit(1);
    }
    ++live;
  }
  ~Buffer() {
    if (data_) {
      std::free(data_);
      --live;
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept : n_(other.n_), data_(std::exchange(other.data_, nullptr)) {}
  Buffer& operator=(Buffer&&) = delete;  // not needed here; kept out to stay short

  float* data() { return data_; }
  std::size_t size() const { return n_; }
  static inline int live = 0;  // how many buffers own memory right now (for the check)

 private:
  std::size_t n_;
  float* data_;
};
// --8<-- [end:raii]

int main(int argc, char** argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  const int n = static_cast<int>(cli_long(&cli, "--n", 1000, 1, 100000000));
  cli_finish(&cli);
  int ok = 1;

  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  float lo = 0, hi = 0;
  min_max(v, lo, hi);  // lo and hi are written through the references
  double want_lo = v[0], want_hi = v[0];
  for (float x : v) want_lo = x < want_lo ? x : want_lo, want_hi = x > want_hi ? x : want_hi;
  const double got_mm[2] = {lo, hi}, want_mm[2] = {want_lo, want_hi};
  ok = check_close_f64("references_min_max", got_mm, want_mm, 2, 0.0, 0.0) && ok;

  // --8<-- [start:lambda]
  // A lambda is an unnamed function object. [&] captures the surrounding variables by reference,
  // [=] by value. Later, device lambdas and Thrust/CUB take the same shape: "apply this to element i".
  auto parallel_for = [](int count, auto&& body) {  // a CPU stand-in for a kernel launch
    for (int i = 0; i < count; ++i) body(i);
  };
  const float alpha = 2.0f;
  std::vector<float> y(n, 1.0f);
  parallel_for(n, [&](int i) { y[i] = alpha * v[i] + y[i]; });  // SAXPY, one "thread" per i
  // --8<-- [end:lambda]
  std::vector<double> got(n), want(n);
  for (int i = 0; i < n; ++i) got[i] = y[i], want[i] = 2.0 * v[i] + 1.0;
  ok = check_close_f64("lambda_saxpy", got.data(), want.data(), n, 1e-6, 1e-6) && ok;

  const double d_float = dot<float, 4>(v.data(), v.data(), n);
  const double d_double = dot<double, 1>(want.data(), want.data(), n);  // another instantiation
  double ref_v = 0, ref_w = 0;
  for (int i = 0; i < n; ++i) ref_v += static_cast<double>(v[i]) * v[i], ref_w += want[i] * want[i];
  const double got_dot[2] = {d_float, d_double}, want_dot[2] = {ref_v, ref_w};
  ok = check_close_f64("template_dot", got_dot, want_dot, 2, 1e-5, 1e-6) && ok;

  {
    Buffer a(static_cast<std::size_t>(n));
    Buffer b = std::move(a);  // ownership moves; a no longer frees anything
    for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = 0.0f;
    ok = check_true("raii_inside_scope", Buffer::live == 1, 1, "one owner after the move") && ok;
  }  // b's destructor runs here
  ok = check_true("raii_after_scope", Buffer::live == 0, 1, "freed on leaving the scope") && ok;
  const int blocks = ceil_div(n, kThreads);
  ok = check_true("constexpr_ceil_div", blocks * kThreads >= n && (blocks - 1) * kThreads < n, 2,
                  "blocks cover n with less than one block to spare") && ok;
  return ok ? 0 : 1;
}
