// cufft_transforms.cu: cuFFT's 1D and 2D, complex and real transforms with batched plans, checked
// against a DFT computed by definition, and a convolution done through FFTs checked against the
// direct sum.
//
// Taught in docs/libraries/cufft.md.
// Build: nvcc -O3 -arch=native -o build/libraries/cufft_transforms kernels/libraries/cufft_transforms.cu -lcufft
// Run:   ./build/libraries/cufft_transforms                 (checks every transform on odd sizes)
//        ./build/libraries/cufft_transforms --bench         (times batched FFTs and FFT convolution)
//
// course: gpu
// course: libs cufft
// course: run --n 997 --batch 3 --nx 37 --ny 20 --taps 31
// course: run --n 1 --batch 1 --nx 1 --ny 1 --taps 1
// course: run --n 1024 --batch 2 --nx 64 --ny 48 --taps 200
// course: run --n 997 --batch 3 --nx 37 --ny 20 --taps 31 --plant zeros-small
// course: run --n 1024 --batch 2 --nx 64 --ny 48 --taps 200 --plant zeros-small
// course: bench --bench
#include <complex>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cufft.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

using cd = std::complex<double>;
const double kPi = 3.14159265358979323846;

// --8<-- [start:dft]
// The DFT by definition, O(n^2): X[k] = sum_j x[j] exp(-2 pi i j k / n). cuFFT computes the same
// sums in O(n log n) and, like this function, does not divide by n in either direction.
static void dft(const cd* x, cd* X, int n, int stride = 1) {
  for (int k = 0; k < n; ++k) {
    cd acc = 0;
    for (int j = 0; j < n; ++j)
      acc += x[(size_t)j * stride] * std::polar(1.0, -2.0 * kPi * (double)(((long long)j * k) % n) / n);
    X[(size_t)k * stride] = acc;
  }
}
// --8<-- [end:dft]

static std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  course::fill_uniform(v, seed);
  return v;
}

template <typename T>
static T* dalloc(size_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  course::poison(p, n * sizeof(T));
  return p;
}

// n random floats from the host into device memory at d (benchmark inputs: never zeros).
static void upload(float* d, size_t n, uint64_t seed) {
  const std::vector<float> v = random_floats(n, seed);
  CUDA_CHECK(cudaMemcpy(d, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}

// --8<-- [start:tolerance]
// A float32 FFT's rounding moves every output of a transform by about u log2(n) times the norm of the
// transform's input (u = 2^-24), whatever that output's own size, so each transform gets an absolute
// tolerance from its own input: 40 u (log2 n + 1) |x|_2, which is the fixed tolerance this check once
// used, 2e-6 sqrt(n) (log2 n + 1), on inputs in [-1, 1), but follows the data: a quiet transform in the
// batch gets a small one, where the fixed one let it pass as zeros. Returns one atol per complex output:
// `batch` transforms of `in_len` inputs and `out_len` outputs each.
template <typename In>
static std::vector<double> transform_atol(const std::vector<In>& in, size_t in_len, size_t out_len, int batch,
                                          double n_points) {
  std::vector<double> atol(out_len * batch);
  for (int b = 0; b < batch; ++b) {
    double norm2 = 0;
    for (size_t j = 0; j < in_len; ++j) norm2 += std::norm(cd(in[(size_t)b * in_len + j]));
    const double tol = 40 * 0x1p-24 * (std::log2(n_points) + 1) * std::sqrt(norm2);
    std::fill(atol.begin() + (size_t)b * out_len, atol.begin() + (size_t)(b + 1) * out_len, tol);
  }
  return atol;
}
// --8<-- [end:tolerance]

// Compare a cufftComplex array with a std::complex<double> reference as 2n floats; atol: one per
// complex value (transform_atol). `plant` zeroes the small outputs first (--plant zeros-small).
static bool check_complex(const char* name, const std::vector<cufftComplex>& got, const std::vector<cd>& want,
                          const std::vector<double>& atol, double plant_below = 0, size_t* planted = nullptr) {
  std::vector<float> g(2 * got.size());
  std::vector<double> w(2 * want.size()), a(2 * atol.size());
  for (size_t i = 0; i < got.size(); ++i) { g[2 * i] = got[i].x; g[2 * i + 1] = got[i].y; }
  for (size_t i = 0; i < want.size(); ++i) { w[2 * i] = want[i].real(); w[2 * i + 1] = want[i].imag(); }
  for (size_t i = 0; i < atol.size(); ++i) a[2 * i] = a[2 * i + 1] = atol[i];
  if (planted) *planted = course::plant_zeros_small(g.data(), w.data(), g.size(), plant_below);
  return course::check_close_each(name, g.data(), w.data(), a.data(), g.size(), 1e-5);
}

static bool check_1d(int n, int batch, uint64_t seed, bool plant) {
  bool ok = true;
  // --8<-- [start:c2c_1d]
  // batch transforms of n points each, stored one after the other: one plan, one call.
  cufftHandle plan;
  CUFFT_CHECK(cufftPlan1d(&plan, n, CUFFT_C2C, batch));
  // --8<-- [end:c2c_1d]
  std::vector<float> raw = random_floats(2 * (size_t)n * batch, seed);
  // Every third transform is 2^20 times quieter (an exact scaling): a batch mixes loud and quiet signals.
  for (int b = 1; b < batch; b += 3)
    for (size_t i = 2 * (size_t)b * n; i < 2 * (size_t)(b + 1) * n; ++i) raw[i] *= 0x1p-20f;
  std::vector<cufftComplex> x((size_t)n * batch), y(x.size());
  std::vector<cd> xc(x.size()), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) { x[i] = {raw[2 * i], raw[2 * i + 1]}; xc[i] = {raw[2 * i], raw[2 * i + 1]}; }
  for (int b = 0; b < batch; ++b) dft(xc.data() + (size_t)b * n, want.data() + (size_t)b * n, n);
  cufftComplex *dx = dalloc<cufftComplex>(x.size()), *dy = dalloc<cufftComplex>(x.size());
  CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(cufftComplex), cudaMemcpyHostToDevice));
  CUFFT_CHECK(cufftExecC2C(plan, dx, dy, CUFFT_FORWARD));  // out of place; in place also works
  CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  const std::vector<double> atol = transform_atol(xc, n, n, batch, n);
  ok &= check_complex("fft_1d_c2c_batched", y, want, atol);
  if (plant) {  // the same check, quietly, with zeros where the output is below the old fixed tolerance
    size_t planted = 0;
    const double old_tol = 2e-6 * std::sqrt((double)n) * (std::log2((double)n) + 1);
    const bool passed =
        course::verdict_quietly([&] { return check_complex("planted", y, want, atol, old_tol, &planted); });
    ok &= course::report_planted_zeros_small(planted, passed);
  }
  // Inverse of the forward result is n times the input: cuFFT does not normalise. Its input is the
  // forward result, sqrt(n) times the norm of x: so is its tolerance.
  CUFFT_CHECK(cufftExecC2C(plan, dy, dy, CUFFT_INVERSE));
  CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  for (auto& v : xc) v *= (double)n;
  ok &= check_complex("fft_1d_inverse_is_n_times_input", y, xc, transform_atol(want, n, n, batch, n));
  CUFFT_CHECK(cufftDestroy(plan));

  // --8<-- [start:r2c_1d]
  // A real signal's spectrum is Hermitian, X[n-k] = conj(X[k]), so R2C stores only the
  // n/2 + 1 non-redundant values per transform.
  const int nc = n / 2 + 1;
  CUFFT_CHECK(cufftPlan1d(&plan, n, CUFFT_R2C, batch));
  // --8<-- [end:r2c_1d]
  const std::vector<float> xr = random_floats((size_t)n * batch, seed + 1);
  std::vector<cufftComplex> yr((size_t)nc * batch);
  std::vector<cd> full(n), wantr((size_t)nc * batch), xin(n);
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < n; ++j) xin[j] = xr[(size_t)b * n + j];
    dft(xin.data(), full.data(), n);
    for (int k = 0; k < nc; ++k) wantr[(size_t)b * nc + k] = full[k];
  }
  float* dr = dalloc<float>(xr.size());
  cufftComplex* dc = dalloc<cufftComplex>(yr.size());
  CUDA_CHECK(cudaMemcpy(dr, xr.data(), xr.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUFFT_CHECK(cufftExecR2C(plan, dr, dc));
  CUDA_CHECK(cudaMemcpy(yr.data(), dc, yr.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  ok &= check_complex("fft_1d_r2c_batched", yr, wantr, transform_atol(xr, n, nc, batch, n));
  CUFFT_CHECK(cufftDestroy(plan));
  for (void* p : {(void*)dx, (void*)dy, (void*)dr, (void*)dc}) CUDA_CHECK(cudaFree(p));
  return ok;
}

static bool check_2d(int nx, int ny, uint64_t seed) {
  bool ok = true;
  // Reference: a 2D DFT is 1D DFTs along every row, then along every column.
  const std::vector<float> xr = random_floats((size_t)nx * ny, seed + 2);
  std::vector<cd> a(xr.begin(), xr.end()), b(a.size()), want(a.size());
  for (int i = 0; i < nx; ++i) dft(a.data() + (size_t)i * ny, b.data() + (size_t)i * ny, ny);
  for (int j = 0; j < ny; ++j) dft(b.data() + j, want.data() + j, nx, ny);
  // --8<-- [start:r2c_2d]
  // 2D real-to-complex on a row-major nx-by-ny array (ny varies fastest): the output keeps
  // ny/2 + 1 columns. The first size argument is the slowest-varying dimension.
  cufftHandle plan;
  CUFFT_CHECK(cufftPlan2d(&plan, nx, ny, CUFFT_R2C));
  const int nyc = ny / 2 + 1;
  // --8<-- [end:r2c_2d]
  float* dr = dalloc<float>(xr.size());
  cufftComplex* dc = dalloc<cufftComplex>((size_t)nx * nyc);
  CUDA_CHECK(cudaMemcpy(dr, xr.data(), xr.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUFFT_CHECK(cufftExecR2C(plan, dr, dc));
  std::vector<cufftComplex> y((size_t)nx * nyc);
  CUDA_CHECK(cudaMemcpy(y.data(), dc, y.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  std::vector<cd> wanth((size_t)nx * nyc);
  for (int i = 0; i < nx; ++i)
    for (int j = 0; j < nyc; ++j) wanth[(size_t)i * nyc + j] = want[(size_t)i * ny + j];
  ok &= check_complex("fft_2d_r2c", y, wanth, transform_atol(xr, xr.size(), y.size(), 1, (double)nx * ny));
  CUFFT_CHECK(cufftDestroy(plan));

  // 2D complex-to-complex on the same data (imaginary parts zero): the full nx-by-ny spectrum.
  CUFFT_CHECK(cufftPlan2d(&plan, nx, ny, CUFFT_C2C));
  std::vector<cufftComplex> xc(xr.size()), yc(xr.size());
  for (size_t i = 0; i < xr.size(); ++i) xc[i] = {xr[i], 0.0f};
  cufftComplex *dx = dalloc<cufftComplex>(xc.size()), *dy = dalloc<cufftComplex>(xc.size());
  CUDA_CHECK(cudaMemcpy(dx, xc.data(), xc.size() * sizeof(cufftComplex), cudaMemcpyHostToDevice));
  CUFFT_CHECK(cufftExecC2C(plan, dx, dy, CUFFT_FORWARD));
  CUDA_CHECK(cudaMemcpy(yc.data(), dy, yc.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  ok &= check_complex("fft_2d_c2c", yc, want, transform_atol(xr, xr.size(), yc.size(), 1, (double)nx * ny));
  CUFFT_CHECK(cufftDestroy(plan));
  for (void* p : {(void*)dr, (void*)dc, (void*)dx, (void*)dy}) CUDA_CHECK(cudaFree(p));
  return ok;
}

// --8<-- [start:conv]
// Pointwise product of two spectra, with the 1/n that cuFFT's unnormalised inverse leaves out.
__global__ void multiply_spectra(cufftComplex* a, const cufftComplex* b, size_t n, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const cufftComplex x = a[i], y = b[i];
    a[i] = {(x.x * y.x - x.y * y.y) * scale, (x.x * y.y + x.y * y.x) * scale};
  }
}

// Linear convolution y = x * h of length n + taps - 1 through the convolution theorem: zero-pad
// both to nfft >= n + taps - 1 (so the circular convolution the DFT computes does not wrap
// around), transform, multiply, transform back.
struct FftConv {
  int nfft, batch;
  cufftHandle fwd, inv;
  cufftComplex *X, *H;
};

static FftConv make_fft_conv(int nfft, int batch) {
  FftConv c{nfft, batch, 0, 0, nullptr, nullptr};
  CUFFT_CHECK(cufftPlan1d(&c.fwd, nfft, CUFFT_R2C, batch));
  CUFFT_CHECK(cufftPlan1d(&c.inv, nfft, CUFFT_C2R, batch));
  CUDA_CHECK(cudaMalloc(&c.X, (size_t)(nfft / 2 + 1) * batch * sizeof(cufftComplex)));
  CUDA_CHECK(cudaMalloc(&c.H, (size_t)(nfft / 2 + 1) * batch * sizeof(cufftComplex)));
  return c;
}

// x_pad and h_pad: batch rows of nfft reals, zero beyond the signal; y: batch rows of nfft reals.
static void fft_conv(const FftConv& c, float* x_pad, float* h_pad, float* y) {
  const size_t nc = (size_t)(c.nfft / 2 + 1) * c.batch;
  CUFFT_CHECK(cufftExecR2C(c.fwd, x_pad, c.X));
  CUFFT_CHECK(cufftExecR2C(c.fwd, h_pad, c.H));
  multiply_spectra<<<(unsigned)std::min<size_t>(course::ceil_div<size_t>(nc, 256), 4096), 256>>>(c.X, c.H, nc,
                                                                                                 1.0f / c.nfft);
  CUDA_CHECK_LAUNCH();
  CUFFT_CHECK(cufftExecC2R(c.inv, c.X, y));  // C2R overwrites its input: X is scratch here
}
// --8<-- [end:conv]

static void destroy(FftConv& c) {
  CUFFT_CHECK(cufftDestroy(c.fwd));
  CUFFT_CHECK(cufftDestroy(c.inv));
  CUDA_CHECK(cudaFree(c.X));
  CUDA_CHECK(cudaFree(c.H));
}

// --8<-- [start:direct]
// The direct sum on the GPU, one thread per output: taps multiply-adds each.
__global__ void direct_conv(const float* x, int n, const float* h, int taps, float* y, int ny) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= ny) return;
  float acc = 0.0f;
  for (int j = 0; j < taps; ++j) {
    const int xi = i - j;
    if (xi >= 0 && xi < n) acc += h[j] * x[xi];
  }
  y[i] = acc;
}
// --8<-- [end:direct]

static int next_pow2(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

static bool check_conv(int n, int taps, uint64_t seed) {
  const int ny = n + taps - 1, nfft = next_pow2(ny);
  const std::vector<float> x = random_floats(n, seed + 3), h = random_floats(taps, seed + 4);
  std::vector<double> want(ny, 0.0);
  for (int i = 0; i < ny; ++i)
    for (int j = 0; j < taps; ++j)
      if (i - j >= 0 && i - j < n) want[i] += (double)h[j] * x[i - j];
  std::vector<float> xp(nfft, 0.0f), hp(nfft, 0.0f), y(nfft);
  std::copy(x.begin(), x.end(), xp.begin());
  std::copy(h.begin(), h.end(), hp.begin());
  float *dx = dalloc<float>(nfft), *dh = dalloc<float>(nfft), *dy = dalloc<float>(nfft);
  CUDA_CHECK(cudaMemcpy(dx, xp.data(), nfft * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dh, hp.data(), nfft * sizeof(float), cudaMemcpyHostToDevice));
  FftConv c = make_fft_conv(nfft, 1);
  fft_conv(c, dx, dh, dy);
  destroy(c);
  CUDA_CHECK(cudaMemcpy(y.data(), dy, nfft * sizeof(float), cudaMemcpyDeviceToHost));
  // --8<-- [start:conv_tolerance]
  // Through the FFT, rounding is spread over every output: about u log2(nfft) |x|_2 |h|_2 / sqrt(nfft)
  // each (u = 2^-24). The direct sum's rounding stays in each output's own sum: about sqrt(taps) u times
  // the sum of its terms' sizes, computed beside the reference, so an output near the ends (a few terms)
  // is held to a few ulp of itself.
  double nx2 = 0, nh2 = 0;
  for (float v : x) nx2 += (double)v * v;
  for (float v : h) nh2 += (double)v * v;
  const double fft_tol = 40 * 0x1p-24 * (std::log2((double)nfft) + 1) * std::sqrt(nx2 * nh2 / nfft);
  std::vector<double> fft_atol(ny, fft_tol), sum_abs(ny, 0.0), direct_atol(ny);
  for (int i = 0; i < ny; ++i)
    for (int j = 0; j < taps; ++j)
      if (i - j >= 0 && i - j < n) sum_abs[i] += std::fabs((double)h[j] * x[i - j]);
  for (int i = 0; i < ny; ++i) direct_atol[i] = 4 * std::sqrt((double)taps) * 0x1p-24 * sum_abs[i];
  // --8<-- [end:conv_tolerance]
  bool ok =
      course::check_close_each("fft_convolution_vs_direct_sum", y.data(), want.data(), fft_atol.data(), ny, 1e-4);
  // The direct GPU kernel against the same reference.
  course::poison(dy, nfft * sizeof(float));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dh, h.data(), taps * sizeof(float), cudaMemcpyHostToDevice));
  direct_conv<<<course::ceil_div(ny, 256), 256>>>(dx, n, dh, taps, dy, ny);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(y.data(), dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
  ok &= course::check_close_each("direct_convolution_kernel", y.data(), want.data(), direct_atol.data(), ny, 1e-4);
  for (void* p : {(void*)dx, (void*)dh, (void*)dy}) CUDA_CHECK(cudaFree(p));
  return ok;
}

// --8<-- [start:bench]
static void bench(uint64_t seed) {
  // Batched 1D complex FFTs: 4096 transforms of 4096 points (16 Mi complex values, 128 MiB), on
  // random data. Flops by the usual convention 5 n log2(n) per complex transform.
  const int n = 4096, batch = 4096;
  const size_t total = (size_t)n * batch;
  cufftComplex* d = dalloc<cufftComplex>(total);
  upload(reinterpret_cast<float*>(d), 2 * total, seed);
  cufftHandle plan;
  CUFFT_CHECK(cufftPlan1d(&plan, n, CUFFT_C2C, batch));
  const float t = course::time_kernel_ms([&] { CUFFT_CHECK(cufftExecC2C(plan, d, d, CUFFT_FORWARD)); });
  course::print_bench("4096 x 1D C2C FFT of 4096 points, fp32", "cuFFT batched, in place", t,
                      2.0 * total * sizeof(cufftComplex), 5.0 * total * std::log2((double)n));
  CUFFT_CHECK(cufftDestroy(plan));
  CUDA_CHECK(cudaFree(d));

  // FFT convolution against the direct kernel: a 1 Mi-sample signal, filters of growing length.
  // Buffers of 2 Mi floats hold the zero-padded transforms (nfft = 2^21 for every filter below).
  const int sig = 1 << 20;
  float *x = dalloc<float>(2 * (size_t)sig), *h = dalloc<float>(2 * (size_t)sig), *y = dalloc<float>(2 * (size_t)sig);
  for (int taps : {15, 127, 1023, 8191}) {
    const int ny = sig + taps - 1, nfft = next_pow2(ny);
    // Random signal and filter, zero beyond their lengths as the FFT path requires.
    CUDA_CHECK(cudaMemset(x, 0, 2 * (size_t)sig * sizeof(float)));
    CUDA_CHECK(cudaMemset(h, 0, 2 * (size_t)sig * sizeof(float)));
    upload(x, sig, seed + 1);
    upload(h, taps, seed + 2);
    char c[64];
    std::snprintf(c, sizeof(c), "convolve 1 Mi samples with %d taps", taps);
    FftConv fc = make_fft_conv(nfft, 1);
    const float tf = course::time_kernel_ms([&] { fft_conv(fc, x, h, y); });
    destroy(fc);
    const float td = course::time_kernel_ms([&] {
      direct_conv<<<course::ceil_div(ny, 256), 256>>>(x, sig, h, taps, y, ny);
      CUDA_CHECK_LAUNCH();
    });
    const double bytes = 4.0 * ((double)sig + taps + ny);
    // The filter length, an extra field of the BENCH line, is the plot's x axis.
    course::print_bench(c, "direct sum kernel", td, bytes, 2.0 * sig * (double)taps, true, {{"taps", taps}});
    course::print_bench(c, "cuFFT R2C, multiply, C2R", tf, bytes, 2.0 * sig * (double)taps, false, {{"taps", taps}});
  }
  // --8<-- [end:bench]
  for (void* p : {(void*)x, (void*)h, (void*)y}) CUDA_CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Sizes are bounded by the CPU reference (a DFT by definition), not by cuFFT.
  const long long n = args.get_int("--n", 997, 1, 8192), batch = args.get_int("--batch", 3, 1, 16);
  const long long nx = args.get_int("--nx", 37, 1, 8192), ny = args.get_int("--ny", 20, 1, 8192);
  const long long taps = args.get_int("--taps", 31, 1, 8192);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool run_bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if (nx * ny > 8192) {  // the 2D check's DFT by definition is O((nx ny)^2)
    std::fprintf(stderr, "error: need --nx * --ny <= 8192 (the CPU reference's time)\n");
    return course::kExitFail;
  }
  if (plant && batch < 2) {
    std::fprintf(stderr, "error: --plant zeros-small needs --batch 2 or more (the quiet transform is the second)\n");
    return course::kExitFail;
  }
  bool ok = check_1d((int)n, (int)batch, seed, plant);
  ok &= check_2d((int)nx, (int)ny, seed);
  ok &= check_conv((int)n, (int)taps, seed);
  if (ok && run_bench) bench(seed);
  return ok ? 0 : course::kExitFail;
}
