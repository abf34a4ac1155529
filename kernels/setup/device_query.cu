// device_query.cu: print what the CUDA runtime knows about every GPU in the machine.
//
// Taught in docs/setup/device-query.md.
// Build: nvcc -O2 -arch=native -o build/setup/device_query kernels/setup/device_query.cu
// Run:   ./build/setup/device_query
//
// CUDA 13 removed several cudaDeviceProp fields (clockRate, memoryClockRate, computeMode, ...).
// Their values are still available through cudaDeviceGetAttribute, which is what this program
// uses for them.
//
// course: gpu
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/verify.cuh"

// --8<-- [start:attribute]
// cudaDeviceGetAttribute answers one question at a time and never allocates: cheap to call.
static int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}
// --8<-- [end:attribute]

static bool describe(int device) {
  // --8<-- [start:properties]
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));

  const int sm_clock_khz = attribute(cudaDevAttrClockRate, device);
  const int mem_clock_khz = attribute(cudaDevAttrMemoryClockRate, device);
  // Two transfers per memory clock (double data rate) times the bus width in bytes.
  const double peak_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (prop.memoryBusWidth / 8.0) / 1e9;
  // --8<-- [end:properties]

  std::printf("Device %d: %s\n", device, prop.name);
  std::printf("  compute capability             %d.%d (sm_%d%d)\n", prop.major, prop.minor, prop.major,
              prop.minor);
  std::printf("  streaming multiprocessors      %d\n", prop.multiProcessorCount);
  std::printf("  global memory                  %.1f GiB\n", prop.totalGlobalMem / 1073741824.0);
  std::printf("  L2 cache                       %.1f MiB\n", prop.l2CacheSize / 1048576.0);
  std::printf("  shared memory per block        %zu KiB (opt-in up to %zu KiB)\n", prop.sharedMemPerBlock / 1024,
              prop.sharedMemPerBlockOptin / 1024);
  std::printf("  shared memory per SM           %zu KiB\n", prop.sharedMemPerMultiprocessor / 1024);
  std::printf("  32-bit registers per SM        %d\n", prop.regsPerMultiprocessor);
  std::printf("  warp size                      %d\n", prop.warpSize);
  std::printf("  max threads per block          %d\n", prop.maxThreadsPerBlock);
  std::printf("  max threads per SM             %d\n", prop.maxThreadsPerMultiProcessor);
  std::printf("  max blocks per SM              %d\n", prop.maxBlocksPerMultiProcessor);
  std::printf("  max block dimensions           %d x %d x %d\n", prop.maxThreadsDim[0], prop.maxThreadsDim[1],
              prop.maxThreadsDim[2]);
  std::printf("  max grid dimensions            %d x %d x %d\n", prop.maxGridSize[0], prop.maxGridSize[1],
              prop.maxGridSize[2]);
  std::printf("  peak SM clock                  %.0f MHz\n", sm_clock_khz / 1e3);
  std::printf("  peak memory clock              %.0f MHz\n", mem_clock_khz / 1e3);
  std::printf("  memory bus width               %d bits\n", prop.memoryBusWidth);
  std::printf("  theoretical memory bandwidth   %.0f GB/s\n", peak_bandwidth_gbs);
  std::printf("  ECC enabled                    %s\n", prop.ECCEnabled ? "yes" : "no");
  std::printf("  concurrent copy engines        %d\n", prop.asyncEngineCount);

  // The facts later chapters rely on, checked rather than assumed. The struct and the attribute
  // API must agree, and the limits must be the ones every GPU since Volta has.
  size_t checked = 0;
  bool ok = true;
  auto expect = [&](bool condition, const char* what) {
    ++checked;
    if (!condition) {
      std::printf("  unexpected: %s\n", what);
      ok = false;
    }
  };
  expect(prop.warpSize == 32, "warp size is 32");
  expect(prop.multiProcessorCount > 0, "at least one SM");
  expect(prop.multiProcessorCount == attribute(cudaDevAttrMultiProcessorCount, device),
         "SM count agrees between cudaDeviceProp and cudaDeviceGetAttribute");
  expect(prop.major == attribute(cudaDevAttrComputeCapabilityMajor, device), "compute capability agrees");
  expect(prop.maxThreadsPerBlock == 1024, "1024 threads per block");
  expect(prop.totalGlobalMem > 0 && prop.l2CacheSize > 0, "memory sizes are positive");
  expect(sm_clock_khz > 0 && mem_clock_khz > 0, "clocks are positive");
  return course::check_true("device_query", ok, checked, prop.name);
}

int main(int argc, char** argv) {
  course::Args{argc, argv}.finish();  // no options: anything on the command line is an error
  int runtime_version = 0, driver_version = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version));
  // The driver version is the newest CUDA the installed driver supports, not the toolkit's.
  CUDA_CHECK(cudaDriverGetVersion(&driver_version));
  std::printf("CUDA runtime %d.%d, driver supports CUDA up to %d.%d\n", runtime_version / 1000,
              (runtime_version % 1000) / 10, driver_version / 1000, (driver_version % 1000) / 10);

  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  bool ok = true;
  for (int device = 0; device < count; ++device) ok = describe(device) && ok;
  return ok ? 0 : course::kExitFail;
}
