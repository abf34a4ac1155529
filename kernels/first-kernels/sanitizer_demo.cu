// sanitizer_demo.cu: two correct kernels, and a switch that plants a classic bug in each, for
// compute-sanitizer to find:
//   --plant-bug oob    the bound check is off by one: the last thread writes one float past the end
//   --plant-bug race   a missing __syncthreads: threads read shared memory before others wrote it
// Without the switch the program is correct and checks itself. With it, the program plants a bug ON
// PURPOSE, for the sanitizer to report (its own checks may or may not notice).
//
// Taught in docs/first-kernels/sanitizer.md. tests/test_first_kernels_sanitizer.py runs the tools.
// Build: nvcc -O3 -lineinfo -arch=native -o build/first-kernels/sanitizer_demo
//        kernels/first-kernels/sanitizer_demo.cu
// Run:   compute-sanitizer --tool memcheck ./build/first-kernels/sanitizer_demo --plant-bug oob
//        compute-sanitizer --tool racecheck ./build/first-kernels/sanitizer_demo --plant-bug race
//
// course: gpu
// course: run --n 1000003
// course: run --n 1
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/verify.cuh"

// --8<-- [start:oob]
__global__ void scale(const float* in, float* out, int n, float alpha, bool plant_bug) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool in_bounds = plant_bug ? i <= n : i < n;  // the bug: <= lets thread n write out[n]
  if (in_bounds) out[i] = alpha * (i < n ? in[i] : 0.0f);
}
// --8<-- [end:oob]

// --8<-- [start:race]
// Reverse each block's slice of the array through shared memory. Every thread writes one element
// and then reads another thread's element: the barrier in between is what makes that safe.
constexpr int kBlock = 256;
__global__ void reverse_blocks(const float* in, float* out, int n, bool plant_bug) {
  __shared__ float tile[kBlock];
  const int base = blockIdx.x * kBlock;
  const int t = threadIdx.x;
  tile[t] = base + t < n ? in[base + t] : 0.0f;
  if (!plant_bug) __syncthreads();  // the bug: without it, a read can overtake the write it needs
  const int src = kBlock - 1 - t;
  if (base + t < n) out[base + t] = tile[src];
}
// --8<-- [end:race]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int n = static_cast<int>(args.get_int("--n", 1000003, 1, 1LL << 30));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const std::string bug = args.get_str("--plant-bug", "none");
  args.finish();
  const bool plant_oob = bug == "oob", plant_race = bug == "race";
  if (!plant_oob && !plant_race && bug != "none") {
    std::fprintf(stderr, "error: --plant-bug expects 'oob' or 'race', got '%s'\n", bug.c_str());
    return course::kExitFail;
  }
  std::vector<float> in(n), got(n), want(n);
  course::fill_uniform(in, seed);
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const int blocks = course::ceil_div(n, kBlock);

  course::poison(d_out, n * sizeof(float));
  scale<<<blocks, kBlock>>>(d_in, d_out, n, 2.0f, plant_oob);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) want[i] = 2.0f * in[i];
  bool ok = course::check_close("scale", got.data(), want.data(), n, 0.0, 0.0);

  course::poison(d_out, n * sizeof(float));
  reverse_blocks<<<blocks, kBlock>>>(d_in, d_out, n, plant_race);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const int base = i / kBlock * kBlock, src = base + kBlock - 1 - i % kBlock;
    want[i] = src < n ? in[src] : 0.0f;
  }
  ok = course::check_close("reverse_blocks", got.data(), want.data(), n, 0.0, 0.0) && ok;
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
