// cudnn_conv.cu: cuDNN's legacy (descriptor) API: a tanh activation, then a 2D convolution forward
// with the algorithm cuDNN's heuristic proposes and the one its find call measures fastest, each
// with the math type its result names and a workspace sized for it; with --bench, every algorithm
// find can run, timed the course's way on random inputs.
//
// Taught in docs/libraries/cudnn.md. kernels/libraries/cudnn_conv_torch.py checks the same
// convolution against PyTorch.
// Build: nvcc -O3 -arch=native -o build/libraries/cudnn_conv kernels/libraries/cudnn_conv.cu -lcudnn
// Run:   ./build/libraries/cudnn_conv                       (checks tanh and conv on odd sizes)
//        ./build/libraries/cudnn_conv --bench               (times every algorithm on a ResNet layer)
//        ./build/libraries/cudnn_conv --dump DIR            (also writes x, w, y as raw float32)
//
// course: gpu
// course: libs cudnn
// course: run --n 2 --c 3 --h 31 --w 29 --k 5 --r 3 --pad 1 --stride 1
// course: run --n 1 --c 1 --h 1 --w 1 --k 1 --r 1 --pad 0 --stride 1
// course: run --n 3 --c 7 --h 17 --w 23 --k 4 --r 5 --pad 2 --stride 2
// course: run --n 2 --c 3 --h 31 --w 29 --k 5 --r 3 --pad 1 --stride 1 --plant zeros-small
// course: bench --bench
#include <utility>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cudnn.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

struct ConvShape {
  int n, c, h, w;  // input, NCHW
  int k, r;        // k filters of r x r
  int pad, stride;
  int p() const { return (h + 2 * pad - r) / stride + 1; }  // output height
  int q() const { return (w + 2 * pad - r) / stride + 1; }  // output width
};

// --8<-- [start:reference]
// Direct convolution, NCHW, in double. cuDNN, like PyTorch, computes cross-correlation: the
// filter is not flipped.
static void conv_reference(const std::vector<float>& x, const std::vector<float>& f, std::vector<double>& y,
                           const ConvShape& s) {
  const int P = s.p(), Q = s.q();
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          double acc = 0.0;
          for (int c = 0; c < s.c; ++c)
            for (int i = 0; i < s.r; ++i)
              for (int j = 0; j < s.r; ++j) {
                const int hi = p * s.stride - s.pad + i, wi = q * s.stride - s.pad + j;
                if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;  // zero padding
                acc += (double)x[(((size_t)n * s.c + c) * s.h + hi) * s.w + wi] *
                       f[(((size_t)k * s.c + c) * s.r + i) * s.r + j];
              }
          y[(((size_t)n * s.k + k) * P + p) * Q + q] = acc;
        }
}
// --8<-- [end:reference]

static const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default math";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op math";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op math, conversion allowed";
    case CUDNN_FMA_MATH: return "FMA math";
    default: return "unknown math";
  }
}

// --8<-- [start:tanh]
// The simplest cuDNN call: y = tanh(x) elementwise. A tensor descriptor states the shape and
// layout; an activation descriptor states the function; alpha and beta blend the result into y
// (y = alpha * tanh(x) + beta * y), as in every cuDNN operation.
static void tanh_forward(cudnnHandle_t h, const float* x, float* y, int n, int c, int hh, int w) {
  cudnnTensorDescriptor_t desc;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hh, w));
  cudnnActivationDescriptor_t act;
  CUDNN_CHECK(cudnnCreateActivationDescriptor(&act));
  CUDNN_CHECK(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_TANH, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  const float alpha = 1.0f, beta = 0.0f;
  CUDNN_CHECK(cudnnActivationForward(h, act, &alpha, desc, x, &beta, desc, y));
  CUDNN_CHECK(cudnnDestroyActivationDescriptor(act));
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(desc));
}
// --8<-- [end:tanh]

struct Conv {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t f;
  cudnnConvolutionDescriptor_t conv;
};

// --8<-- [start:descriptors]
static Conv make_conv(const ConvShape& s) {
  Conv d;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&d.f));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(d.f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.r));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d.conv));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d.conv, s.pad, s.pad, s.stride, s.stride, /*dilation=*/1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // Default math permits tensor-core (TF32) kernels for fp32 data on Ampere and newer;
  // CUDNN_FMA_MATH forbids them.
  CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, CUDNN_DEFAULT_MATH));
  // Ask cuDNN for the output shape rather than computing it: a mismatch is a BAD_PARAM later.
  int n, k, p, q;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.f, &n, &k, &p, &q));
  if (n != s.n || k != s.k || p != s.p() || q != s.q()) {
    std::fprintf(stderr, "error: cuDNN's output shape %dx%dx%dx%d differs from ours\n", n, k, p, q);
    std::exit(course::kExitFail);
  }
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.y));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, p, q));
  return d;
}
// --8<-- [end:descriptors]

static void destroy(Conv& d) {
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(d.x));
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(d.y));
  CUDNN_CHECK(cudnnDestroyFilterDescriptor(d.f));
  CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(d.conv));
}

// --8<-- [start:choose]
// Two ways to choose an algorithm. The heuristic (Get*_v7) ranks them from the descriptors alone,
// without running anything. Find runs every algorithm and ranks them by its own timing, so it costs
// time and memory once. The ...Ex variant used here runs them on your buffers, with a workspace you
// give it; plain cudnnFindConvolutionForwardAlgorithm allocates its own buffers and leaves them
// uninitialised, which compute-sanitizer's initcheck reports as reads of uninitialised memory.
// Either way, each result names an algorithm, the math type it was ranked with, and its workspace.
static std::vector<cudnnConvolutionFwdAlgoPerf_t> choose(cudnnHandle_t h, const Conv& d, bool find, bool verbose,
                                                         const float* x, const float* f, float* y) {
  int max_algos = 0, got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_algos));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max_algos);
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.f, d.conv, d.y, max_algos, &got, perf.data()));
  if (find) {
    size_t ws_bytes = 0;  // room for every algorithm the heuristic knows about
    for (int i = 0; i < got; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS) ws_bytes = std::max(ws_bytes, perf[i].memory);
    void* ws = nullptr;
    if (ws_bytes) CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d.x, x, d.f, f, d.conv, d.y, y, max_algos, &got,
                                                       perf.data(), ws, ws_bytes));
    if (ws) CUDA_CHECK(cudaFree(ws));
  }
  perf.resize(got);
  for (const auto& p : perf)
    if (verbose)
      std::printf("  %s %-22s status=%-28s time=%8.4f ms workspace=%zu B math=%s\n", find ? "find" : "heur",
                  course::conv_fwd_algo_name(p.algo), cudnnGetErrorString(p.status), p.time, p.memory,
                  math_name(p.mathType));
  return perf;
}
// --8<-- [end:choose]

// --8<-- [start:forward]
// Run one result of choose(): first apply the math type it was ranked with (the descriptor's own may
// differ), then ask the workspace for that algorithm and math type. The caller owns the workspace,
// so that a benchmark allocates it once, outside the timed region.
static size_t prepare(cudnnHandle_t h, const Conv& d, const cudnnConvolutionFwdAlgoPerf_t& choice) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, choice.mathType));
  size_t ws_bytes = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.f, d.conv, d.y, choice.algo, &ws_bytes));
  return std::max(ws_bytes, choice.memory);
}

static void conv_forward(cudnnHandle_t h, const Conv& d, cudnnConvolutionFwdAlgo_t algo, const float* x,
                         const float* f, float* y, void* ws, size_t ws_bytes) {
  const float alpha = 1.0f, beta = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(h, &alpha, d.x, x, d.f, f, d.conv, algo, ws, ws_bytes, &beta, d.y, y));
}
// --8<-- [end:forward]

static void write_raw(const std::string& path, const std::vector<float>& v) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp || std::fwrite(v.data(), sizeof(float), v.size(), fp) != v.size()) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
  std::fclose(fp);
}

// --8<-- [start:tolerance]
// Each output sums c r^2 products, so its tolerance follows their sizes, sum |x w| (the reference run on
// |x| and |w|), times the unit roundoff of what rounds (course::sum_atol): the fp32 accumulator (2^-23),
// and the inputs where the math type lets cuDNN round them: TF32 (2^-10) under default and tensor-op
// math, fp16 or bf16 (2^-7) where conversion is allowed. FFT and Winograd algorithms round transformed
// values that mix a whole output plane, so there each output is held to 16 times the largest bound in its
// (image, filter) plane. A fixed atol (5e-3, 3e-2) let a quiet image's outputs come back as zeros.
static std::vector<double> conv_atol(const std::vector<double>& sum_abs, const ConvShape& s,
                                     const cudnnConvolutionFwdAlgoPerf_t& choice) {
  const double u_in = choice.mathType == CUDNN_FMA_MATH                         ? 0
                      : choice.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? 0x1p-7
                                                                                 : 0x1p-10;
  std::vector<double> atol = course::sum_atol(sum_abs, (long long)s.c * s.r * s.r, 0x1p-23, u_in);
  const bool transform = choice.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
                         choice.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
                         choice.algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
                         choice.algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
  if (transform) {
    const size_t plane = (size_t)s.p() * s.q();
    for (size_t start = 0; start < atol.size(); start += plane) {
      const double most = *std::max_element(atol.begin() + start, atol.begin() + start + plane);
      std::fill(atol.begin() + start, atol.begin() + start + plane, 16 * most);
    }
  }
  return atol;
}
// --8<-- [end:tolerance]

// plant: --plant zeros-small (each convolution check also runs on its output with zeros below the old
// fixed atol).
static bool check(cudnnHandle_t h, const ConvShape& s, uint64_t seed, const std::string& dump, bool plant) {
  bool ok = true;
  const size_t nx = (size_t)s.n * s.c * s.h * s.w, nf = (size_t)s.k * s.c * s.r * s.r;
  const size_t ny = (size_t)s.n * s.k * s.p() * s.q();
  std::vector<float> x(nx), f(nf), y(std::max(nx, ny));
  course::fill_uniform(x, seed, -2.0f, 2.0f);
  course::fill_uniform(f, seed + 1);
  // Every third image, from the second, 2^20 times quieter (an exact scaling): small outputs beside large.
  course::quiet_rows(x, s.n, (size_t)s.c * s.h * s.w);
  float *dx, *df, *dy;
  CUDA_CHECK(cudaMalloc(&dx, nx * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&df, nf * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, std::max(nx, ny) * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), nx * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(df, f.data(), nf * sizeof(float), cudaMemcpyHostToDevice));

  course::poison(dy, nx * sizeof(float));
  tanh_forward(h, dx, dy, s.n, s.c, s.h, s.w);
  CUDA_CHECK(cudaMemcpy(y.data(), dy, nx * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<double> want_tanh(nx);
  for (size_t i = 0; i < nx; ++i) want_tanh[i] = std::tanh((double)x[i]);
  ok &= course::check_close("cudnn_tanh", y.data(), want_tanh.data(), nx, 1e-5, 1e-6);

  Conv d = make_conv(s);
  std::vector<double> want(ny), sum_abs(ny);
  conv_reference(x, f, want, s);
  conv_reference(course::abs_values(x), course::abs_values(f), sum_abs, s);
  // Run both the heuristic's first choice and find's fastest, each with its own workspace.
  for (bool find : {false, true}) {
    const auto perf = choose(h, d, find, true, dx, df, dy);
    const auto it =
        std::find_if(perf.begin(), perf.end(), [](const auto& p) { return p.status == CUDNN_STATUS_SUCCESS; });
    if (it == perf.end()) {
      std::printf("CHECK FAIL cudnn_conv_%s n=0 no algorithm succeeded\n", find ? "find" : "heuristic");
      return false;
    }
    std::printf("  using %s with %s (%s)\n", course::conv_fwd_algo_name(it->algo), math_name(it->mathType),
                find ? "find's fastest" : "heuristic's first");
    const size_t ws_bytes = prepare(h, d, *it);
    void* ws = nullptr;
    if (ws_bytes) CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    course::poison(dy, ny * sizeof(float));
    conv_forward(h, d, it->algo, dx, df, dy, ws, ws_bytes);
    CUDA_CHECK(cudaMemcpy(y.data(), dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
    if (ws) CUDA_CHECK(cudaFree(ws));
    const double old_atol = it->mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? 3e-2 : 5e-3;
    ok &= course::check_close_each_planted(find ? "cudnn_conv_find" : "cudnn_conv_heuristic", y.data(), want.data(),
                                           conv_atol(sum_abs, s, *it).data(), ny, 0, plant ? old_atol : 0);
  }
  if (!dump.empty()) {
    y.resize(ny);
    write_raw(dump + "/x.f32", x);
    write_raw(dump + "/w.f32", f);
    write_raw(dump + "/y.f32", y);
  }
  destroy(d);
  for (void* p : {(void*)dx, (void*)df, (void*)dy}) CUDA_CHECK(cudaFree(p));
  return ok;
}

// --8<-- [start:bench]
// A ResNet-50 layer (3x3, 64 -> 64 channels on 56x56, batch 32) on random inputs: every algorithm
// the find call can run, each with the math type find ranked it with, timed the course's way. One
// workspace, as large as the largest any of them needs, is allocated before timing starts, so the
// timed region holds the convolution and nothing else. Find's first choice is the peer. A row is
// named by its algorithm and math type alone (find's ranking can differ between two timing
// processes, and rows are matched by name), and a line above it prints its rank and workspace.
static void bench(cudnnHandle_t h, uint64_t seed) {
  const ConvShape s{32, 64, 56, 56, 64, 3, 1, 1};
  const size_t nx = (size_t)s.n * s.c * s.h * s.w, nf = (size_t)s.k * s.c * s.r * s.r;
  const size_t ny = (size_t)s.n * s.k * s.p() * s.q();
  std::vector<float> hx(nx), hf(nf);
  course::fill_uniform(hx, seed, -2.0f, 2.0f);
  course::fill_uniform(hf, seed + 1);
  float *x, *f, *y;
  CUDA_CHECK(cudaMalloc(&x, nx * 4));
  CUDA_CHECK(cudaMalloc(&f, nf * 4));
  CUDA_CHECK(cudaMalloc(&y, ny * 4));
  CUDA_CHECK(cudaMemcpy(x, hx.data(), nx * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(f, hf.data(), nf * 4, cudaMemcpyHostToDevice));
  Conv d = make_conv(s);
  const auto perf = choose(h, d, /*find=*/true, /*verbose=*/true, x, f, y);
  size_t ws_bytes = 0;
  for (const auto& p : perf)
    if (p.status == CUDNN_STATUS_SUCCESS) ws_bytes = std::max(ws_bytes, prepare(h, d, p));
  void* ws = nullptr;
  if (ws_bytes) CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  const double flops = 2.0 * ny * s.c * s.r * s.r, bytes = 4.0 * (nx + nf + ny);
  bool first = true;
  std::vector<std::pair<cudnnConvolutionFwdAlgo_t, cudnnMathType_t>> timed;
  for (size_t rank = 0; rank < perf.size(); ++rank) {
    const auto& p = perf[rank];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const std::pair<cudnnConvolutionFwdAlgo_t, cudnnMathType_t> algo_math{p.algo, p.mathType};
    if (std::find(timed.begin(), timed.end(), algo_math) != timed.end()) continue;  // one row per name
    timed.push_back(algo_math);
    const size_t need = prepare(h, d, p);  // this result's math type, set on the descriptor
    const float t = course::time_kernel_ms([&] { conv_forward(h, d, p.algo, x, f, y, ws, need); });
    char impl[128];
    std::snprintf(impl, sizeof(impl), "%s, %s", course::conv_fwd_algo_name(p.algo), math_name(p.mathType));
    std::printf("  %s: find rank %zu, %zu MiB workspace\n", impl, rank + 1, need >> 20);
    course::print_bench("conv 3x3, 32x64x56x56 -> 64, fp32 NCHW", impl, t, bytes, flops, first);
    first = false;
  }
  if (ws) CUDA_CHECK(cudaFree(ws));
  destroy(d);
  for (void* p : {(void*)x, (void*)f, (void*)y}) CUDA_CHECK(cudaFree(p));
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Sizes are bounded by the CPU reference's time.
  const ConvShape s{(int)args.get_int("--n", 2, 1, 64), (int)args.get_int("--c", 3, 1, 64),
                    (int)args.get_int("--h", 31, 1, 256), (int)args.get_int("--w", 29, 1, 256),
                    (int)args.get_int("--k", 5, 1, 64), (int)args.get_int("--r", 3, 1, 11),
                    (int)args.get_int("--pad", 1, 0, 5), (int)args.get_int("--stride", 1, 1, 8)};
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const std::string dump = args.get_str("--dump", "");  // a folder for x, w and y as raw float32
  const bool run_bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (plant && s.n < 2) {
    std::fprintf(stderr, "error: --plant zeros-small needs --n 2 or more (the quiet image is the second)\n");
    return course::kExitFail;
  }
  if (s.h + 2 * s.pad < s.r || s.w + 2 * s.pad < s.r) {
    std::fprintf(stderr, "error: the padded input (%dx%d) is smaller than the %dx%d filter\n", s.h + 2 * s.pad,
                 s.w + 2 * s.pad, s.r, s.r);
    return course::kExitFail;
  }
  // --8<-- [start:handle]
  cudnnHandle_t handle;
  CUDNN_CHECK(cudnnCreate(&handle));
  std::printf("cuDNN %zu (headers %d)\n", cudnnGetVersion(), CUDNN_VERSION);
  // --8<-- [end:handle]
  const bool ok = check(handle, s, seed, dump, plant);
  if (ok && run_bench) bench(handle, seed);
  CUDNN_CHECK(cudnnDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
