// mnist_check.cu: the layer checks of the MNIST CNN (mnist_model.cuh): version 4's kernels each
// against float64 on the CPU, then every version's training step against version 1's; and, for
// kernels/mnist/check_layers.py, one step of every version dumped layer by layer.
//
// Taught in docs/mnist/: naive.md (the checks against PyTorch), tensor-cores.md (version 4's checks).
// The data folder is --data-dir, else $MNIST_DIR, else data/mnist.
// Build: nvcc -std=c++17 -O3 -arch=native -o build/mnist/mnist_check kernels/mnist/mnist_check.cu -lcublas
// Run:   ./build/mnist/mnist_check                     (version 4's layers; the versions agree on one step)
//        ./build/mnist/mnist_check --plant zeros-small (the comparison rejects zeros planted where the
//                                                       reference gradients are small)
//        ./build/mnist/mnist_check --check-layers DIR  (one step on weights and a batch from
//                                                       kernels/mnist/check_layers.py; dumps everything)
//
// course: gpu
// course: libs cublas
// course: run
// course: run --plant zeros-small
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "../common/args.cuh"
#include "../common/bf16.cuh"
#include "../common/check.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/verify.cuh"
#include "mnist_host.cuh"

using namespace mnist;

// --8<-- [start:compare]
// The layer checks' comparison. Element by element |got - want| <= atol + rtol |want|, as
// course::check_close, with atol set from the tensor's largest value and the arithmetic's precision.
// Alone, that passes zeros written wherever |want| <= atol, and gradients have many such small
// elements. So on S, the elements whose reference the atol alone would let be zero, the result must
// also be nearer the reference than zero is, in L2: ||got - want||_S <= ||want||_S / 2 + noise sqrt|S|,
// where noise is the rounding error expected of one element (well below atol): a right result is off
// by rounding on S as everywhere, zeros are off by the whole of ||want||_S.
struct Verdict {
  bool ok;
  std::string detail;  // for the CHECK line: the error, or what failed
};

template <typename T, typename R>
Verdict compare_scaled(const T* got, const R* want, size_t n, double rtol, double atol, double noise) {
  double max_err = 0.0, err_s = 0.0, want_s = 0.0;
  size_t small = 0;
  char buf[160];
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = g == w ? 0.0 : std::fabs(g - w);
    if (!(err <= atol + rtol * std::fabs(w))) {  // written so that NaN fails
      std::snprintf(buf, sizeof(buf), "first_bad=%zu got=%.9g want=%.9g", i, g, w);
      return {false, buf};
    }
    max_err = std::max(max_err, err);
    if (std::fabs(w) <= atol) ++small, err_s += err * err, want_s += w * w;
  }
  const double err_l2 = std::sqrt(err_s), want_l2 = std::sqrt(want_s);
  const bool ok = n > 0 && err_l2 <= 0.5 * want_l2 + noise * std::sqrt(static_cast<double>(small));
  std::snprintf(buf, sizeof(buf), "max_abs_err=%.3g rtol=%.1g atol=%.1g small=%zu small_err_l2=%.3g small_l2=%.3g",
                max_err, rtol, atol, small, err_l2, want_l2);
  return {ok, ok || n == 0 ? buf : std::string("small_values_off ") + buf};
}

template <typename T, typename R>
bool check_scaled(const char* name, const T* got, const R* want, size_t n, double rtol, double atol, double noise) {
  const Verdict v = compare_scaled(got, want, n, rtol, atol, noise);
  return course::check_true(name, v.ok, n, v.detail.c_str());
}
// --8<-- [end:compare]

// One training step of runner r from the given weights, on the first batch of a fixed shuffle.
struct StepResult {
  std::vector<float> grads, params, loss;
};

static StepResult one_step(Net& n, DeviceData& d, Runner r, int B, const std::vector<float>& init) {
  std::mt19937_64 rng(3);  // the same shuffle for every version
  std::vector<int> perm_host;
  const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
  upload_params(n, init);
  course::poison(n.grads, kTotalParams * sizeof(float));
  new_epoch(n, d, rng, perm_host);
  if (r.graph) {
    cudaGraphExec_t exec = capture_step(n, r.v, src, B, kLearningRate);
    CUDA_CHECK(cudaGraphLaunch(exec, n.st));
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
  } else {
    train_step(n, r.v, src, B, kLearningRate);
  }
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  return {course::to_host(n.grads, kTotalParams), course::to_host(n.params, kTotalParams),
          course::to_host(n.loss_hist, 1)};
}

constexpr const char* kParamNames[kNumParams] = {"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight",
                                                 "bn2.weight",   "bn2.bias",   "fc1.weight", "fc1.bias",
                                                 "fc2.weight",   "fc2.bias"};

// FP32 versions' gradients against version 1's: rtol 2e-3 and atol 2e-3 of the tensor's largest
// gradient (summation orders differ: cuBLAS, implicit GEMM, fused sums), noise 1% of that atol.
constexpr double kGradTol = 2e-3;
static double grad_scale(const float* want, int count) {
  float scale = 0;
  for (int i = 0; i < count; ++i) scale = std::max(scale, std::fabs(want[i]));
  return scale;
}

// --check-layers DIR: one step of every version on the weights and batch that check_layers.py
// wrote, dumping activations, gradients and updated weights for it to compare with PyTorch.
template <typename T>
static std::vector<T> read_bin(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    std::fprintf(stderr, "error: cannot read %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
  const size_t bytes = static_cast<size_t>(f.tellg());
  std::vector<T> v(bytes / sizeof(T));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return v;
}

static void dump(const std::string& path, const float* dev, size_t count) {
  const std::vector<float> h = course::to_host(dev, count);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
}

static int check_layers(const std::string& dir, float lr) {
  const std::vector<float> params = read_bin<float>(dir + "/params.f32");
  const std::vector<uint8_t> images = read_bin<uint8_t>(dir + "/images.u8");
  const std::vector<uint8_t> labels = read_bin<uint8_t>(dir + "/labels.u8");
  const std::vector<int> indices = read_bin<int>(dir + "/indices.i32");
  const int B = static_cast<int>(indices.size());
  if (params.size() != static_cast<size_t>(kTotalParams) || images.size() != labels.size() * 784 || B < 1 ||
      B > 1024) {
    std::fprintf(stderr, "error: %s: inconsistent inputs (%zu params, %zu images, %zu labels, batch %d)\n",
                 dir.c_str(), params.size(), images.size() / 784, labels.size(), B);
    return course::kExitFail;
  }
  Net n(B, 16);
  uint8_t* d_images = course::device_alloc<uint8_t>(images.size());
  uint8_t* d_labels = course::device_alloc<uint8_t>(labels.size());
  int* d_perm = course::device_alloc<int>(B);
  CUDA_CHECK(cudaMemcpy(d_images, images.data(), images.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_labels, labels.data(), labels.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_perm, indices.data(), B * sizeof(int), cudaMemcpyHostToDevice));
  const Source src{d_images, d_labels, d_perm, n.step, 1};
  const std::vector<std::pair<const char*, std::pair<float*, size_t>>> acts = {
      {"x", {n.x, B * 784u}},        {"c1", {n.c1, B * 32u * 784}}, {"p1", {n.p1, B * 32u * 196}},
      {"c2", {n.c2, B * 64u * 196}}, {"p2", {n.p2, B * 3136u}},     {"h", {n.h, B * 128u}},
      {"logits", {n.logits, B * 10u}}};
  for (Version v : {kNaive, kLibraries, kFused, kTf32}) {
    if (v == kTf32 && !tf32_supported()) continue;  // check_layers.py skips its TF32 checks too
    upload_params(n, params);
    CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
    for (const auto& a : acts) course::poison(a.second.first, a.second.second * sizeof(float));
    course::poison(n.grads, kTotalParams * sizeof(float));
    course::poison(n.loss_hist, 16 * sizeof(float));
    forward(n, v, src, B, n.loss_hist, n.loss_cap);
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    const std::string pre = dir + "/" + kVersionName[v] + ".";
    for (const auto& a : acts) dump(pre + a.first + ".f32", a.second.first, a.second.second);
    dump(pre + "loss.f32", n.loss_hist, 1);
    backward(n, v, B);
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    dump(pre + "grads.f32", n.grads, kTotalParams);
    dump(pre + "dc2.f32", n.dc2, B * 64u * 196);  // gradients at the convolutions' outputs and conv2's input
    dump(pre + "dp1.f32", n.dp1, B * 32u * 196);
    dump(pre + "dc1.f32", n.dc1, B * 32u * 784);
    naive::sgd_update<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, lr, kTotalParams, n.step);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    dump(pre + "params.f32", n.params, kTotalParams);
  }
  // The fused step as a CUDA graph: warm up (loads every kernel), reset, capture, replay once.
  upload_params(n, params);
  CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
  train_step(n, kFused, src, B, lr);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  upload_params(n, params);
  CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
  course::poison(n.loss_hist, 16 * sizeof(float));
  cudaGraphExec_t exec = capture_step(n, kFused, src, B, lr);
  CUDA_CHECK(cudaGraphLaunch(exec, n.st));
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  dump(dir + "/graph.params.f32", n.params, kTotalParams);
  dump(dir + "/graph.loss.f32", n.loss_hist, 1);
  std::printf("wrote one step of naive, libraries, fused, %sgraph to %s (batch %d)\n",
              tf32_supported() ? "tf32 and " : "", dir.c_str(), B);
  return 0;
}

// --8<-- [start:tc_checks]
// Version 4's layers, each on its own random inputs against float64 on the CPU, outputs poisoned
// (the k-split GEMMs add into outputs that the step zeroes first: those are poisoned, then zeroed).
// The inputs are stored as the step stores them (weights and pooled activations in bf16, gradients
// in fp32), so the kernels checked are the ones the step runs; the references use the fp32 values.
// Tolerance from bf16: an fp32 value rounded to bf16 (8 significant bits) is off by at most
// u = 2^-8 relatively, so a product of two rounded inputs by at most 2u |a| |b|. The K errors of a
// dot product have random signs, so their sum grows like sqrt(K) (a random walk), not like K: spread
// evenly over [-u, u], its standard deviation is below u sqrt(2/3) sqrt(K) max|a| max|b|. The check
// allows atol = 6u sqrt(K) max|a| max|b|, over 7 standard deviations; fp32 accumulation (2^-24 per
// addition) is far below that. A wrong index or a lost k-slice is off by about the value itself,
// sqrt(K) max|a| max|b| / 3 for uniform inputs: some 14 times the tolerance.
static double bf16_atol(int K, double amax, double bmax) {
  return 6.0 * std::ldexp(1.0, -8) * std::sqrt(static_cast<double>(K)) * amax * bmax;
}
// The error expected of one element (compare_scaled's noise): the bound on the standard deviation
// above, u sqrt(2/3) sqrt(K) max|a| max|b| (the atol / 7.3), rounded up to a sixth of the atol.
constexpr double kBf16Noise = 1.0 / 6;

static std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  course::fill_uniform(v, seed, lo, hi);
  return v;
}

// A convolution epilogue's batch-norm sums (d_stats: C sums, then C sums of squares) against those of
// the values it stored (got: N images of C channels of HW pixels), up to fp32 partial sums. The
// checks are named <layer>_bn_sum_vs_stored and <layer>_bn_sumsq_vs_stored.
static bool check_bn_sums(const std::string& layer, const std::vector<float>& got, const double* d_stats, int N,
                          int C, int HW) {
  std::vector<double> sum(C, 0.0), sumsq(C, 0.0), sum_abs(C, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < HW; ++p) {
        const double v = got[(n * C + c) * HW + p];
        sum[c] += v;
        sumsq[c] += v * v;
        sum_abs[c] += std::fabs(v);
      }
  const std::vector<double> stats = course::to_host(d_stats, 2 * C);
  const double max_abs = *std::max_element(sum_abs.begin(), sum_abs.end());
  bool ok = course::check_close((layer + "_bn_sum_vs_stored").c_str(), stats.data(), sum.data(), C, 1e-5,
                                1e-5 * max_abs);
  ok &= course::check_close((layer + "_bn_sumsq_vs_stored").c_str(), stats.data() + C, sumsq.data(), C, 1e-5, 1e-6);
  return ok;
}

static bool check_tc_convs(cudaStream_t st) {
  // conv2's shapes on 3 images, launched as on a GPU of one SM: two blocks, so that the first one
  // loops over two images (batch-norm sums and weight-gradient partials added across images).
  constexpr int N = 3, C = 32, K = 64, H = 14, HW = H * H, sms = 1;
  const std::vector<float> in = random_vector(N * C * HW, 101), w = random_vector(K * C * 9, 102),
                           dout = random_vector(N * K * HW, 103);
  __nv_bfloat16* d_in = course::to_device(course::to_bf16(in));  // stored in bf16 by the step (p1); dout in fp32
  float* d_dout = course::to_device(dout);
  __nv_bfloat16* d_w = course::to_device(course::to_bf16(w));
  float* d_out = course::device_alloc<float>(N * K * HW);
  float* d_din = course::device_alloc<float>(N * C * HW);
  float* d_dw = course::device_alloc<float>(K * C * 9);
  double* d_stats = course::device_alloc<double>(2 * K);
  double* d_stat_part = course::device_alloc<double>(tc::bn_stat_part_doubles(sms));
  const size_t part_floats = tc::conv_wgrad_partial_floats(N, sms, C, K);
  float* d_part = course::device_alloc<float>(part_floats);
  course::poison(d_part, part_floats * sizeof(float));  // every slice's partial must be written
  course::poison(d_stat_part, tc::bn_stat_part_doubles(sms) * sizeof(double));
  course::poison(d_out, N * K * HW * sizeof(float));
  course::poison(d_din, N * C * HW * sizeof(float));
  course::poison(d_dw, K * C * 9 * sizeof(float));  // outputs are written, not added to: no zeroing
  course::poison(d_stats, 2 * K * sizeof(double));
  tc::conv_forward<H, C, K>(d_w, d_in, d_out, N, d_stat_part, d_stats, sms, st);
  tc::conv_backward_data<H, C, K>(d_w, d_dout, d_din, N, sms, st);
  tc::conv_backward_weight<H, C, K>(d_dout, d_in, d_dw, d_part, N, sms, st);
  CUDA_CHECK(cudaStreamSynchronize(st));

  // The three products written as plain convolution sums (not as the im2col GEMM the kernels use).
  std::vector<double> out(N * K * HW, 0.0), din(N * C * HW, 0.0), dw(K * C * 9, 0.0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < 3; ++r)
          for (int q = 0; q < 3; ++q) {
            const double wv = w[((k * C + c) * 3 + r) * 3 + q];
            double acc_dw = 0.0;
            for (int y = 0; y < H; ++y)
              for (int x = 0; x < H; ++x) {
                const int iy = y + r - 1, ix = x + q - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= H) continue;
                const double iv = in[(n * C + c) * HW + iy * H + ix], g = dout[(n * K + k) * HW + y * H + x];
                out[(n * K + k) * HW + y * H + x] += iv * wv;  // out[y][x] += in[y+r-1][x+s-1] w[r][s]
                din[(n * C + c) * HW + iy * H + ix] += g * wv;  // its transpose
                acc_dw += g * iv;
              }
            dw[((k * C + c) * 3 + r) * 3 + q] += acc_dw;
          }
  bool ok = true;
  const std::vector<float> got = course::to_host(d_out, out.size());
  ok &= check_scaled("v4_conv2_forward_vs_fp64", got.data(), out.data(), out.size(), 0.0, bf16_atol(C * 9, 1, 1),
                     kBf16Noise * bf16_atol(C * 9, 1, 1));
  ok &= check_bn_sums("v4_conv2", got, d_stats, N, K, HW);
  ok &= check_scaled("v4_conv2_input_grad_vs_fp64", course::to_host(d_din, din.size()).data(), din.data(), din.size(),
                            0.0, bf16_atol(K * 9, 1, 1), kBf16Noise * bf16_atol(K * 9, 1, 1));
  ok &= check_scaled("v4_conv2_weight_grad_vs_fp64", course::to_host(d_dw, dw.size()).data(), dw.data(), dw.size(),
                     0.0, bf16_atol(N * HW, 1, 1), kBf16Noise * bf16_atol(N * HW, 1, 1));
  course::device_free({d_in, d_dout, d_w, d_out, d_din, d_dw, d_stats, d_part});
  course::device_free({d_stat_part});
  return ok;
}

// conv1's kernel (fp32, CUDA cores): 5 images launched as on a GPU of one SM (one block that loops
// over the 5 images, prefetching each next one). Each output is 9 fp32 products added in fp32: |error| <= 9 * 2^-24 *
// sum |w x| <= 1.6e-6 for |w| <= 1/3, |x| <= 1; a wrong index is off by about a product (0.1).
static bool check_tc_conv1(cudaStream_t st) {
  constexpr int N = 5, C = 32, H = 28, HW = H * H, sms = 1;
  const std::vector<float> x = random_vector(N * HW, 111), w = random_vector(C * 9, 112, -1.0f / 3, 1.0f / 3);
  float *d_x = course::to_device(x), *d_w = course::to_device(w), *d_out = course::device_alloc<float>(N * C * HW);
  double* d_stats = course::device_alloc<double>(2 * C);
  double* d_stat_part = course::device_alloc<double>(tc::bn_stat_part_doubles(sms));
  course::poison(d_out, N * C * HW * sizeof(float));
  course::poison(d_stats, 2 * C * sizeof(double));
  course::poison(d_stat_part, tc::bn_stat_part_doubles(sms) * sizeof(double));
  tc::conv1_forward(d_x, d_w, d_out, N, d_stat_part, d_stats, sms, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> out(N * C * HW, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y)
        for (int xx = 0; xx < H; ++xx)
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
              const int iy = y + r - 1, ix = xx + s - 1;
              if (iy >= 0 && iy < H && ix >= 0 && ix < H)
                out[(n * C + c) * HW + y * H + xx] +=
                    static_cast<double>(w[c * 9 + r * 3 + s]) * x[n * HW + iy * H + ix];
            }
  const std::vector<float> got = course::to_host(d_out, out.size());
  bool ok = check_scaled("v4_conv1_forward_vs_fp64", got.data(), out.data(), out.size(), 0.0, 1e-5, 1e-5 / 10);
  ok &= check_bn_sums("v4_conv1", got, d_stats, N, C, HW);
  course::device_free({d_x, d_w, d_out, d_stats, d_stat_part});
  return ok;
}

static bool check_tc_linears(int sms, cudaStream_t st) {
  // fc1's shapes on a batch of 5 (not a multiple of the 64-row tile; fc1 forward splits k = 3136).
  constexpr int B = 5, I = 3136, O = 128;
  const std::vector<float> x = random_vector(B * I, 201), w = random_vector(O * I, 202),
                           dy = random_vector(B * O, 203);
  __nv_bfloat16* d_x = course::to_device(course::to_bf16(x));  // stored in bf16 by the step (p2); dy in fp32
  float* d_dy = course::to_device(dy);
  __nv_bfloat16* d_w = course::to_device(course::to_bf16(w));
  float* d_y = course::device_alloc<float>(B * O);
  float* d_dx = course::device_alloc<float>(B * I);
  float* d_dw = course::device_alloc<float>(O * I);
  const size_t part_floats = tc::linear_part_floats(B, I, O, sms);
  float* d_part = course::device_alloc<float>(part_floats);
  course::poison(d_part, part_floats * sizeof(float));  // every slice of k must write its part
  course::poison(d_y, B * O * sizeof(float));  // outputs are written, not added to: no zeroing
  course::poison(d_dx, B * I * sizeof(float));
  course::poison(d_dw, O * I * sizeof(float));
  tc::linear_forward(d_x, d_w, d_y, d_part, B, I, O, sms, st);
  tc::linear_backward_data(d_dy, d_w, d_dx, B, I, O, st);
  tc::linear_backward_weight(d_dy, d_x, d_dw, d_part, B, I, O, sms, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> y(B * O), dx(B * I), dw(O * I);
  std::vector<float> dy_t(O * B);  // dy transposed: dw = dy^T x
  for (int b = 0; b < B; ++b)
    for (int o = 0; o < O; ++o) dy_t[o * B + b] = dy[b * O + o];
  course::gemm_reference(B, O, I, x.data(), w.data(), y.data(), course::BLayout::kNxK);    // y = x w^T
  course::gemm_reference(B, I, O, dy.data(), w.data(), dx.data(), course::BLayout::kKxN);  // dx = dy w
  course::gemm_reference(O, I, B, dy_t.data(), x.data(), dw.data(), course::BLayout::kKxN);
  bool ok = true;
  ok &= check_scaled("v4_fc1_forward_vs_fp64", course::to_host(d_y, y.size()).data(), y.data(), y.size(), 0.0,
                            bf16_atol(I, 1, 1), kBf16Noise * bf16_atol(I, 1, 1));
  ok &= check_scaled("v4_fc1_input_grad_vs_fp64", course::to_host(d_dx, dx.size()).data(), dx.data(), dx.size(), 0.0,
                            bf16_atol(O, 1, 1), kBf16Noise * bf16_atol(O, 1, 1));
  ok &= check_scaled("v4_fc1_weight_grad_vs_fp64", course::to_host(d_dw, dw.size()).data(), dw.data(), dw.size(), 0.0,
                            bf16_atol(B, 1, 1), kBf16Noise * bf16_atol(B, 1, 1));
  course::device_free({d_x, d_dy, d_w, d_y, d_dx, d_dw, d_part});
  return ok;
}

// The fp32 kernels around the GEMMs: fc2 with the loss and its backward, SGD with the bf16 copy.
static bool check_tc_small_kernels(cudaStream_t st) {
  constexpr int B = 301, n_params = 1000;  // several loss blocks, the last one partly empty
  const std::vector<float> h_pre = random_vector(B * 128, 301), b3 = random_vector(128, 302, -0.1f, 0.1f),
                           w4 = random_vector(1280, 303, -0.1f, 0.1f), b4 = random_vector(10, 304, -0.1f, 0.1f);
  std::vector<int> labels(B);
  for (int b = 0; b < B; ++b) labels[b] = (b * 7 + 3) % 10;
  float *d_hpre = course::to_device(h_pre), *d_b3 = course::to_device(b3), *d_w4 = course::to_device(w4),
        *d_b4 = course::to_device(b4);
  int* d_labels = course::to_device(labels);
  int* d_step = course::to_device(std::vector<int>{0});
  float *d_h = course::device_alloc<float>(B * 128), *d_logits = course::device_alloc<float>(B * 10),
        *d_dlogits = course::device_alloc<float>(B * 10);
  float *d_loss = course::device_alloc<float>(1), *d_part = course::device_alloc<float>(tc::kLossBlocks);
  unsigned* d_done = course::to_device(std::vector<unsigned>{0});
  float *d_dhpre = course::device_alloc<float>(B * 128),
        *d_g = course::device_alloc<float>(tc::kFc2Grads);  // db3 | dw4 | db4
  const size_t grad_part_floats = static_cast<size_t>(tc::fc2_loss_blocks(B)) * tc::kFc2Grads;
  float* d_gpart = course::device_alloc<float>(grad_part_floats);
  course::poison(d_gpart, grad_part_floats * sizeof(float));  // every block must write its part
  course::poison(d_loss, sizeof(float));
  course::poison(d_h, B * 128 * sizeof(float));
  course::poison(d_logits, B * 10 * sizeof(float));
  course::poison(d_dlogits, B * 10 * sizeof(float));
  course::poison(d_dhpre, B * 128 * sizeof(float));
  course::poison(d_g, tc::kFc2Grads * sizeof(float));  // written by the parts' sum, not added to
  tc::fc2_loss_and_backward<<<tc::fc2_loss_blocks(B), tc::kLossThreads, 0, st>>>(
      d_hpre, d_b3, d_w4, d_b4, d_labels, d_h, d_logits, d_dlogits, d_dhpre, d_gpart, B, d_step, d_loss, 1, d_part,
      d_done);
  CUDA_CHECK_LAUNCH();
  reduce_parts(d_gpart, tc::fc2_loss_blocks(B), tc::kFc2Grads, d_g, st);
  CUDA_CHECK(cudaStreamSynchronize(st));

  std::vector<double> h(B * 128), z(B * 10), dz(B * 10), dhpre(B * 128), g(1418, 0.0);
  double loss = 0.0;
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < 128; ++i) h[b * 128 + i] = std::max(0.0, double(h_pre[b * 128 + i]) + b3[i]);
    double m = -INFINITY, sum = 0.0;
    for (int k = 0; k < 10; ++k) {
      double acc = b4[k];
      for (int i = 0; i < 128; ++i) acc += h[b * 128 + i] * w4[k * 128 + i];
      z[b * 10 + k] = acc;
      m = std::max(m, acc);
    }
    for (int k = 0; k < 10; ++k) sum += std::exp(z[b * 10 + k] - m);
    loss += (std::log(sum) + m - z[b * 10 + labels[b]]) / B;
    for (int k = 0; k < 10; ++k) dz[b * 10 + k] = (std::exp(z[b * 10 + k] - m) / sum - (k == labels[b])) / B;
    for (int i = 0; i < 128; ++i) {
      double d = 0.0;
      for (int k = 0; k < 10; ++k) {
        d += dz[b * 10 + k] * w4[k * 128 + i];
        g[128 + k * 128 + i] += dz[b * 10 + k] * h[b * 128 + i];  // dW4 = dlogits^T h
      }
      dhpre[b * 128 + i] = h[b * 128 + i] > 0.0 ? d : 0.0;
      g[i] += dhpre[b * 128 + i];  // db3
    }
    for (int k = 0; k < 10; ++k) g[1408 + k] += dz[b * 10 + k];  // db4
  }
  bool ok = true;
  ok &= course::check_close("v4_fc1_bias_relu_vs_fp64", course::to_host(d_h, h.size()).data(), h.data(), h.size(),
                            1e-6, 1e-6);
  ok &= course::check_close("v4_fc2_logits_vs_fp64", course::to_host(d_logits, z.size()).data(), z.data(), z.size(),
                            1e-5, 1e-5);
  ok &= course::check_close("v4_softmax_xent_grad_vs_fp64", course::to_host(d_dlogits, dz.size()).data(), dz.data(),
                            dz.size(), 1e-4, 1e-8);
  ok &= course::check_close("v4_softmax_xent_loss_vs_fp64", course::to_host(d_loss, 1).data(), &loss, 1, 1e-5, 1e-6);
  ok &= course::check_close("v4_fc2_backward_dh_vs_fp64", course::to_host(d_dhpre, dhpre.size()).data(), dhpre.data(),
                            dhpre.size(), 1e-4, 1e-8);
  ok &= course::check_close("v4_fc2_backward_grads_vs_fp64", course::to_host(d_g, g.size()).data(), g.data(),
                            g.size(), 1e-4, 1e-6);
  ok &= course::check_true("v4_loss_counter_reset", course::to_host(d_done, 1)[0] == 0, 1);

  // SGD: fp32 master weights and their bf16 copy (within bf16's relative rounding, 2^-8).
  const std::vector<float> p0 = random_vector(n_params, 306), g0 = random_vector(n_params, 307);
  float* d_p = course::to_device(p0);
  float* d_g0 = course::to_device(g0);
  __nv_bfloat16* d_p16 = course::device_alloc<__nv_bfloat16>(n_params);
  course::poison(d_p16, n_params * sizeof(__nv_bfloat16));
  float* d_lr = course::to_device(std::vector<float>{0.05f});
  tc::sgd_update_bf16<<<course::ceil_div(n_params, 256), 256, 0, st>>>(d_p, d_g0, d_p16, d_lr, n_params, d_step);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> p1(n_params);
  for (int i = 0; i < n_params; ++i) p1[i] = double(p0[i]) - 0.05 * double(g0[i]);
  const std::vector<__nv_bfloat16> p16 = course::to_host(d_p16, n_params);
  std::vector<float> p16f(n_params);
  for (int i = 0; i < n_params; ++i) p16f[i] = __bfloat162float(p16[i]);
  ok &= course::check_close("v4_sgd_fp32_vs_fp64", course::to_host(d_p, n_params).data(), p1.data(), n_params, 1e-6,
                            1e-7);
  ok &= course::check_close("v4_sgd_bf16_copy_vs_fp64", p16f.data(), p1.data(), n_params, std::ldexp(1.0, -8), 0.0);
  ok &= course::check_true("v4_sgd_advances_step", course::to_host(d_step, 1)[0] == 1, 1);

  // The learning-rate schedule, step by step, against the same function in float64: a warm-up of 3
  // steps to 0.1, then half a cosine to 0 over the remaining 9 of 12 steps.
  const tc::LrSchedule schedule{0.1f, 3, 12};
  int* d_run_step = course::to_device(std::vector<int>{0});
  std::vector<float> lr_got;
  std::vector<double> lr_want;
  for (int t = 0; t < 12; ++t) {
    course::poison(d_lr, sizeof(float));
    tc::next_learning_rate<<<1, 1, 0, st>>>(schedule, d_run_step, d_lr);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(st));
    lr_got.push_back(course::to_host(d_lr, 1)[0]);
    lr_want.push_back(t < 3 ? 0.1 * (t + 1) / 3 : 0.05 * (1.0 + std::cos(M_PI * (t - 3) / 9.0)));
  }
  ok &= course::check_close("v4_lr_schedule_vs_fp64", lr_got.data(), lr_want.data(), 12, 1e-5, 1e-7);
  ok &= course::check_true("v4_lr_schedule_counts_steps", course::to_host(d_run_step, 1)[0] == 12, 1);
  course::device_free({d_hpre, d_b3, d_w4, d_b4, d_labels, d_step, d_h, d_logits, d_dlogits, d_loss, d_part, d_done,
                       d_dhpre, d_g, d_gpart, d_p, d_g0, d_p16, d_lr, d_run_step});
  return ok;
}
// --8<-- [end:tc_checks]

// Every version, and the captured graphs, take one step from the same weights on the same batch;
// versions 2 to 4 must agree with version 1 (which check_layers.py checks against PyTorch).
static bool versions_agree(Net& n, DeviceData& d, int B) {
  const std::vector<float> init = init_params(7);
  const int runners = tf32_supported() ? kNumRunners : kNumRunners - 2;  // kTf32, kTc: the last two
  std::vector<StepResult> res;
  for (int k = 0; k < runners; ++k) res.push_back(one_step(n, d, kRunners[k], B, init));
  bool ok = true;
  for (int k = 1; k < runners; ++k) {
    // TF32 rounds every product's inputs to 10 mantissa bits: a looser tolerance for that version;
    // bf16 (version 4) keeps 7, 8 times coarser: the loss within 2% (tol / 10).
    const Version v = kRunners[k].v;
    const double tol = v == kTc ? 2e-1 : v == kTf32 ? 2e-2 : kGradTol;
    char name[96];
    std::snprintf(name, sizeof(name), "%s_loss_vs_naive", kRunners[k].name());
    for (char* c = name; *c; ++c) *c = std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
    ok &= course::check_close(name, res[k].loss.data(), res[0].loss.data(), 1, tol / 10, 1e-5);
    if (v == kTf32 || v == kTc) {
      // TF32 rounding moves some max-pool winners and ReLU masks, which changes individual gradient
      // values by more than any elementwise tolerance; check_layers.py checks each TF32 kernel on its
      // own inputs instead, and check_tc_* (above) each version-4 kernel. Here: the loss above, and
      // the gradients' relative L2 distance as a note.
      for (int p = 0; p < kNumParams; ++p) {
        double d2 = 0, w2 = 0;
        for (int i = 0; i < kParamSize[p]; ++i) {
          const double g = res[k].grads[offset_of(p) + i], w = res[0].grads[offset_of(p) + i];
          d2 += (g - w) * (g - w);
          w2 += w * w;
        }
        const double dist = std::sqrt(d2 / w2);
        std::printf("NOTE %s grad %s: relative L2 distance to version 1 = %.3g\n", kVersionName[v], kParamNames[p],
                    dist);
        if (v == kTc) {  // bf16: at least every gradient written (finite) and closer to version 1's than zero is
          std::snprintf(name, sizeof(name), "tc_grad_%s_finite_and_nearer_than_zero", kParamNames[p]);
          ok &= course::check_true(name, std::isfinite(dist) && dist < 1.0, kParamSize[p]);
        }
      }
      continue;
    }
    if (kRunners[k].graph && kRunners[k].v == kFused) {
      ok &= course::check_close("graph_params_after_step_vs_fused", res[k].params.data(), res[2].params.data(),
                                kTotalParams, 1e-5, 1e-7);
      continue;
    }
    for (int p = 0; p < kNumParams; ++p) {
      const float* want = res[0].grads.data() + offset_of(p);
      const double atol = kGradTol * grad_scale(want, kParamSize[p]);
      std::snprintf(name, sizeof(name), "%s_grad_%s_vs_naive", kVersionName[v], kParamNames[p]);
      ok &= check_scaled(name, res[k].grads.data() + offset_of(p), want, kParamSize[p], kGradTol, atol, atol / 100);
    }
  }
  return ok;
}

// --8<-- [start:deterministic]
// Version 4 is deterministic: every sum across blocks is written part by part and the parts added in
// a fixed order (reduce_parts), never with float atomics, whose order depends on which block finishes
// first. So the same weights and batches give the same bits: ten steps of the captured step, from the
// same weights on the same batches, twice, and the weights and the ten losses must match bit for bit.
// At a batch of 61 and of 1000 (where fc1's weight gradient is split over the batch as well).
static bool v4_steps_bitwise_repeatable(Net& n, DeviceData& d, int B) {
  constexpr int kSteps = 10;
  static_assert(kSteps <= 16, "the check's Net keeps 16 losses");
  const std::vector<float> init = init_params(11);
  std::vector<float> params[2], losses[2];
  for (int run = 0; run < 2; ++run) {
    std::mt19937_64 rng(5);  // the same batches in both runs
    std::vector<int> perm_host;
    const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
    upload_params(n, init);
    course::poison(n.grads, kTotalParams * sizeof(float));
    course::poison(n.loss_hist, kSteps * sizeof(float));
    new_epoch(n, d, rng, perm_host);
    cudaGraphExec_t exec = capture_step(n, kTc, src, B, kLearningRate);
    for (int s = 0; s < kSteps; ++s) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    params[run] = course::to_host(n.params, kTotalParams);
    losses[run] = course::to_host(n.loss_hist, kSteps);
  }
  int differ = 0;
  for (int i = 0; i < kTotalParams; ++i)
    differ += std::memcmp(&params[0][i], &params[1][i], sizeof(float)) != 0;
  const bool same_losses = std::memcmp(losses[0].data(), losses[1].data(), kSteps * sizeof(float)) == 0;
  bool finite = true;
  for (float l : losses[0]) finite &= std::isfinite(l);
  char name[64], detail[128];
  std::snprintf(name, sizeof(name), "v4_%d_steps_bitwise_repeatable_batch_%d", kSteps, B);
  std::snprintf(detail, sizeof(detail), "weights_differing=%d of %d losses_identical=%s last_loss=%.6f", differ,
                kTotalParams, same_losses ? "yes" : "no", losses[0][kSteps - 1]);
  return course::check_true(name, differ == 0 && same_losses && finite, kTotalParams + kSteps, detail);
}
// --8<-- [end:deterministic]

// --8<-- [start:plant]
// --plant zeros-small: the gradient comparison must reject a result that is right except for zeros
// written where the reference is small (|want| <= atol, which the elementwise test alone lets
// through), and must accept the right result. The reference is version 1's step, the result version
// 2's (batch 61, as the checked run).
static bool planted_zeros_caught(Net& n, DeviceData& d, int B) {
  const std::vector<float> init = init_params(7);
  const StepResult ref = one_step(n, d, kRunners[0], B, init), got = one_step(n, d, kRunners[1], B, init);
  int plants = 0, caught = 0, accepted = 0;
  for (int p = 0; p < kNumParams; ++p) {
    const float* want = ref.grads.data() + offset_of(p);
    const float* right = got.grads.data() + offset_of(p);
    const double atol = kGradTol * grad_scale(want, kParamSize[p]);
    accepted += compare_scaled(right, want, kParamSize[p], kGradTol, atol, atol / 100).ok;
    std::vector<float> planted(right, right + kParamSize[p]);
    int zeroed = 0;
    for (int i = 0; i < kParamSize[p]; ++i)
      if (std::fabs(want[i]) <= atol && want[i] != 0.0f)
        planted[i] = 0.0f, ++zeroed;  // a zero for a zero is no fault
    if (!zeroed) continue;  // no small values in this tensor: nothing to plant
    ++plants;
    const bool rejected = !compare_scaled(planted.data(), want, kParamSize[p], kGradTol, atol, atol / 100).ok;
    // What the elementwise test alone (course::check_close's rule) says of the plant.
    const Verdict elementwise = compare_scaled(planted.data(), want, kParamSize[p], kGradTol, atol, INFINITY);
    std::printf("NOTE plant %s: %d of %d gradients zeroed; elementwise alone %s; with the small values %s\n",
                kParamNames[p], zeroed, kParamSize[p], elementwise.ok ? "accepts" : "rejects",
                rejected ? "rejects" : "accepts");
    caught += rejected;
  }
  char detail[64];
  std::snprintf(detail, sizeof(detail), "caught=%d of %d", caught, plants);
  bool ok = course::check_true("planted_zeros_small_caught", plants > 0 && caught == plants, plants, detail);
  std::snprintf(detail, sizeof(detail), "accepted=%d of %d", accepted, kNumParams);
  ok &= course::check_true("unplanted_grads_accepted", accepted == kNumParams, kNumParams, detail);
  return ok;
}
// --8<-- [end:plant]

// --8<-- [start:main]
int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const std::string layers_dir = args.get_str("--check-layers", "");
  const bool plant = course::plant_zeros_small_requested(args);  // an unknown fault exits 1
  const std::string data_dir = mnist::data_dir(args.get_str("--data-dir", "").c_str());
  args.finish();
  if (!layers_dir.empty()) return check_layers(layers_dir, kLearningRate);
  Split train_split, test_split;
  load_data(data_dir, train_split, test_split);
  Net n(1024, 16);
  DeviceData d = upload(train_split, test_split);
  const int batch = 61;  // a prime: no tile divides it
  if (plant) return planted_zeros_caught(n, d, batch) ? 0 : course::kExitFail;
  // Version 4's layers against float64, then the versions agree on one step.
  bool ok = true;
  if (tf32_supported()) {
    ok &= check_tc_conv1(n.st);
    ok &= check_tc_convs(n.st);
    ok &= check_tc_linears(n.sms, n.st);
    ok &= check_tc_small_kernels(n.st);
    ok &= v4_steps_bitwise_repeatable(n, d, batch);
    ok &= v4_steps_bitwise_repeatable(n, d, 1000);
  }
  ok &= versions_agree(n, d, batch);
  return ok ? 0 : course::kExitFail;
}
// --8<-- [end:main]
