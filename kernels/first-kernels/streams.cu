// streams.cu: overlap host<->device copies with computation using streams and pinned memory, and
// order work across streams with events.
//   serial              one stream: copy all in, compute, copy all out
//   4 streams, pinned   the data in 4 chunks, each chunk's copy-in, kernel and copy-out on its own
//                       stream, so one chunk's copies overlap another chunk's kernel
//   4 streams, pageable the same with pageable host memory: the copies cannot overlap
//
// Taught in docs/first-kernels/streams.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/streams kernels/first-kernels/streams.cu
// Run:   ./build/first-kernels/streams --n 1000003
//        ./build/first-kernels/streams --bench        (times the three on 2^26 floats)
//
// course: gpu
// course: run --n 1000003
// course: run --n 1
// course: run --n 4099
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// Enough arithmetic per element that computing takes about as long as copying.
__device__ float work(float x) {
  for (int r = 0; r < 48; ++r) x = sinf(x) * 0.5f + 0.25f;
  return x;
}

__global__ void compute(const float* in, float* out, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = work(in[i]);
}

__global__ void add_one(float* x, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

static float work_cpu(float x) {
  for (int r = 0; r < 48; ++r) x = std::sin(x) * 0.5f + 0.25f;
  return x;
}

constexpr int kStreams = 4;

// --8<-- [start:pipeline]
// Split [0, n) into chunks; chunk c goes through stream c % kStreams. Within a stream the three steps
// run in order; across streams the copy engines and the SMs work on different chunks at once.
static void pipeline(const float* h_in, float* h_out, float* d_in, float* d_out, size_t n, int chunks,
                     cudaStream_t* streams) {
  const size_t per = course::ceil_div<size_t>(n, chunks);
  for (int c = 0; c < chunks; ++c) {
    const size_t first = c * per;
    if (first >= n) break;
    const size_t count = std::min(per, n - first), bytes = count * sizeof(float);
    cudaStream_t s = streams[c % kStreams];
    CUDA_CHECK(cudaMemcpyAsync(d_in + first, h_in + first, bytes, cudaMemcpyHostToDevice, s));
    compute<<<static_cast<unsigned>(course::ceil_div<size_t>(count, 256)), 256, 0, s>>>(d_in + first,
                                                                                         d_out + first, count);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(h_out + first, d_out + first, bytes, cudaMemcpyDeviceToHost, s));
  }
}
// --8<-- [end:pipeline]

// --8<-- [start:events]
// Events as dependencies: stream `consumer` waits for an event recorded in stream `producer`, on the
// GPU, without blocking the host. Without the wait, add_one could read x before the copy finished.
static void producer_consumer(float* d_x, const float* h_x, size_t n, cudaStream_t producer,
                              cudaStream_t consumer) {
  cudaEvent_t copied;
  CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  CUDA_CHECK(cudaMemcpyAsync(d_x, h_x, n * sizeof(float), cudaMemcpyHostToDevice, producer));
  CUDA_CHECK(cudaEventRecord(copied, producer));
  CUDA_CHECK(cudaStreamWaitEvent(consumer, copied, 0));  // everything queued on consumer after this waits
  add_one<<<static_cast<unsigned>(course::ceil_div<size_t>(n, 256)), 256, 0, consumer>>>(d_x, n);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventDestroy(copied));  // safe: destruction waits for nothing, the GPU keeps its copy
}
// --8<-- [end:events]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const size_t n = static_cast<size_t>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool bench = args.has("--bench");
  args.finish();
  const size_t big = bench ? static_cast<size_t>(1) << 26 : 0;
  const size_t cap = std::max(n, big), bytes = cap * sizeof(float);

  // --8<-- [start:pinned]
  float *h_in = nullptr, *h_out = nullptr;
  CUDA_CHECK(cudaMallocHost(&h_in, bytes));   // pinned: the copy engines read and write it directly,
  CUDA_CHECK(cudaMallocHost(&h_out, bytes));  // so cudaMemcpyAsync really is asynchronous
  cudaStream_t streams[kStreams];
  for (auto& s : streams) CUDA_CHECK(cudaStreamCreate(&s));
  // --8<-- [end:pinned]
  std::vector<float> pageable_in(cap), pageable_out(cap);
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, bytes));
  CUDA_CHECK(cudaMalloc(&d_out, bytes));

  std::vector<float> src(n), want(n);
  course::fill_uniform(src, seed);
  for (size_t i = 0; i < n; ++i) want[i] = work_cpu(src[i]);
  bool ok = true;
  // Check both pipelines: pinned and pageable host buffers, 8 chunks over 4 streams.
  for (float* in : {h_in, pageable_in.data()}) {
    float* out = in == h_in ? h_out : pageable_out.data();
    std::copy(src.begin(), src.end(), in);
    std::fill(out, out + n, std::nanf(""));
    pipeline(in, out, d_in, d_out, n, 8, streams);
    CUDA_CHECK(cudaDeviceSynchronize());  // the host reads `out` next: wait for every stream
    ok = course::check_close(in == h_in ? "pipeline_pinned" : "pipeline_pageable", out, want.data(), n, 1e-5,
                             1e-5) && ok;
  }
  std::copy(src.begin(), src.end(), h_in);
  producer_consumer(d_in, h_in, n, streams[0], streams[1]);
  CUDA_CHECK(cudaMemcpyAsync(h_out, d_in, n * sizeof(float), cudaMemcpyDeviceToHost, streams[1]));
  CUDA_CHECK(cudaStreamSynchronize(streams[1]));
  for (size_t i = 0; i < n; ++i) want[i] = src[i] + 1.0f;
  ok = course::check_close("event_dependency", h_out, want.data(), n, 0.0, 0.0) && ok;

  if (ok && bench) {
    // --8<-- [start:bench]
    char name[64];
    std::snprintf(name, sizeof(name), "copy in, compute, copy out: %zu floats", big);
    const double moved = 2.0 * big * sizeof(float);  // over PCIe: in once, out once
    // time_kernel_ms records its events on the default stream, which waits for all (blocking) streams.
    const float serial = course::time_kernel_ms([&] { pipeline(h_in, h_out, d_in, d_out, big, 1, streams); });
    const float overlapped = course::time_kernel_ms([&] { pipeline(h_in, h_out, d_in, d_out, big, 16, streams); });
    const float pageable = course::time_kernel_ms(
        [&] { pipeline(pageable_in.data(), pageable_out.data(), d_in, d_out, big, 16, streams); });
    course::print_bench(name, "1 stream, 1 chunk, pinned", serial, moved, 0);
    course::print_bench(name, "4 streams, 16 chunks, pinned", overlapped, moved, 0);
    course::print_bench(name, "4 streams, 16 chunks, pageable", pageable, moved, 0);
    // --8<-- [end:bench]
  }
  for (auto& s : streams) CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFreeHost(h_in));
  CUDA_CHECK(cudaFreeHost(h_out));
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
