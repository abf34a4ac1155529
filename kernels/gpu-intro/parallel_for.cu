// parallel_for.cu: the parallel for-loop. SAXPY (y = a*x + y) as the CPU loop it starts from, as a
// kernel with one thread per element, and as a kernel with a grid-stride loop that any grid can run.
//
// Taught in docs/gpu-intro/parallel-for.md.
// Build: nvcc -O3 -arch=native -o build/gpu-intro/parallel_for kernels/gpu-intro/parallel_for.cu
// Run:   ./build/gpu-intro/parallel_for --n 1000003    (checks both kernels against the CPU loop)
//
// course: gpu
// course: run --n 1
// course: run --n 1000
// course: run --n 1000003
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/verify.cuh"

// --8<-- [start:cpu]
// The CPU loop: one core walks i = 0, 1, 2, ... Every iteration is independent of the others,
// which is exactly what makes the loop parallel: any order, or all at once, gives the same y.
static void saxpy_cpu(int n, float a, const float* x, float* y) {
  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
// --8<-- [end:cpu]

// --8<-- [start:one_per_element]
// The loop body becomes the kernel; the loop counter becomes the thread's global index. The launch
// creates at least n threads, so the ones past the end must do nothing.
__global__ void saxpy_one_per_element(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
// --8<-- [end:one_per_element]

// --8<-- [start:grid_stride]
// The grid-stride loop: each thread starts at its global index and steps by the number of threads
// in the grid. Any grid size covers any n, so the launch can be sized to the GPU, not to the data.
__global__ void saxpy_grid_stride(int n, float a, const float* x, float* y) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = a * x[i] + y[i];
}
// --8<-- [end:grid_stride]

// --8<-- [start:launch]
static void launch_one_per_element(int n, float a, const float* x, float* y) {
  constexpr int kThreads = 256;
  const int blocks = course::ceil_div(n, kThreads);  // enough blocks for n threads, rounded up
  saxpy_one_per_element<<<blocks, kThreads>>>(n, a, x, y);
  CUDA_CHECK_LAUNCH();
}

static void launch_grid_stride(int n, float a, const float* x, float* y) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  constexpr int kThreads = 256;
  // A few blocks per SM keeps every SM busy; more than n needs would only launch idle threads.
  const int blocks = std::min(4 * sms, course::ceil_div(n, kThreads));
  saxpy_grid_stride<<<blocks, kThreads>>>(n, a, x, y);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

// Runs one launcher on fresh copies of x and y and compares its y with the CPU loop's.
template <typename Launch>
static bool check(const char* name, Launch launch, int n, float a, const std::vector<float>& x,
                  const std::vector<float>& y0, const std::vector<float>& want) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  float *d_x = nullptr, *d_y = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, bytes));
  CUDA_CHECK(cudaMalloc(&d_y, bytes));
  CUDA_CHECK(cudaMemcpy(d_x, x.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_y, y0.data(), bytes, cudaMemcpyHostToDevice));
  // y is read and written, so it cannot be poisoned with NaN; an element the kernel skips keeps its
  // old value y0[i], which differs from want[i] unless x[i] == 0, so the check still catches it.
  launch(n, a, d_x, d_y);
  std::vector<float> got(n);
  CUDA_CHECK(cudaMemcpy(got.data(), d_y, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_y));
  // The GPU may fuse a*x+y into one FMA (one rounding) where the CPU rounds twice: allow an ulp or two.
  return course::check_close(name, got.data(), want.data(), n, 1e-6, 1e-6);
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long n = args.get_int("--n", 1000003, 1, 1LL << 30);  // an int index covers it
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  const float a = 2.5f;
  std::vector<float> x(n), y0(n);
  course::fill_uniform(x, seed);
  course::fill_uniform(y0, seed + 1);
  std::vector<float> want = y0;
  saxpy_cpu(static_cast<int>(n), a, x.data(), want.data());

  bool ok = check("saxpy_one_per_element", launch_one_per_element, static_cast<int>(n), a, x, y0, want);
  ok = check("saxpy_grid_stride", launch_grid_stride, static_cast<int>(n), a, x, y0, want) && ok;
  return ok ? 0 : course::kExitFail;
}
