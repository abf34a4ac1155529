// unified_memory.cu: the same kernel on data that starts on the host, brought to the GPU three ways:
//   explicit copy     cudaMalloc + cudaMemcpy, then the kernel
//   managed, faults   cudaMallocManaged; the kernel touches pages that live on the host, each first
//                     touch faults and the driver migrates the page to the GPU on demand
//   managed, prefetch cudaMemPrefetchAsync moves the whole range to the GPU before the kernel
// plus the kernel alone on memory that is already on the GPU, the floor.
//
// Taught in docs/first-kernels/unified-memory.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/unified_memory kernels/first-kernels/unified_memory.cu
// Run:   ./build/first-kernels/unified_memory --n 1000003
//        ./build/first-kernels/unified_memory --bench     (times each on 2^26 floats)
//
// course: gpu
// course: run --n 1000003
// course: run --n 1
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

__global__ void scale_in_place(float* x, size_t n, float alpha) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= alpha;
}

static void launch_scale(float* x, size_t n, float alpha) {
  scale_in_place<<<static_cast<unsigned>(course::ceil_div<size_t>(n, 256)), 256>>>(x, n, alpha);
  CUDA_CHECK_LAUNCH();
}

// The host writes every element, which (for managed memory) moves the pages back to the host.
static void host_init(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1024) * 0.5f;
}

// Times `gpu_part` with events, median of `repeats`; `prepare` runs untimed before each repeat.
template <typename P, typename G>
static float median_ms(P&& prepare, G&& gpu_part, int repeats = 9) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> t(repeats);
  for (int r = -1; r < repeats; ++r) {  // r = -1 is a warm-up
    prepare();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(start));
    gpu_part();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    if (r >= 0) CUDA_CHECK(cudaEventElapsedTime(&t[r], start, stop));
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(t.begin(), t.end());
  return t[repeats / 2];
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const bool run_bench = args.has("--bench");
  args.finish();
  int device = 0, concurrent = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
  if (!concurrent) {  // e.g. Windows and WSL: managed memory works, but not by on-demand page faults
    std::printf("WAIVED this system does not migrate managed memory on demand (concurrentManagedAccess = 0)\n");
    return course::kExitWaived;
  }
  std::vector<float> want(n), got(n);
  host_init(want.data(), n);
  for (auto& w : want) w *= 3.0f;

  // --8<-- [start:managed]
  float* m = nullptr;
  CUDA_CHECK(cudaMallocManaged(&m, n * sizeof(float)));  // one pointer, valid on host and device
  host_init(m, n);            // the host touches the pages first: they live in host memory
  launch_scale(m, n, 3.0f);   // each page the kernel touches faults and migrates to the GPU
  CUDA_CHECK(cudaDeviceSynchronize());  // the host must not touch m while the kernel may use it
  bool ok = course::check_close("managed_on_demand", m, want.data(), n, 0.0, 0.0);  // pages move back

  const cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
  host_init(m, n);
  CUDA_CHECK(cudaMemPrefetchAsync(m, n * sizeof(float), gpu, 0, 0));  // move it all before the kernel
  launch_scale(m, n, 3.0f);
  CUDA_CHECK(cudaDeviceSynchronize());
  ok = course::check_close("managed_prefetched", m, want.data(), n, 0.0, 0.0) && ok;
  // --8<-- [end:managed]

  std::vector<float> host(n);
  float* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
  host_init(host.data(), n);
  CUDA_CHECK(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  launch_scale(d, n, 3.0f);
  CUDA_CHECK(cudaMemcpy(got.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  ok = course::check_close("explicit_copy", got.data(), want.data(), n, 0.0, 0.0) && ok;
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaFree(m));

  if (ok && run_bench) {
    // --8<-- [start:bench]
    const size_t big = static_cast<size_t>(1) << 26, bytes = big * sizeof(float);
    std::vector<float> h(big);
    float *dm = nullptr, *dd = nullptr;
    CUDA_CHECK(cudaMallocManaged(&dm, bytes));
    CUDA_CHECK(cudaMalloc(&dd, bytes));
    char name[64];
    std::snprintf(name, sizeof(name), "%zu floats from the host, scaled on the GPU", big);
    const double moved = static_cast<double>(bytes);  // host to device once
    const float explicit_ms = median_ms([&] { host_init(h.data(), big); }, [&] {
      CUDA_CHECK(cudaMemcpyAsync(dd, h.data(), bytes, cudaMemcpyHostToDevice));
      launch_scale(dd, big, 3.0f);
    });
    const float faults_ms = median_ms([&] { host_init(dm, big); }, [&] { launch_scale(dm, big, 3.0f); });
    const float prefetch_ms = median_ms([&] { host_init(dm, big); }, [&] {
      CUDA_CHECK(cudaMemPrefetchAsync(dm, bytes, gpu, 0, 0));
      launch_scale(dm, big, 3.0f);
    });
    const float resident_ms = median_ms([] {}, [&] { launch_scale(dd, big, 3.0f); });
    course::print_bench(name, "cudaMalloc + cudaMemcpy (pageable) + kernel", explicit_ms, moved, 0);
    course::print_bench(name, "managed, on-demand page faults", faults_ms, moved, 0);
    course::print_bench(name, "managed, cudaMemPrefetchAsync + kernel", prefetch_ms, moved, 0);
    course::print_bench(name, "kernel alone, data already on the GPU", resident_ms, 2.0 * bytes, 0);
    // --8<-- [end:bench]
    CUDA_CHECK(cudaFree(dm));
    CUDA_CHECK(cudaFree(dd));
  }
  return ok ? 0 : course::kExitFail;
}
