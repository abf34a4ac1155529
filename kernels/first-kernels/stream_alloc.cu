// stream_alloc.cu: stream-ordered allocation. A loop of steps, each allocating a scratch buffer,
// filling it (scratch = x * s_t), accumulating it into the output (out += scratch), freeing it and
// synchronising (as a training loop does when it reads a loss), with the scratch allocated four ways:
//   cudaMalloc + cudaFree             each step; cudaFree waits for the whole device
//   cudaMallocAsync, release 0        the device's default pool, release threshold 0 (the default):
//                                     at each synchronisation the pool may hand its memory back
//   cudaMallocAsync, pool keeps       a pool whose release threshold is "never release": the next
//                                     step's allocation reuses the same memory
//   allocated once (peer)             one cudaMalloc before the loop: no allocation in the loop at all
// All four are checked against a CPU reference and timed in the same run.
//
// Taught in docs/first-kernels/cuda-graphs.md (section "Stream-ordered allocation").
// Build: nvcc -O3 -arch=native -o build/first-kernels/stream_alloc kernels/first-kernels/stream_alloc.cu
// Run:   ./build/first-kernels/stream_alloc --n 100003 --steps 20
//        ./build/first-kernels/stream_alloc --bench     (times 200 steps with a 64 MiB scratch)
//
// course: gpu
// course: run --n 1 --steps 2
// course: run --n 100003 --steps 20
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

static float step_scale(int step) { return 0.25f * static_cast<float>(step % 5 + 1); }

// --8<-- [start:reference]
static void steps_cpu(const std::vector<float>& x, std::vector<float>& out, int steps) {
  for (int t = 0; t < steps; ++t)
    for (size_t i = 0; i < x.size(); ++i) {
      const float scratch = x[i] * step_scale(t);
      out[i] = t == 0 ? scratch : out[i] + scratch;
    }
}
// --8<-- [end:reference]

__global__ void fill_scaled(const float* x, float* scratch, size_t n, float s) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = x[i] * s;
}

// The first step writes out (which starts poisoned); the later ones add to it.
__global__ void accumulate(const float* scratch, float* out, size_t n, bool first) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = first ? scratch[i] : out[i] + scratch[i];
}

enum class Alloc { kMallocFree, kAsyncDefaultPool, kAsyncKeepingPool, kOnce };

struct Buffers {
  const float* x;
  float* out;
  float* once;            // the preallocated scratch for Alloc::kOnce
  cudaMemPool_t keeping;  // the pool that never releases
  size_t n;
};

// --8<-- [start:steps]
static void run_steps(Alloc how, const Buffers& b, int steps, cudaStream_t s) {
  const size_t bytes = b.n * sizeof(float);
  const unsigned blocks = static_cast<unsigned>(course::ceil_div<size_t>(b.n, 256));
  for (int t = 0; t < steps; ++t) {
    float* scratch = b.once;
    if (how == Alloc::kMallocFree) CUDA_CHECK(cudaMalloc(&scratch, bytes));
    if (how == Alloc::kAsyncDefaultPool) CUDA_CHECK(cudaMallocAsync(&scratch, bytes, s));  // the device's pool
    if (how == Alloc::kAsyncKeepingPool) CUDA_CHECK(cudaMallocFromPoolAsync(&scratch, bytes, b.keeping, s));
    fill_scaled<<<blocks, 256, 0, s>>>(b.x, scratch, b.n, step_scale(t));
    CUDA_CHECK_LAUNCH();
    accumulate<<<blocks, 256, 0, s>>>(scratch, b.out, b.n, t == 0);
    CUDA_CHECK_LAUNCH();
    if (how == Alloc::kMallocFree) CUDA_CHECK(cudaFree(scratch));  // synchronises with the device
    if (how == Alloc::kAsyncDefaultPool || how == Alloc::kAsyncKeepingPool)
      CUDA_CHECK(cudaFreeAsync(scratch, s));  // the memory returns to the pool when the stream gets here
    CUDA_CHECK(cudaStreamSynchronize(s));  // the step's host-side read (a loss, say)
  }
}
// --8<-- [end:steps]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const size_t n = static_cast<size_t>(args.get_int("--n", bench ? (1 << 24) : 100003, 1, 1LL << 28));
  const int steps = static_cast<int>(args.get_int("--steps", bench ? 200 : 20, 1, 100000));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();

  int device = 0, pools_supported = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, device));
  if (!pools_supported) {
    std::printf("WAIVED this GPU or driver does not support stream-ordered memory pools\n");
    return course::kExitWaived;
  }

  // --8<-- [start:pools]
  // The default pool's release threshold is 0: whatever it holds beyond that is handed back to the
  // system at the next synchronisation. Set it explicitly so the row means what it says.
  cudaMemPool_t default_pool;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&default_pool, device));
  uint64_t release_threshold = 0;
  CUDA_CHECK(cudaMemPoolSetAttribute(default_pool, cudaMemPoolAttrReleaseThreshold, &release_threshold));

  // A second pool that keeps what it has (threshold = the largest value: never trim on its own).
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t keeping;
  CUDA_CHECK(cudaMemPoolCreate(&keeping, &props));
  release_threshold = UINT64_MAX;
  CUDA_CHECK(cudaMemPoolSetAttribute(keeping, cudaMemPoolAttrReleaseThreshold, &release_threshold));
  // --8<-- [end:pools]

  std::vector<float> h_x(n), got(n), want(n);
  course::fill_uniform(h_x, seed);
  steps_cpu(h_x, want, steps);
  float* d_x = course::to_device(h_x);
  float *d_out = course::device_alloc<float>(n), *d_once = course::device_alloc<float>(n);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));  // blocking: the timer's events on the default stream wait for it
  const Buffers b{d_x, d_out, d_once, keeping, n};

  struct Variant {
    Alloc how;
    const char* check_name;
    const char* impl;
  };
  const Variant variants[] = {
      {Alloc::kMallocFree, "cudaMalloc_cudaFree", "cudaMalloc + cudaFree every step"},
      {Alloc::kAsyncDefaultPool, "cudaMallocAsync_default_pool",
       "cudaMallocAsync, default pool (release threshold 0)"},
      {Alloc::kAsyncKeepingPool, "cudaMallocAsync_keeping_pool", "cudaMallocAsync, pool that keeps its memory"},
      {Alloc::kOnce, "allocated_once", "allocated once before the loop"},
  };
  bool ok = true;
  for (const Variant& v : variants) {
    course::poison(d_out, n * sizeof(float));
    course::poison(d_once, n * sizeof(float));
    run_steps(v.how, b, steps, s);
    CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    ok = course::check_close(v.check_name, got.data(), want.data(), n, 1e-6, 1e-6) && ok;
  }

  if (ok && bench) {
    char name[96];
    std::snprintf(name, sizeof(name), "%d steps, %.0f MiB scratch each", steps, n * sizeof(float) / 1048576.0);
    // fill: read x, write scratch; accumulate: 2 reads, 1 write
    const double moved = steps * 5.0 * n * sizeof(float);
    for (const Variant& v : variants)
      course::print_bench(name, v.impl, course::time_kernel_ms([&] { run_steps(v.how, b, steps, s); }, 1, 7),
                          moved, 0, v.how == Alloc::kOnce);
  }

  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaMemPoolDestroy(keeping));
  course::device_free({d_x, d_out, d_once});
  return ok ? 0 : course::kExitFail;
}
