// cuda_peers.cu: the CUDA versions of the Triton chapter's three kernels (vector add, row softmax,
// tiled fp16 matmul), written the way the earlier CUDA chapters write them, so that the Triton
// programs can be timed beside them in one run.
//
// Taught in docs/triton/index.md (and compared on each Triton page). No main: kernels/triton/bench.py
// builds it as a shared library and calls the extern "C" launchers through ctypes, with PyTorch's
// device pointers and stream.
// Build: nvcc -O3 -arch=native -shared -Xcompiler -fPIC -o build/triton/libcuda_peers.so kernels/triton/cuda_peers.cu
//
// course: compile-only
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// --8<-- [start:add]
// One thread per element: what Triton's vector add does with one program per BLOCK elements.
__global__ void add_kernel(const float* a, const float* b, float* c, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
// --8<-- [end:add]

// --8<-- [start:softmax]
// One block per row. Pass 1 finds the row max, pass 2 the sum of exponentials, pass 3 writes:
// three reads of the row (the second and third mostly from L2), one write.
template <int kThreads>
__device__ float block_reduce(float v, bool is_max) {
  __shared__ float partial[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < kThreads / 32; ++w) v = is_max ? fmaxf(v, partial[w]) : v + partial[w];
  __syncthreads();  // partial[] is reused by the next reduction
  return v;
}

template <int kThreads>
__global__ void softmax_kernel(const float* x, float* y, int cols) {
  const float* row = x + static_cast<long long>(blockIdx.x) * cols;
  float* out = y + static_cast<long long>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, row[c]);
  m = block_reduce<kThreads>(m, true);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) s += __expf(row[c] - m);
  s = block_reduce<kThreads>(s, false);
  for (int c = threadIdx.x; c < cols; c += kThreads) out[c] = __expf(row[c] - m) / s;
}
// --8<-- [end:softmax]

// --8<-- [start:matmul]
// Shared-memory tiling, one output element per thread, fp32 accumulation on the CUDA cores (no
// tensor cores): the first tiled kernel of the matmul chapter, in fp16.
constexpr int kTile = 32;
__global__ void matmul_tiled_kernel(const __half* a, const __half* b, __half* c, int M, int N, int K) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? __half2float(a[static_cast<long long>(row) * K + ka]) : 0.0f;
    bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? __half2float(b[static_cast<long long>(kb) * N + col]) : 0.0f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) c[static_cast<long long>(row) * N + col] = __float2half(acc);
}
// --8<-- [end:matmul]

// Launchers with C linkage for ctypes. Each returns the launch's cudaError_t (0 = success).
extern "C" int launch_add(const float* a, const float* b, float* c, long long n, cudaStream_t stream) {
  if (n <= 0) return 0;
  constexpr int kThreads = 256;
  add_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(a, b, c, n);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int launch_softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return 0;
  softmax_kernel<256><<<rows, 256, 0, stream>>>(x, y, cols);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int launch_matmul(const void* a, const void* b, void* c, int M, int N, int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  const dim3 block(kTile, kTile);
  const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  matmul_tiled_kernel<<<grid, block, 0, stream>>>(static_cast<const __half*>(a), static_cast<const __half*>(b),
                                                  static_cast<__half*>(c), M, N, K);
  return static_cast<int>(cudaGetLastError());
}
