// l2_persistence.cu: out[i] = x[i] * table[hash(i) % table_size]: a large array streamed once while a
// smaller table is gathered from at random, timed with and without an L2 access policy window that
// marks the table "persisting" (a set-aside part of L2 that streaming data cannot evict).
//
// Two benchmark cases: a 16 MiB table, which fits in the set-aside (the window should help), and a
// 96 MiB table, larger than the set-aside of any GPU the course targets (the window covers it with a
// hitRatio below 1, and only that share of the table can persist). The streamed array is 1 GiB.
//
// Taught in docs/memory-model/l2-persistence.md. L2 persistence needs compute capability 8.0 (waives
// below it). The result is exact (one float multiply per element): checked bit for bit against the CPU.
// Build: nvcc -O3 -arch=native -o build/memory-model/l2_persistence kernels/memory-model/l2_persistence.cu
// Run:   ./build/memory-model/l2_persistence --n 1000003 --table-floats 100003
//        ./build/memory-model/l2_persistence --bench
//
// course: gpu
// course: run --n 1000003 --table-floats 100003
// course: run --n 1 --table-floats 1
// course: run --n 4099 --table-floats 7
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// --8<-- [start:reference]
// A multiplicative hash spreads consecutive i over the table (the same on CPU and GPU).
__host__ __device__ inline unsigned table_index(long long i, unsigned table_size) {
  return static_cast<unsigned>((static_cast<unsigned long long>(i) * 2654435761ull) >> 7) % table_size;
}

static void gather_cpu(const std::vector<float>& x, const std::vector<float>& table, std::vector<float>& out) {
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * table[table_index(static_cast<long long>(i), table.size())];
}
// --8<-- [end:reference]

// --8<-- [start:kernel]
// 16-byte loads and stores of the streamed array; one 4-byte gather from the table per element, so
// each 32-byte sector of the table is fetched for a single float whenever it is not in L2.
__global__ void scale_by_table(const float* __restrict__ x, const float* __restrict__ table, float* __restrict__ out,
                               long long n, unsigned table_size) {
  const long long n4 = n / 4, stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (long long i = first; i < n4; i += stride) {
    const float4 q = x4[i];
    const long long e = 4 * i;
    out4[i] = make_float4(q.x * table[table_index(e, table_size)], q.y * table[table_index(e + 1, table_size)],
                          q.z * table[table_index(e + 2, table_size)], q.w * table[table_index(e + 3, table_size)]);
  }
  for (long long i = 4 * n4 + first; i < n; i += stride) out[i] = x[i] * table[table_index(i, table_size)];
}
// --8<-- [end:kernel]

// --8<-- [start:window]
// The L2 set-aside is a device-wide limit (cudaLimitPersistingL2CacheSize, at most the device's
// persistingL2CacheMaxSize); the access policy window says which addresses use it: accesses to a
// hitRatio share of [base, base + num_bytes) are "persisting", the rest "streaming". A window larger
// than the set-aside gets hitRatio = set-aside / window, or its persisting lines evict each other.
// The window travels with each launch here (a launch attribute); a stream attribute
// (cudaStreamSetAttribute with cudaStreamAttributeAccessPolicyWindow) does the same for every
// launch on that stream.
struct Persistence {
  size_t set_aside = 0;
  cudaAccessPolicyWindow window{};
};

static Persistence persist_table(const float* table, size_t table_bytes) {
  int device = 0, max_set_aside = 0, max_window = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_set_aside, cudaDevAttrMaxPersistingL2CacheSize, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device));
  Persistence p;
  p.set_aside = std::min(table_bytes, static_cast<size_t>(max_set_aside));
  CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, p.set_aside));
  CUDA_CHECK(cudaDeviceGetLimit(&p.set_aside, cudaLimitPersistingL2CacheSize));  // what the driver granted
  p.window.base_ptr = const_cast<float*>(table);
  p.window.num_bytes = std::min(table_bytes, static_cast<size_t>(max_window));
  p.window.hitRatio = std::min(1.0f, static_cast<float>(p.set_aside) / static_cast<float>(p.window.num_bytes));
  p.window.hitProp = cudaAccessPropertyPersisting;
  p.window.missProp = cudaAccessPropertyStreaming;
  return p;
}

// Back to normal: no set-aside, and no line left marked persisting.
static void release_persistence() {
  CUDA_CHECK(cudaCtxResetPersistingL2Cache());
  CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
}

static void launch(const float* x, const float* table, float* out, long long n, unsigned table_size, int blocks,
                   const Persistence* persistence) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(256);
  cudaLaunchAttribute attr{};
  if (persistence) {
    attr.id = cudaLaunchAttributeAccessPolicyWindow;
    attr.val.accessPolicyWindow = persistence->window;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&config, scale_by_table, x, table, out, n, table_size));
}
// --8<-- [end:window]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const long long n_arg = args.get_int("--n", 1000003, 1, 1LL << 28);
  const long long table_arg = args.get_int("--table-floats", 100003, 1, 1LL << 26);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  course::require_compute_capability(8, 0, "L2 access policy windows");
  int device = 0, sms = 0, max_set_aside = 0, l2_bytes = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_set_aside, cudaDevAttrMaxPersistingL2CacheSize, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  std::printf("L2 %.1f MiB, at most %.1f MiB of it can be set aside for persisting accesses\n", l2_bytes / 1048576.0,
              max_set_aside / 1048576.0);
  if (max_set_aside == 0) {
    std::printf("WAIVED this GPU has no L2 set-aside for persisting accesses (MIG, or not supported)\n");
    return course::kExitWaived;
  }

  struct Case {
    long long n, table_floats;
    bool timed;
  };
  std::vector<Case> cases{{n_arg, table_arg, false}};
  if (bench) {
    cases.push_back({1LL << 28, 4LL << 20, true});   // 1 GiB streamed, 16 MiB table
    cases.push_back({1LL << 28, 24LL << 20, true});  // 1 GiB streamed, 96 MiB table
  }
  bool ok = true;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const size_t bytes = static_cast<size_t>(c.n) * sizeof(float), table_bytes = c.table_floats * sizeof(float);
    std::vector<float> h_x(static_cast<size_t>(c.n)), h_table(static_cast<size_t>(c.table_floats));
    std::vector<float> want(h_x.size()), got(h_x.size());
    course::fill_uniform(h_x, seed + 2 * k);
    course::fill_uniform(h_table, seed + 2 * k + 1);
    gather_cpu(h_x, h_table, want);
    float *x = course::to_device(h_x), *table = course::to_device(h_table);
    float* out = course::device_alloc<float>(h_x.size());
    const unsigned tsize = static_cast<unsigned>(c.table_floats);
    const int blocks =
        static_cast<int>(std::min<long long>(course::ceil_div<long long>(c.n / 4 + 1, 256), 8LL * sms));
    char case_name[96];
    std::snprintf(case_name, sizeof(case_name), "%lld fp32 streamed, %.0f MiB table", c.n, table_bytes / 1048576.0);
    const char* names[] = {"normal (no access policy window)", "table in a persisting window"};
    const char* checks[] = {"gather_normal", "gather_persisting"};
    for (int m = 0; m < 2; ++m) {
      // Mode 0 runs with no set-aside and no persisting line left over; mode 1 with the window.
      release_persistence();
      Persistence persistence;
      if (m == 1) {
        persistence = persist_table(table, table_bytes);
        std::printf("%s: set-aside %.1f MiB, window %.1f MiB, hitRatio %.2f\n", case_name,
                    persistence.set_aside / 1048576.0, persistence.window.num_bytes / 1048576.0,
                    persistence.window.hitRatio);
      }
      const Persistence* mode = m == 1 ? &persistence : nullptr;
      course::poison(out, bytes);
      launch(x, table, out, c.n, tsize, blocks, mode);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost));
      char name[96];
      std::snprintf(name, sizeof(name), "%s_n%lld_t%lld", checks[m], c.n, c.table_floats);
      ok = course::check_close(name, got.data(), want.data(), got.size(), 0.0, 0.0) && ok;  // exact
      if (c.timed && ok) {
        // --8<-- [start:bench]
        // Bytes: the array read and written once, the table read once (what a perfect cache would move).
        const double moved = 2.0 * bytes + static_cast<double>(table_bytes);
        if (m == 0) {
          const float copy_ms = course::time_kernel_ms(
              [&] { CUDA_CHECK(cudaMemcpy(out, x, bytes, cudaMemcpyDeviceToDevice)); });
          course::print_bench(case_name, "cudaMemcpy of the streamed array (copy, no table)", copy_ms, 2.0 * bytes,
                              0, /*peer=*/true);
        }
        const float ms = course::time_kernel_ms([&] { launch(x, table, out, c.n, tsize, blocks, mode); });
        course::print_bench(case_name, (std::string(names[m]) + ", fp32").c_str(), ms, moved,
                            static_cast<double>(c.n));
        // --8<-- [end:bench]
      }
    }
    release_persistence();
    course::device_free({x, table, out});
  }
  return ok ? 0 : course::kExitFail;
}
