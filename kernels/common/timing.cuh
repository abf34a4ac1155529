// timing.cuh: timing and reporting it. Taught in docs/conventions.md.
//   time_kernel_ms         CUDA-event timing: warm-up, L2 flush, median of many repeats
//   print_bench            a machine-readable BENCH line (JSON) for the GPU record, with extra fields
//   is_timing_repeat       true in a benchmark's second timing process: it may check a sample
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "check.cuh"

namespace course {

// --8<-- [start:timing]
// The L2 flush's second half: a memset leaves dirty lines whose write-back the next timed kernel would
// pay for; reading the whole buffer after it leaves L2 holding clean lines. The store never happens (the
// buffer holds one byte value, so no XOR of its words is 0x01234567) but keeps the reads from being dropped.
template <typename Word>
__global__ void read_flush_buffer(const Word* buffer, size_t words) {
  unsigned seen = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const Word w = buffer[i];
    seen ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (seen == 0x01234567u) *reinterpret_cast<unsigned*>(const_cast<Word*>(buffer)) = seen;
}

// Times `launch` (a callable that enqueues work on the default stream) with CUDA events.
// Warm-up runs first (module load, caches, clocks), then each timed repeat is preceded by a flush of
// L2 (a write, then a read, of a buffer twice its size) so that repeats do not read a warm cache and
// do not pay for the flush's write-backs. Returns the median in ms.
template <typename F>
float time_kernel_ms(F&& launch, int warmup = 3, int repeats = 20, bool flush_l2 = true) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  void* scratch = nullptr;
  const size_t scratch_bytes = flush_l2 ? static_cast<size_t>(l2_bytes) * 2 : 0;
  if (scratch_bytes) CUDA_CHECK(cudaMalloc(&scratch, scratch_bytes));
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int flush_blocks = 4 * sms;

  for (int i = 0; i < warmup; ++i) launch();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times(repeats);
  for (int i = 0; i < repeats; ++i) {
    if (scratch_bytes) {
      CUDA_CHECK(cudaMemsetAsync(scratch, i & 0xFF, scratch_bytes));
      read_flush_buffer<<<flush_blocks, 256>>>(static_cast<const uint4*>(scratch), scratch_bytes / sizeof(uint4));
    }
    CUDA_CHECK(cudaEventRecord(start));
    launch();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventElapsedTime(&times[i], start, stop));
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  if (scratch) CUDA_CHECK(cudaFree(scratch));
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}
// --8<-- [end:timing]

// --8<-- [start:bench]
// One benchmark result as a line the harness copies into the GPU record:
//   BENCH {"case": ..., "impl": ..., "time_ms": ..., "bytes": ..., "flops": ..., "peer": ..., <extra>}
// `bytes` is the fewest bytes the operation must move (each input read once, each output written
// once); `flops` the arithmetic it must do. Readers divide by time_ms for GB/s or TFLOP/s. `peer`
// marks the library or framework result the course's kernels are compared against. `extra` appends
// whole-number fields a chapter plots or tabulates: {{"size", 4096}, {"workspace_bytes", ws}}.
struct BenchField {
  template <typename Number>  // any integer or floating type, without a narrowing cast at the call
  BenchField(const char* field_name, Number field_value)
      : name(field_name), value(static_cast<double>(field_value)) {}
  const char* name;
  double value;  // printed as a whole number
};

inline void print_bench(const char* case_name, const char* impl, double time_ms, double bytes, double flops,
                        bool peer = false, std::initializer_list<BenchField> extra = {}) {
  std::printf(
      "BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": %s",
      case_name, impl, time_ms, bytes, flops, peer ? "true" : "false");
  for (const BenchField& field : extra) std::printf(", \"%s\": %.0f", field.name, field.value);
  std::printf("}\n");
  std::fflush(stdout);
}
// --8<-- [end:bench]

// A benchmark is timed in two processes (course/bench.py sets COURSE_TIMING_PROCESS to 1, 2, ...).
// The first checks what it times in full; a repeat times the same kernels on the same inputs and may
// check a sample of that work, so that an expensive float64 reference is not computed twice.
inline bool is_timing_repeat() {
  const char* process = std::getenv("COURSE_TIMING_PROCESS");
  return process != nullptr && std::strcmp(process, "1") != 0;
}

}  // namespace course
