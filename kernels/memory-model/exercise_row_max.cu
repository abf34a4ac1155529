// exercise_row_max.cu: the chapter's exercise. The maximum of every row of a rows x cols matrix,
// one warp per row, its 32 partial maxima combined with warp shuffles.
//
// Taught in docs/memory-model/exercises.md. Built as it is, the kernel is a stub and the check
// fails; write the kernel where the stub is, rebuild, and run until it prints CHECK PASS. The
// course's solution is built with -DCOURSE_SOLUTION (that is how the tests build it).
// Build: nvcc -O3 -arch=native -o build/memory-model/exercise_row_max kernels/memory-model/exercise_row_max.cu
// Run:   ./build/memory-model/exercise_row_max --rows 1009 --cols 997
//
// course: gpu
// course: nvcc-flags -DCOURSE_SOLUTION
// course: run --rows 1 --cols 1
// course: run --rows 1009 --cols 997
// course: run --rows 3 --cols 31
#include "../common/course.cuh"

constexpr int kThreads = 256;  // 8 warps per block: 8 rows per block

static void row_max_cpu(const std::vector<float>& x, std::vector<float>& out, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = std::max(m, x[(size_t)r * cols + c]);
    out[r] = m;
  }
}

// Row r is handled by warp number r (counted over the whole grid); lane = threadIdx.x % 32.
__global__ void row_max(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
#if defined(COURSE_SOLUTION)
  // --8<-- [start:solution]
  const float* row = x + (long long)r * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, row[c]);  // coalesced: a warp reads 128 bytes
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (lane == 0) out[r] = m;
  // --8<-- [end:solution]
#elif defined(COURSE_WRONG)
  // A plausible mistake, which the check must catch: one column per lane, no loop over the row.
  const float* row = x + (long long)r * cols;
  float m = lane < cols ? row[lane] : -INFINITY;
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (lane == 0) out[r] = m;
#else
  // --8<-- [start:stub]
  // Your code here (about 5 lines):
  //  0. row r starts at x + (long long)r * cols;
  //  1. each lane takes the max over columns lane, lane + 32, lane + 64, ... (start from -INFINITY);
  //  2. combine the 32 lane maxima: five steps of m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset))
  //     with offset = 16, 8, 4, 2, 1;
  //  3. one lane writes out[r].
  (void)x;
  (void)lane;
  (void)cols;
  // --8<-- [end:stub]
#endif
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long rows = args.get_int("--rows", 1009, 1, 1LL << 28), cols = args.get_int("--cols", 997, 1, 1LL << 28);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();
  if (rows * cols > (1LL << 28)) {
    std::fprintf(stderr, "error: --rows x --cols must be at most 2^28 elements (got %lld x %lld)\n", rows, cols);
    return course::kExitFail;
  }
  const int R = static_cast<int>(rows), C = static_cast<int>(cols);
  std::vector<float> h_x(static_cast<size_t>(rows * cols)), want(R), got(R);
  course::fill_uniform(h_x, seed, -100.0f, 100.0f);
  row_max_cpu(h_x, want, R, C);
  float *d_x = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, h_x.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, R * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), h_x.size() * sizeof(float), cudaMemcpyHostToDevice));
  course::poison(d_out, R * sizeof(float));
  row_max<<<course::ceil_div(R, kThreads / 32), kThreads>>>(d_x, d_out, R, C);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, R * sizeof(float), cudaMemcpyDeviceToHost));
  const bool ok = course::check_close("row_max", got.data(), want.data(), static_cast<size_t>(R), 0.0, 0.0);
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_out));
  return ok ? 0 : course::kExitFail;
}
