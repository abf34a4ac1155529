// matmul_naive.cu: C = A B for row-major float matrices (A is M x K, B is K x N), one thread per
// element of C, and a batched variant that uses the grid's z dimension for the batch. cuBLAS is the
// peer in the benchmark; the matmul chapter starts from this kernel and closes the gap.
//
// Taught in docs/first-kernels/matmul-naive.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/matmul_naive kernels/first-kernels/matmul_naive.cu -lcublas
// Run:   ./build/first-kernels/matmul_naive --m 131 --n 67 --k 97 --batch 3
//        ./build/first-kernels/matmul_naive --bench     (also times 2048^3 and a batch of 32 x 512^3)
//
// course: gpu
// course: libs cublas
// course: run --m 131 --n 67 --k 97 --batch 3
// course: run --m 1 --n 1 --k 1 --batch 1
// course: run --m 257 --n 33 --k 1 --batch 2
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// The CPU reference is course::gemm_reference (kernels/common/gemm_reference.cuh), called once per
// matrix of the batch: float64 sums of the float inputs, the one reference every GEMM program shares.
static void matmul_cpu(const float* a, const float* b, double* c, int batch, int m, int n, int k) {
  for (int p = 0; p < batch; ++p)
    course::gemm_reference(m, n, k, a + static_cast<size_t>(p) * m * k, b + static_cast<size_t>(p) * k * n,
                           c + static_cast<size_t>(p) * m * n);
}

// --8<-- [start:naive]
// One thread computes one element C[row][col]: a dot product of a row of A and a column of B.
// x runs along columns, so the 32 threads of a warp read one B element each from the same row
// (consecutive addresses) and all read the same A element (one broadcast).
__global__ void matmul_naive(const float* A, const float* B, float* C, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int l = 0; l < k; ++l) acc += A[row * k + l] * B[l * n + col];
  C[row * n + col] = acc;
}
// --8<-- [end:naive]

// --8<-- [start:batched]
// Batched: blockIdx.z picks the matrix; each batch entry is a whole matrix, stored one after another.
__global__ void matmul_naive_batched(const float* A, const float* B, float* C, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const size_t p = blockIdx.z;
  if (row >= m || col >= n) return;
  const float* Ap = A + p * m * k;
  const float* Bp = B + p * k * n;
  float acc = 0.0f;
  for (int l = 0; l < k; ++l) acc += Ap[row * k + l] * Bp[l * n + col];
  C[p * m * n + row * n + col] = acc;
}
// --8<-- [end:batched]

// --8<-- [start:launch]
static void launch_naive(const float* A, const float* B, float* C, int m, int n, int k) {
  const dim3 block(32, 8);  // 32 along columns: one warp spans 32 consecutive columns
  const dim3 grid(course::ceil_div<unsigned>(n, block.x), course::ceil_div<unsigned>(m, block.y));
  matmul_naive<<<grid, block>>>(A, B, C, m, n, k);
  CUDA_CHECK_LAUNCH();
}

static void launch_batched(const float* A, const float* B, float* C, int batch, int m, int n, int k) {
  const dim3 block(32, 8);
  const dim3 grid(course::ceil_div<unsigned>(n, block.x), course::ceil_div<unsigned>(m, block.y), batch);
  matmul_naive_batched<<<grid, block>>>(A, B, C, m, n, k);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch]

// --8<-- [start:cublas]
// cuBLAS is column-major. A row-major C = A B is the column-major C^T = B^T A^T, so we pass B first
// and swap m and n: no transposes are needed.
static void cublas_batched(cublasHandle_t h, const float* A, const float* B, float* C, int batch, int m, int n,
                           int k) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n,
                                         static_cast<long long>(k) * n, A, k, static_cast<long long>(m) * k,
                                         &zero, C, n, static_cast<long long>(m) * n, batch));
}
// --8<-- [end:cublas]

struct Problem {
  int batch, m, n, k;
  size_t a() const { return static_cast<size_t>(batch) * m * k; }
  size_t b() const { return static_cast<size_t>(batch) * k * n; }
  size_t c() const { return static_cast<size_t>(batch) * m * n; }
};

static bool check(const Problem& p, uint64_t seed, cublasHandle_t h) {
  std::vector<float> a(p.a()), b(p.b()), got(p.c());
  std::vector<double> want(p.c());
  course::fill_uniform(a, seed);
  course::fill_uniform(b, seed + 1);
  matmul_cpu(a.data(), b.data(), want.data(), p.batch, p.m, p.n, p.k);
  float *dA, *dB, *dC;
  CUDA_CHECK(cudaMalloc(&dA, p.a() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dB, p.b() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dC, p.c() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dA, a.data(), p.a() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, b.data(), p.b() * sizeof(float), cudaMemcpyHostToDevice));
  // float accumulation of k products in [-1, 1]: the error grows with k, so the tolerance does too.
  const double atol = 1e-5 * p.k, rtol = 1e-5;
  bool ok = true;
  // The plain kernel on the first matrix of the batch.
  course::poison(dC, p.c() * sizeof(float));
  launch_naive(dA, dB, dC, p.m, p.n, p.k);
  CUDA_CHECK(cudaMemcpy(got.data(), dC, static_cast<size_t>(p.m) * p.n * sizeof(float), cudaMemcpyDeviceToHost));
  ok = course::check_close("matmul_naive", got.data(), want.data(), static_cast<size_t>(p.m) * p.n, rtol, atol) && ok;
  course::poison(dC, p.c() * sizeof(float));
  launch_batched(dA, dB, dC, p.batch, p.m, p.n, p.k);
  CUDA_CHECK(cudaMemcpy(got.data(), dC, p.c() * sizeof(float), cudaMemcpyDeviceToHost));
  ok = course::check_close("matmul_naive_batched", got.data(), want.data(), p.c(), rtol, atol) && ok;
  course::poison(dC, p.c() * sizeof(float));
  cublas_batched(h, dA, dB, dC, p.batch, p.m, p.n, p.k);
  CUDA_CHECK(cudaMemcpy(got.data(), dC, p.c() * sizeof(float), cudaMemcpyDeviceToHost));
  ok = course::check_close("cublas_batched", got.data(), want.data(), p.c(), rtol, atol) && ok;
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
  return ok;
}

// --8<-- [start:bench]
static void bench(const Problem& p, cublasHandle_t h) {
  float *dA, *dB, *dC;
  CUDA_CHECK(cudaMalloc(&dA, p.a() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dB, p.b() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dC, p.c() * sizeof(float)));
  std::vector<float> a(p.a()), b(p.b());  // random inputs: zeros could take faster paths
  course::fill_uniform(a, 5);
  course::fill_uniform(b, 6);
  CUDA_CHECK(cudaMemcpy(dA, a.data(), p.a() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, b.data(), p.b() * sizeof(float), cudaMemcpyHostToDevice));
  const double bytes = 4.0 * (p.a() + p.b() + p.c());  // each matrix read or written once
  const double flops = 2.0 * p.batch * p.m * p.n * static_cast<double>(p.k);
  char name[96];
  std::snprintf(name, sizeof(name), "%d x (%d x %d) @ (%d x %d), fp32", p.batch, p.m, p.k, p.k, p.n);
  const float ours = p.batch == 1
      ? course::time_kernel_ms([&] { launch_naive(dA, dB, dC, p.m, p.n, p.k); }, 2, 10)
      : course::time_kernel_ms([&] { launch_batched(dA, dB, dC, p.batch, p.m, p.n, p.k); }, 2, 10);
  const float theirs =
      course::time_kernel_ms([&] { cublas_batched(h, dA, dB, dC, p.batch, p.m, p.n, p.k); }, 3, 20);
  course::print_bench(name, "cuBLAS SGEMM (FP32)", theirs, bytes, flops, true);
  course::print_bench(name, p.batch == 1 ? "matmul_naive" : "matmul_naive_batched", ours, bytes, flops);
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const Problem p{
      static_cast<int>(args.get_int("--batch", 3, 1, 65535)), static_cast<int>(args.get_int("--m", 131, 1, 4096)),
      static_cast<int>(args.get_int("--n", 67, 1, 4096)), static_cast<int>(args.get_int("--k", 97, 1, 4096))};
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const bool run_bench = args.has("--bench");
  args.finish();
  if (p.c() > (1ull << 28) || p.a() > (1ull << 28) || p.b() > (1ull << 28)) {  // 1 GiB per matrix batch
    std::fprintf(stderr, "error: --batch times the matrix sizes must stay within 2^28 elements per operand\n");
    return course::kExitFail;
  }
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  bool ok = check(p, seed, h);
  if (ok && run_bench) {
    bench(Problem{1, 2048, 2048, 2048}, h);
    bench(Problem{32, 512, 512, 512}, h);
  }
  CUBLAS_CHECK(cublasDestroy(h));
  return ok ? 0 : course::kExitFail;
}
