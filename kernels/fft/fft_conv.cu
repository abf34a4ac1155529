// fft_conv.cu: 2D convolution of an image with a filter: a direct kernel, through the FFT, and cuDNN's
// fastest algorithm, compared in the same run over filter sizes to find where the FFT starts to win.
//
// Taught in docs/fast-matmul-fft/fft-conv.md. "Full" linear convolution of an H x W image with an
// R x S filter: out[y][x] = sum_{i,j} img[y - i][x - j] * f[i][j], an (H+R-1) x (W+S-1) result, fp32.
//   direct  one thread per output, R*S multiply-adds, the filter in constant memory (a broadcast)
//   cuDNN   cudnnConvolutionForward with the algorithm cudnnFindConvolutionForwardAlgorithmEx measured
//           fastest (direct, implicit GEMM, FFT, tiled FFT or Winograd), twice: fp32 arithmetic only
//           (CUDNN_FMA_MATH, the peer), and cuDNN's default math, which may use TF32 tensor cores
//   fft     zero-pad both to P x Q >= (H+R-1) x (W+S-1) with small prime factors, real-to-complex
//           2D FFTs with cuFFT, pointwise product, inverse FFT, crop: O(PQ log PQ) whatever R*S is;
//           timed with the filter's spectrum computed in every call, and computed once beforehand (a
//           convolution layer's filter is fixed across calls)
// Build: nvcc -O3 -arch=native -o build/fft/fft_conv kernels/fft/fft_conv.cu -lcufft -lcudnn
// Run:   ./build/fft/fft_conv --h 37 --w 53 --r 5 --s 3   (checks all against a float64 direct sum)
//        ./build/fft/fft_conv --bench                     (2048 x 2048 image, filters 3 to 63)
//
// course: gpu
// course: libs cufft cudnn
// course: run --h 37 --w 53 --r 5 --s 3
// course: run --h 1 --w 1 --r 1 --s 1
// course: run --h 64 --w 45 --r 7 --s 8
// course: run --h 37 --w 53 --r 5 --s 3 --plant zeros-small
// course: run --h 64 --w 45 --r 7 --s 8 --plant zeros-small
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cudnn.cuh"
#include "../common/check_cufft.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kMaxFilter = 64;  // the constant-memory filter holds up to 64 x 64 floats (16 KiB)

static void conv_reference(int H, int W, int R, int S, const float* img, const float* f, double* out) {
  const int OH = H + R - 1, OW = W + S - 1;
  for (int y = 0; y < OH; ++y)
    for (int x = 0; x < OW; ++x) {
      double acc = 0.0;
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < S; ++j) {
          const int iy = y - i, ix = x - j;
          if (iy >= 0 && iy < H && ix >= 0 && ix < W) acc += static_cast<double>(img[iy * W + ix]) * f[i * S + j];
        }
      out[y * OW + x] = acc;
    }
}

// --8<-- [start:direct]
__constant__ float c_filter[kMaxFilter * kMaxFilter];

__global__ void conv_direct(const float* __restrict__ img, float* __restrict__ out, int H, int W, int R, int S) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  const int OH = H + R - 1, OW = W + S - 1;
  if (x >= OW || y >= OH) return;
  float acc = 0.0f;
  for (int i = 0; i < R; ++i) {
    const int iy = y - i;
    if (iy < 0 || iy >= H) continue;
    for (int j = 0; j < S; ++j) {
      const int ix = x - j;
      if (ix >= 0 && ix < W) acc += img[iy * W + ix] * c_filter[i * S + j];  // c_filter: same address warp-wide
    }
  }
  out[y * OW + x] = acc;
}
// --8<-- [end:direct]

// --8<-- [start:fft_kernels]
// Copy a rows x cols array into the top-left corner of a P x Q array of zeros (real, row-major).
__global__ void pad(const float* __restrict__ in, int rows, int cols, float* __restrict__ out, int P, int Q) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < Q && y < P) out[y * Q + x] = (y < rows && x < cols) ? in[y * cols + x] : 0.0f;
}
// Pointwise product of two half-spectra, with cuFFT's missing 1/(P*Q) normalisation folded in.
__global__ void multiply_spectra(cufftComplex* a, const cufftComplex* __restrict__ b, size_t n, float scale) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const cufftComplex u = a[i], v = b[i];
  a[i] = make_float2(scale * (u.x * v.x - u.y * v.y), scale * (u.x * v.y + u.y * v.x));
}
// Take the (H+R-1) x (W+S-1) corner of the P x Q result.
__global__ void crop(const float* __restrict__ in, int Q, float* __restrict__ out, int OH, int OW) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < OW && y < OH) out[y * OW + x] = in[y * Q + x];
}
// --8<-- [end:fft_kernels]

// The next size >= n whose only prime factors are 2, 3, 5 and 7: cuFFT is fastest on those.
static int next_fast_size(int n) {
  for (int m = n;; ++m) {
    int r = m;
    for (int p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

// --8<-- [start:fft_conv]
struct FftConv {
  int H, W, R, S, P, Q;
  cufftHandle fwd = 0, inv = 0;
  float *img_pad = nullptr, *f_pad = nullptr;
  cufftComplex *img_hat = nullptr, *f_hat = nullptr;
  size_t workspace = 0;  // cuFFT's scratch plus the padded arrays and spectra
  FftConv(int H_, int W_, int R_, int S_) : H(H_), W(W_), R(R_), S(S_) {
    P = next_fast_size(H + R - 1);
    Q = next_fast_size(W + S - 1);
    const size_t spectrum = static_cast<size_t>(P) * (Q / 2 + 1);  // R2C keeps half the spectrum
    CUFFT_CHECK(cufftPlan2d(&fwd, P, Q, CUFFT_R2C));
    CUFFT_CHECK(cufftPlan2d(&inv, P, Q, CUFFT_C2R));
    size_t ws_f = 0, ws_i = 0;
    CUFFT_CHECK(cufftGetSize(fwd, &ws_f));
    CUFFT_CHECK(cufftGetSize(inv, &ws_i));
    CUDA_CHECK(cudaMalloc(&img_pad, sizeof(float) * P * Q));
    CUDA_CHECK(cudaMalloc(&f_pad, sizeof(float) * P * Q));
    CUDA_CHECK(cudaMalloc(&img_hat, sizeof(cufftComplex) * spectrum));
    CUDA_CHECK(cudaMalloc(&f_hat, sizeof(cufftComplex) * spectrum));
    workspace = ws_f + ws_i + 2 * sizeof(float) * P * Q + 2 * sizeof(cufftComplex) * spectrum;
  }
  ~FftConv() {
    cufftDestroy(fwd);
    cufftDestroy(inv);
    cudaFree(img_pad);
    cudaFree(f_pad);
    cudaFree(img_hat);
    cudaFree(f_hat);
  }
  // The filter's spectrum: once per filter. A convolution layer applies one filter to many images.
  void set_filter(const float* filter) const {
    const dim3 block(32, 8), grid_pq(course::ceil_div(Q, 32), course::ceil_div(P, 8));
    pad<<<grid_pq, block>>>(filter, R, S, f_pad, P, Q);
    CUDA_CHECK_LAUNCH();
    CUFFT_CHECK(cufftExecR2C(fwd, f_pad, f_hat));
  }
  // The convolution of one image with the filter whose spectrum set_filter computed.
  void apply(const float* img, float* out) const {
    const dim3 block(32, 8), grid_pq(course::ceil_div(Q, 32), course::ceil_div(P, 8));
    pad<<<grid_pq, block>>>(img, H, W, img_pad, P, Q);
    CUDA_CHECK_LAUNCH();
    CUFFT_CHECK(cufftExecR2C(fwd, img_pad, img_hat));
    const size_t spectrum = static_cast<size_t>(P) * (Q / 2 + 1);
    multiply_spectra<<<static_cast<unsigned>(course::ceil_div<size_t>(spectrum, 256)), 256>>>(
        img_hat, f_hat, spectrum, 1.0f / (static_cast<float>(P) * Q));
    CUDA_CHECK_LAUNCH();
    CUFFT_CHECK(cufftExecC2R(inv, img_hat, img_pad));  // the product's inverse, back into img_pad
    const int OH = H + R - 1, OW = W + S - 1;
    crop<<<dim3(course::ceil_div(OW, 32), course::ceil_div(OH, 8)), block>>>(img_pad, Q, out, OH, OW);
    CUDA_CHECK_LAUNCH();
  }
  void operator()(const float* img, const float* filter, float* out) const {  // both, every call
    set_filter(filter);
    apply(img, out);
  }
};
// --8<-- [end:fft_conv]

static void launch_direct(const float* img, float* out, int H, int W, int R, int S) {
  const dim3 block(32, 8), grid(course::ceil_div(W + S - 1, 32), course::ceil_div(H + R - 1, 8));
  conv_direct<<<grid, block>>>(img, out, H, W, R, S);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:cudnn]
// cuDNN computes the same full convolution of a 1-channel image with one filter: padding R-1 and S-1,
// and CUDNN_CONVOLUTION, which flips the filter as the definition above does (CROSS_CORRELATION, what
// deep-learning layers compute, would not). cudnnFindConvolutionForwardAlgorithmEx runs every algorithm
// cuDNN has for the shape and returns them fastest first; the fastest that succeeded is kept, with the
// math type it ran with. Its workspace is allocated here, outside every timed region.
struct CudnnConv {
  cudnnHandle_t h;
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnFilterDescriptor_t f_desc = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgoPerf_t choice{};
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // math: CUDNN_FMA_MATH (fp32 arithmetic only) or CUDNN_DEFAULT_MATH (TF32 tensor cores allowed).
  CudnnConv(cudnnHandle_t handle, int H, int W, int R, int S, cudnnMathType_t math) : h(handle) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&f_desc));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, H, W));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(f_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, R, S));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, R - 1, S - 1, 1, 1, 1, 1, CUDNN_CONVOLUTION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
    int n = 0, c = 0, oh = 0, ow = 0;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x_desc, f_desc, &n, &c, &oh, &ow));
    if (n != 1 || c != 1 || oh != H + R - 1 || ow != W + S - 1) {
      std::fprintf(stderr, "error: cuDNN's output shape %dx%d differs from the full convolution's %dx%d\n", oh, ow,
                   H + R - 1, W + S - 1);
      std::exit(course::kExitFail);
    }
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, oh, ow));
    int max_algos = 0, got = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_algos));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_algos));
    {
      // FindEx runs the algorithms on buffers we give it, filled with random values: plain
      // cudnnFindConvolutionForwardAlgorithm allocates its own and leaves them uninitialised, which
      // compute-sanitizer's initcheck reports. Its workspace: the most any algorithm asks for.
      CUDNN_CHECK(
          cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc, f_desc, conv, y_desc, max_algos, &got, perf.data()));
      size_t find_ws = 0;
      for (int i = 0; i < got; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) find_ws = std::max(find_ws, perf[i].memory);
      std::vector<float> hx(static_cast<size_t>(H) * W), hf(static_cast<size_t>(R) * S);
      course::fill_uniform(hx, 1);
      course::fill_uniform(hf, 2);
      float *x = nullptr, *f = nullptr, *y = nullptr;
      void* ws = nullptr;
      CUDA_CHECK(cudaMalloc(&x, hx.size() * sizeof(float)));
      CUDA_CHECK(cudaMalloc(&f, hf.size() * sizeof(float)));
      CUDA_CHECK(cudaMalloc(&y, static_cast<size_t>(oh) * ow * sizeof(float)));
      if (find_ws) CUDA_CHECK(cudaMalloc(&ws, find_ws));
      CUDA_CHECK(cudaMemcpy(x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(f, hf.data(), hf.size() * sizeof(float), cudaMemcpyHostToDevice));
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, x_desc, x, f_desc, f, conv, y_desc, y, max_algos, &got,
                                                         perf.data(), ws, find_ws));
      CUDA_CHECK(cudaFree(x));
      CUDA_CHECK(cudaFree(f));
      CUDA_CHECK(cudaFree(y));
      if (ws) CUDA_CHECK(cudaFree(ws));
    }
    int best = -1;
    for (int i = 0; i < got && best < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS) best = i;
    if (best < 0) {
      std::fprintf(stderr, "error: no cuDNN algorithm ran for a %dx%d image and a %dx%d filter\n", H, W, R, S);
      std::exit(course::kExitFail);
    }
    choice = perf[best];
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv, choice.mathType));  // run it as it was measured
    CUDNN_CHECK(
        cudnnGetConvolutionForwardWorkspaceSize(h, x_desc, f_desc, conv, y_desc, choice.algo, &workspace_bytes));
    workspace_bytes = std::max(workspace_bytes, choice.memory);
    if (workspace_bytes) CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  }
  ~CudnnConv() {
    cudaFree(workspace);
    cudnnDestroyTensorDescriptor(x_desc);
    cudnnDestroyTensorDescriptor(y_desc);
    cudnnDestroyFilterDescriptor(f_desc);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  void operator()(const float* img, const float* filter, float* out) const {
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnConvolutionForward(h, &one, x_desc, img, f_desc, filter, conv, choice.algo, workspace,
                                        workspace_bytes, &zero, y_desc, out));
  }
  const char* math_name() const {
    return choice.mathType == CUDNN_FMA_MATH         ? "FMA"
           : choice.mathType == CUDNN_TENSOR_OP_MATH ? "TENSOR_OP"
                                                     : "DEFAULT";
  }
};
// --8<-- [end:cudnn]

struct Buffers {
  float *img = nullptr, *filter = nullptr, *out = nullptr;
  Buffers(const std::vector<float>& im, const std::vector<float>& f, size_t n_out) {
    CUDA_CHECK(cudaMalloc(&img, im.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&filter, f.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&out, n_out * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(img, im.data(), im.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(filter, f.data(), f.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpyToSymbol(c_filter, f.data(), f.size() * sizeof(float)));
  }
  ~Buffers() {
    cudaFree(img);
    cudaFree(filter);
    cudaFree(out);
  }
};

// --8<-- [start:tolerance]
// Two kinds of rounding, two bounds, added per output (a fixed 1e-4 sqrt(RS), or for TF32 3e-3 sqrt(RS),
// let the small outputs of a dark part of the image come back as zeros):
//   through the FFT, rounding is spread over every output: about u log2(PQ) |img|_2 |f|_2 / sqrt(PQ)
//   each (u = 2^-24), allowed 40 times over, from this image's and filter's norms (PQ >= OH OW);
//   a direct sum's rounding stays in each output's own sum: course::sum_atol from sum |img f| of that
//   output, with 2^-10 for the inputs where TF32 may round them (cuDNN's default math).
// cuDNN's algorithms include FFTs and direct or implicit-GEMM sums, so its checks get both.
static double fft_atol(const std::vector<float>& img, const std::vector<float>& f, size_t n_out) {
  double ni = 0, nf = 0;
  for (float v : img) ni += static_cast<double>(v) * v;
  for (float v : f) nf += static_cast<double>(v) * v;
  const double n = static_cast<double>(n_out);
  return 40 * 0x1p-24 * (std::log2(4 * n) + 1) * std::sqrt(ni * nf / n);
}

static std::vector<double> conv_atol(const std::vector<double>& sum_abs, int R, int S, double fft_part, double u_in) {
  std::vector<double> atol = course::sum_atol(sum_abs, static_cast<long long>(R) * S, 0x1p-23, u_in);
  for (double& a : atol) a += fft_part;
  return atol;
}
// --8<-- [end:tolerance]

// The image's lower half 2^10 times darker (an exact scaling): outputs whose window lies in it are small,
// and each check must hold them to what its method can resolve.
static void darken_lower_half(std::vector<float>& img, int H, int W) {
  for (int y = std::max(1, H / 2); y < H; ++y)
    for (int x = 0; x < W; ++x) img[static_cast<size_t>(y) * W + x] *= 0x1p-10f;
}

constexpr double kOldFftAtol = 1e-4;  // times sqrt(RS): what --plant zeros-small zeroes below

// Runs `launch` on a NaN-poisoned output and compares it with `want`, one atol per output; with
// plant_below > 0 (--plant zeros-small) also on the output with zeros below it.
template <typename F, typename T>
static bool check_one(const char* what, int H, int W, int R, int S, const T* want, float* d_out, size_t n_out,
                      double rtol, const std::vector<double>& atol, double plant_below, F&& launch) {
  std::vector<float> got(n_out);
  course::poison(d_out, n_out * sizeof(float));
  launch();
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  char name[96];
  std::snprintf(name, sizeof(name), "%s_%dx%d_f%dx%d", what, H, W, R, S);
  return course::check_close_each_planted(name, got.data(), want, atol.data(), n_out, rtol, plant_below);
}

static bool check(cudnnHandle_t h, int H, int W, int R, int S, uint64_t seed, bool plant) {
  std::vector<float> img(static_cast<size_t>(H) * W), f(static_cast<size_t>(R) * S);
  course::fill_uniform(img, seed);
  course::fill_uniform(f, seed + 1);
  darken_lower_half(img, H, W);
  const size_t n_out = static_cast<size_t>(H + R - 1) * (W + S - 1);
  std::vector<double> want(n_out), sum_abs(n_out);
  conv_reference(H, W, R, S, img.data(), f.data(), want.data());
  conv_reference(H, W, R, S, course::abs_values(img).data(), course::abs_values(f).data(), sum_abs.data());
  const double fft_part = fft_atol(img, f, n_out);
  const std::vector<double> direct_atol = conv_atol(sum_abs, R, S, 0, 0),
                            fft_and_sum = conv_atol(sum_abs, R, S, fft_part, 0),
                            tf32_atol = conv_atol(sum_abs, R, S, fft_part, 0x1p-10);
  // --plant zeros-small: zeros below each check's old fixed atol
  const double old_fft = plant ? kOldFftAtol * std::sqrt(static_cast<double>(R) * S) : 0;
  const double old_direct = plant ? 1e-6 * R * S : 0,
               old_tf32 = plant ? 3e-3 * std::sqrt(static_cast<double>(R) * S) + 1e-3 : 0;
  Buffers b(img, f, n_out);
  const double* w = want.data();
  bool ok = check_one("conv_direct", H, W, R, S, w, b.out, n_out, 0, direct_atol, old_direct,
                      [&] { launch_direct(b.img, b.out, H, W, R, S); });
  const FftConv fft(H, W, R, S);
  ok &= check_one("conv_fft", H, W, R, S, w, b.out, n_out, 0, fft_and_sum, old_fft,
                  [&] { fft(b.img, b.filter, b.out); });
  const FftConv fft_pre(H, W, R, S);  // a fresh plan: the spectrum comes from set_filter alone
  fft_pre.set_filter(b.filter);
  ok &= check_one("conv_fft_precomputed_filter", H, W, R, S, w, b.out, n_out, 0, fft_and_sum, old_fft,
                  [&] { fft_pre.apply(b.img, b.out); });
  const CudnnConv fp32(h, H, W, R, S, CUDNN_FMA_MATH);
  ok &= check_one("conv_cudnn_fp32", H, W, R, S, w, b.out, n_out, 0, fft_and_sum, old_fft,
                  [&] { fp32(b.img, b.filter, b.out); });
  const CudnnConv tf32(h, H, W, R, S, CUDNN_DEFAULT_MATH);
  ok &= check_one("conv_cudnn_default_math", H, W, R, S, w, b.out, n_out, 0, tf32_atol, old_tf32,
                  [&] { tf32(b.img, b.filter, b.out); });
  return ok;
}

// --8<-- [start:bench]
// Every row is checked against the direct kernel's output on the same inputs before it is timed; the
// filter's spectrum for the "precomputed" row and cuDNN's algorithm choice and workspace are made
// before the timed runs, as a convolution layer would make them once.
static bool bench_filter(cudnnHandle_t h, int H, int W, int R, uint64_t seed) {
  std::vector<float> img(static_cast<size_t>(H) * W), f(static_cast<size_t>(R) * R);
  course::fill_uniform(img, seed);
  course::fill_uniform(f, seed + 1);
  darken_lower_half(img, H, W);
  const int OH = H + R - 1, OW = W + R - 1;
  const size_t n_out = static_cast<size_t>(OH) * OW;
  std::vector<float> direct(n_out), sum_abs_f(n_out);
  {  // sum |img f| of every output, from the direct kernel on |img| and |f| (its own rounding is far
     // below the tolerance it sets)
    Buffers a(course::abs_values(img), course::abs_values(f), n_out);
    launch_direct(a.img, a.out, H, W, R, R);
    CUDA_CHECK(cudaMemcpy(sum_abs_f.data(), a.out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  }
  Buffers b(img, f, n_out);  // after `a`: it puts f itself back in constant memory
  launch_direct(b.img, b.out, H, W, R, R);
  CUDA_CHECK(cudaMemcpy(direct.data(), b.out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  // The reference is the direct kernel's fp32 output: its own rounding (the direct bound) is added.
  const std::vector<double> sum_abs(sum_abs_f.begin(), sum_abs_f.end());
  const double fft_part = fft_atol(img, f, n_out);
  std::vector<double> fft_and_sum = conv_atol(sum_abs, R, R, fft_part, 0),
                      tf32_atol = conv_atol(sum_abs, R, R, fft_part, 0x1p-10);
  const std::vector<double> direct_atol = conv_atol(sum_abs, R, R, 0, 0);
  for (size_t i = 0; i < n_out; ++i) fft_and_sum[i] += direct_atol[i], tf32_atol[i] += direct_atol[i];
  const FftConv fft(H, W, R, R);
  const CudnnConv fp32(h, H, W, R, R, CUDNN_FMA_MATH), dflt(h, H, W, R, R, CUDNN_DEFAULT_MATH);
  std::printf("CUDNN filter=%d fp32: %s (%s math), default math: %s (%s math)\n", R,
              course::conv_fwd_algo_name(fp32.choice.algo), fp32.math_name(),
              course::conv_fwd_algo_name(dflt.choice.algo), dflt.math_name());
  const float* want = direct.data();
  bool ok = true;
  ok &= check_one("conv_fft_vs_direct", H, W, R, R, want, b.out, n_out, 0, fft_and_sum, 0,
                  [&] { fft(b.img, b.filter, b.out); });
  fft.set_filter(b.filter);
  ok &= check_one("conv_fft_precomputed_vs_direct", H, W, R, R, want, b.out, n_out, 0, fft_and_sum, 0,
                  [&] { fft.apply(b.img, b.out); });
  ok &= check_one("conv_cudnn_fp32_vs_direct", H, W, R, R, want, b.out, n_out, 0, fft_and_sum, 0,
                  [&] { fp32(b.img, b.filter, b.out); });
  ok &= check_one("conv_cudnn_default_vs_direct", H, W, R, R, want, b.out, n_out, 0, tf32_atol, 0,
                  [&] { dflt(b.img, b.filter, b.out); });
  char cs[64];
  std::snprintf(cs, sizeof(cs), "conv %dx%d image, %dx%d filter", H, W, R, R);
  const double bytes = sizeof(float) * (static_cast<double>(H) * W + R * R + n_out);
  // the direct method's: each input meets each tap once
  const double flops = 2.0 * H * static_cast<double>(W) * R * R;
  const float t_direct = course::time_kernel_ms([&] { launch_direct(b.img, b.out, H, W, R, R); });
  const float t_fp32 = course::time_kernel_ms([&] { fp32(b.img, b.filter, b.out); });
  const float t_dflt = course::time_kernel_ms([&] { dflt(b.img, b.filter, b.out); });
  const float t_fft = course::time_kernel_ms([&] { fft(b.img, b.filter, b.out); });
  fft.set_filter(b.filter);  // the timed calls below reuse this spectrum
  const float t_pre = course::time_kernel_ms([&] { fft.apply(b.img, b.out); });
  // size: the filter side (the plots' x axis); workspace: device memory beyond the operands
  const auto row = [&](const char* impl, float ms, bool peer, double ws) {
    course::print_bench(cs, impl, ms, bytes, flops, peer,
                        {{"size", R}, {"workspace_bytes", ws}, {"peak_bytes", bytes + ws}});
  };
  const double fft_ws = static_cast<double>(fft.workspace);
  row("direct (one thread per output)", t_direct, false, 0.0);
  row("cuDNN fp32 (fastest algorithm, FMA math)", t_fp32, true, static_cast<double>(fp32.workspace_bytes));
  row("cuDNN default math (TF32 allowed)", t_dflt, false, static_cast<double>(dflt.workspace_bytes));
  row("FFT (cuFFT), filter spectrum in every call", t_fft, false, fft_ws);
  row("FFT (cuFFT), filter spectrum precomputed", t_pre, false, fft_ws);
  return ok;
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long H = args.get_int("--h", 37, 1, 4096), W = args.get_int("--w", 53, 1, 4096);
  const long long R = args.get_int("--r", 5, 1, kMaxFilter), S = args.get_int("--s", 3, 1, kMaxFilter);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (plant && H < 4) {
    std::fprintf(stderr, "error: --plant zeros-small needs --h 4 or more (the image's dark lower half)\n");
    return course::kExitFail;
  }
  CUDA_CHECK(cudaFree(nullptr));  // a missing GPU is reported by CUDA, before cuDNN is asked for a handle
  cudnnHandle_t h = nullptr;
  CUDNN_CHECK(cudnnCreate(&h));
  bool ok = check(h, static_cast<int>(H), static_cast<int>(W), static_cast<int>(R), static_cast<int>(S), seed, plant);
  if (ok && bench)
    for (int r : {3, 5, 9, 17, 33, 63}) ok &= bench_filter(h, 2048, 2048, r, seed + 10);
  CUDNN_CHECK(cudnnDestroy(h));
  return ok ? 0 : course::kExitFail;
}
