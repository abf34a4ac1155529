// fft_conv.cu: 2D convolution of an image with a filter, directly and through the FFT, compared in
// the same run over filter sizes to find where the FFT starts to win.
//
// Taught in docs/fast-matmul-fft/fft-conv.md. "Full" linear convolution of an H x W image with an
// R x S filter: out[y][x] = sum_{i,j} img[y - i][x - j] * f[i][j], an (H+R-1) x (W+S-1) result.
//   direct  one thread per output, R*S multiply-adds, the filter in constant memory (a broadcast)
//   fft     zero-pad both to P x Q >= (H+R-1) x (W+S-1) with small prime factors, real-to-complex
//           2D FFTs with cuFFT, pointwise product, inverse FFT, crop: O(PQ log PQ) whatever R*S is
// Build: nvcc -O3 -arch=native -lcufft -o build/fft/fft_conv kernels/fft/fft_conv.cu
// Run:   ./build/fft/fft_conv --h 37 --w 53 --r 5 --s 3   (checks both against a float64 direct sum)
//        ./build/fft/fft_conv --bench                     (2048 x 2048 image, filters 3 to 63)
//
// course: gpu
// course: libs cufft
// course: run --h 37 --w 53 --r 5 --s 3
// course: run --h 1 --w 1 --r 1 --s 1
// course: run --h 64 --w 45 --r 7 --s 8
// course: bench --bench
#include <cufft.h>

#include "../common/course.cuh"

#define CUFFT_CHECK(call)                                                                            \
  do {                                                                                               \
    cufftResult r_ = (call);                                                                         \
    if (r_ != CUFFT_SUCCESS) {                                                                       \
      std::fprintf(stderr, "cuFFT error %d at %s:%d in %s\n", static_cast<int>(r_), __FILE__, __LINE__, \
                   #call);                                                                           \
      std::exit(course::kExitFail);                                                                  \
    }                                                                                                \
  } while (0)

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
  void operator()(const float* img, const float* filter, float* out) const {
    const dim3 block(32, 8), grid_pq(course::ceil_div(Q, 32), course::ceil_div(P, 8));
    pad<<<grid_pq, block>>>(img, H, W, img_pad, P, Q);
    CUDA_CHECK_LAUNCH();
    pad<<<grid_pq, block>>>(filter, R, S, f_pad, P, Q);
    CUDA_CHECK_LAUNCH();
    CUFFT_CHECK(cufftExecR2C(fwd, img_pad, img_hat));
    CUFFT_CHECK(cufftExecR2C(fwd, f_pad, f_hat));
    const size_t spectrum = static_cast<size_t>(P) * (Q / 2 + 1);
    multiply_spectra<<<static_cast<unsigned>(course::ceil_div<size_t>(spectrum, 256)), 256>>>(
        img_hat, f_hat, spectrum, 1.0f / (static_cast<float>(P) * Q));
    CUDA_CHECK_LAUNCH();
    CUFFT_CHECK(cufftExecC2R(inv, img_hat, img_pad));  // the product's inverse, back into img_pad
    const int OH = H + R - 1, OW = W + S - 1;
    crop<<<dim3(course::ceil_div(OW, 32), course::ceil_div(OH, 8)), block>>>(img_pad, Q, out, OH, OW);
    CUDA_CHECK_LAUNCH();
  }
};
// --8<-- [end:fft_conv]

static void launch_direct(const float* img, float* out, int H, int W, int R, int S) {
  const dim3 block(32, 8), grid(course::ceil_div(W + S - 1, 32), course::ceil_div(H + R - 1, 8));
  conv_direct<<<grid, block>>>(img, out, H, W, R, S);
  CUDA_CHECK_LAUNCH();
}

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

// FFT convolution's error is absolute, relative to the size of the signals, not to each output.
static double fft_atol(int R, int S) { return 1e-4 * std::sqrt(static_cast<double>(R) * S); }

static bool check(int H, int W, int R, int S, uint64_t seed) {
  std::vector<float> img(static_cast<size_t>(H) * W), f(static_cast<size_t>(R) * S);
  course::fill_uniform(img, seed);
  course::fill_uniform(f, seed + 1);
  const size_t n_out = static_cast<size_t>(H + R - 1) * (W + S - 1);
  std::vector<double> want(n_out);
  conv_reference(H, W, R, S, img.data(), f.data(), want.data());
  Buffers b(img, f, n_out);
  std::vector<float> got(n_out);
  char name[64];
  course::poison(b.out, n_out * sizeof(float));
  launch_direct(b.img, b.out, H, W, R, S);
  CUDA_CHECK(cudaMemcpy(got.data(), b.out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  std::snprintf(name, sizeof(name), "conv_direct_%dx%d_f%dx%d", H, W, R, S);
  bool ok = course::check_close(name, got.data(), want.data(), n_out, 1e-5, 1e-6 * R * S);
  const FftConv fft(H, W, R, S);
  course::poison(b.out, n_out * sizeof(float));
  fft(b.img, b.filter, b.out);
  CUDA_CHECK(cudaMemcpy(got.data(), b.out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  std::snprintf(name, sizeof(name), "conv_fft_%dx%d_f%dx%d", H, W, R, S);
  ok &= course::check_close(name, got.data(), want.data(), n_out, 1e-4, fft_atol(R, S));
  return ok;
}

// --8<-- [start:bench]
static bool bench_filter(int H, int W, int R, uint64_t seed) {
  std::vector<float> img(static_cast<size_t>(H) * W), f(static_cast<size_t>(R) * R);
  course::fill_uniform(img, seed);
  course::fill_uniform(f, seed + 1);
  const int OH = H + R - 1, OW = W + R - 1;
  const size_t n_out = static_cast<size_t>(OH) * OW;
  Buffers b(img, f, n_out);
  std::vector<float> direct(n_out), via_fft(n_out);
  launch_direct(b.img, b.out, H, W, R, R);
  CUDA_CHECK(cudaMemcpy(direct.data(), b.out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  const FftConv fft(H, W, R, R);
  course::poison(b.out, n_out * sizeof(float));
  fft(b.img, b.filter, b.out);
  CUDA_CHECK(cudaMemcpy(via_fft.data(), b.out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
  char name[64], cs[64];
  std::snprintf(name, sizeof(name), "conv_fft_vs_direct_f%d", R);
  const bool ok = course::check_close(name, via_fft.data(), direct.data(), n_out, 1e-4, fft_atol(R, R));
  std::snprintf(cs, sizeof(cs), "conv %dx%d image, %dx%d filter", H, W, R, R);
  const double bytes = sizeof(float) * (static_cast<double>(H) * W + R * R + n_out);
  const double flops_direct = 2.0 * H * static_cast<double>(W) * R * R;  // each input meets each tap once
  const float t_direct = course::time_kernel_ms([&] { launch_direct(b.img, b.out, H, W, R, R); });
  const float t_fft = course::time_kernel_ms([&] { fft(b.img, b.filter, b.out); });
  const char* fmt =
      "BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": %s, \"size\": %d, \"workspace_bytes\": %.0f, \"peak_bytes\": %.0f}\n";
  std::printf(fmt, cs, "direct", t_direct, bytes, flops_direct, "true", R, 0.0, bytes);
  std::printf(fmt, cs, "FFT (cuFFT)", t_fft, bytes, flops_direct, "false", R, static_cast<double>(fft.workspace),
              bytes + fft.workspace);
  std::fflush(stdout);
  return ok;
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long H = args.get_int("--h", 37), W = args.get_int("--w", 53);
  const long long R = args.get_int("--r", 5), S = args.get_int("--s", 3);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  if (H < 1 || W < 1 || H > 4096 || W > 4096 || R < 1 || S < 1 || R > kMaxFilter || S > kMaxFilter) {
    std::fprintf(stderr, "error: image 1..4096 on each side, filter 1..%d on each side\n", kMaxFilter);
    return course::kExitFail;
  }
  bool ok = check(static_cast<int>(H), static_cast<int>(W), static_cast<int>(R), static_cast<int>(S), seed);
  if (ok && args.has("--bench"))
    for (int r : {3, 5, 9, 17, 33, 63}) ok &= bench_filter(2048, 2048, r, seed + 10);
  return ok ? 0 : course::kExitFail;
}
