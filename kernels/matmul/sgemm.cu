// sgemm.cu: single-precision matrix multiply C = alpha * A * B + beta * C, made fast step by step.
//
// Taught in docs/fast-matmul-fft/ (one page per group of versions). All matrices are row-major:
// A is M x K, B is K x N, C is M x N. Every version is checked against a float64 CPU reference (and
// against cuBLAS) on sizes that are not multiples of any tile, with beta = 0 on a NaN-poisoned C and
// with beta != 0 on a random C.
//   v0  cuBLAS cublasSgemm (the peer), called with the row-major trick
//   v1  naive: one thread per element, threadIdx.x walks down a column of C
//   v2  coalesced: threadIdx.x walks along a row of C
//   v3  shared-memory tiling, 32 x 32 tiles
//   v4  1D register blocking: each thread computes 8 elements of a column
//   v5  2D register blocking: each thread computes an 8 x 8 block
//   v6  vectorised: float4 global loads, A stored transposed in shared memory, float4 shared loads
//   v7  warp tiling: each warp owns a 64 x 64 sub-tile, each thread several small blocks in it
//   v8  v7 plus double buffering: the next tiles are fetched while this one is computed
//   v9  v8 autotuned: a few tile shapes are tried on the actual size and the fastest is kept
//   v10 v8 with the next k-step's fragments prefetched into registers (the shared-memory loads are
//       hidden too), optionally with a grouped block order; autotuned over its shapes and v9's
// Build: nvcc -O3 -arch=native -lcublas -o build/matmul/sgemm kernels/matmul/sgemm.cu
// Run:   ./build/matmul/sgemm --m 127 --n 255 --k 65     (checks every version on that size)
//        ./build/matmul/sgemm --bench                    (also times every version, 256 to 8192)
//        ./build/matmul/sgemm --profile 5 --m 4096 --n 4096 --k 4096   (one launch, for ncu)
//        ./build/matmul/sgemm --profile 10 --cand 1 --m 4096 --n 4096 --k 4096   (one v10 shape)
//        ./build/matmul/sgemm --tune --m 4096 --n 4096 --k 4096   (times and checks every v9 and v10 shape)
//        ./build/matmul/sgemm --plant zeros     (the check at 8192^3 must reject a planted fault: zeros, tile)
//
// course: gpu
// course: libs cublas
// course: run --m 127 --n 255 --k 65
// course: run --m 1 --n 1 --k 1
// course: run --m 257 --n 129 --k 513
// course: run --m 260 --n 196 --k 132
// course: run --plant zeros
// course: run --plant tile
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/gemm_reference.cuh"
#include "../common/timing.cuh"

// The checks, the float64 reference with alpha and beta, the benchmark loop and main are in
// matmul_harness.cuh, included at the end.

// BLAS semantics: when beta is 0, C is not read (it may hold garbage or NaN).
__device__ __forceinline__ float epilogue(float alpha, float acc, float beta, const float* c) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// ---------------------------------------------------------------------------------------------
// v1: naive. Thread (x, y) computes C[x][y]; consecutive threads of a warp take consecutive ROWS.
// --8<-- [start:v1]
__global__ void sgemm_v1_naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                               float* C) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = epilogue(alpha, acc, beta, &C[row * N + col]);
  }
}
// --8<-- [end:v1]

// v2: the same arithmetic, but consecutive threads take consecutive COLUMNS.
// --8<-- [start:v2]
__global__ void sgemm_v2_coalesced(int M, int N, int K, float alpha, const float* A, const float* B,
                                   float beta, float* C) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;  // threadIdx.x -> column: coalesced B and C
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];  // A[row][k]: one broadcast
    C[row * N + col] = epilogue(alpha, acc, beta, &C[row * N + col]);
  }
}
// --8<-- [end:v2]

// v3: shared-memory tiling. A block loads a TILE x TILE tile of A and of B into shared memory, and
// every thread then reads them TILE times from there instead of from global memory.
// --8<-- [start:v3]
template <int TILE>
__global__ void sgemm_v3_smem(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                              float* C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    // Out-of-range elements load as 0, so they add nothing to the dot product.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();  // the tiles are complete before anyone reads them
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // everyone is done reading before the next iteration overwrites them
  }
  if (row < M && col < N) C[row * N + col] = epilogue(alpha, acc, beta, &C[row * N + col]);
}
// --8<-- [end:v3]

// v4: 1D register blocking. Each thread computes TM results down one column, so a value of B read
// from shared memory is reused TM times from a register.
// --8<-- [start:v4]
template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__((BM * BN) / TM)
    sgemm_v4_1d_blocking(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                         float* C) {
  static_assert(BM * BK == (BM * BN) / TM && BN * BK == (BM * BN) / TM, "one A and one B element per thread");
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tcol = tid % BN, trow = tid / BN;  // this thread's column, and which group of TM rows
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;
  const int a_r = tid / BK, a_c = tid % BK;  // the A element this thread loads
  const int b_r = tid / BN, b_c = tid % BN;  // the B element this thread loads
  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    As[a_r][a_c] = (brow + a_r < M && k0 + a_c < K) ? A[(brow + a_r) * K + k0 + a_c] : 0.0f;
    Bs[b_r][b_c] = (k0 + b_r < K && bcol + b_c < N) ? B[(k0 + b_r) * N + bcol + b_c] : 0.0f;
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][tcol];  // one shared load, TM uses
      for (int i = 0; i < TM; ++i) acc[i] += As[trow * TM + i][k] * b;
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i) {
    const int r = brow + trow * TM + i, c = bcol + tcol;
    if (r < M && c < N) C[r * N + c] = epilogue(alpha, acc[i], beta, &C[r * N + c]);
  }
}
// --8<-- [end:v4]

// v5: 2D register blocking. Each thread computes a TM x TN block: per k it loads TM values of A and
// TN values of B into registers and does TM * TN multiply-adds with them.
// --8<-- [start:v5]
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemm_v5_2d_blocking(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                         float* C) {
  constexpr int kThreads = (BM * BN) / (TM * TN);
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;
  float acc[TM][TN] = {};
  float a_reg[TM], b_reg[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += kThreads) {  // each thread loads several elements
      const int r = i / BK, c = i % BK;
      As[r][c] = (brow + r < M && k0 + c < K) ? A[(brow + r) * K + k0 + c] : 0.0f;
    }
    for (int i = tid; i < BK * BN; i += kThreads) {
      const int r = i / BN, c = i % BN;
      Bs[r][c] = (k0 + r < K && bcol + c < N) ? B[(k0 + r) * N + bcol + c] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      for (int i = 0; i < TM; ++i) a_reg[i] = As[trow * TM + i][k];
      for (int j = 0; j < TN; ++j) b_reg[j] = Bs[k][tcol * TN + j];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];  // TM*TN FMAs, TM+TN loads
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      const int r = brow + trow * TM + i, c = bcol + tcol * TN + j;
      if (r < M && c < N) C[r * N + c] = epilogue(alpha, acc[i][j], beta, &C[r * N + c]);
    }
}
// --8<-- [end:v5]

// ---------------------------------------------------------------------------------------------
// Tile loaders shared by v6 to v10. A tile (BM x BK) is stored TRANSPOSED in shared memory, As[k][m],
// so that a thread's TM values of A for one k are contiguous and can be read as float4. VEC: float4
// global loads, legal only when K and N are multiples of 4 (the launcher decides); otherwise scalar.
// Out-of-range elements are loaded as 0.
// --8<-- [start:loaders]
// Both fetch a ROWS x COLS tile at (r0, c0) of a row-major rows x cols matrix into registers, float4 by
// float4 (kLoads per thread); they differ in how they store it.
template <int ROWS, int COLS, int NT, bool VEC>
struct TileRegs {
  static constexpr int kLoads = (ROWS * COLS / 4) / NT;  // float4s per thread
  static_assert((ROWS * COLS / 4) % NT == 0, "a tile must split evenly over the threads");
  float4 r[kLoads];
  __device__ void fetch(const float* X, int rows, int cols, int r0, int c0, int tid) {
    for (int l = 0; l < kLoads; ++l) {
      const int idx = tid + l * NT, row = idx / (COLS / 4), col = (idx % (COLS / 4)) * 4;
      const int gr = r0 + row, gc = c0 + col;
      if (VEC) {
        r[l] = (gr < rows && gc < cols) ? *reinterpret_cast<const float4*>(&X[static_cast<size_t>(gr) * cols + gc])
                                        : make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        const float* p = &X[static_cast<size_t>(gr) * cols + gc];
        r[l].x = (gr < rows && gc + 0 < cols) ? p[0] : 0.f;
        r[l].y = (gr < rows && gc + 1 < cols) ? p[1] : 0.f;
        r[l].z = (gr < rows && gc + 2 < cols) ? p[2] : 0.f;
        r[l].w = (gr < rows && gc + 3 < cols) ? p[3] : 0.f;
      }
    }
  }
};

template <int BM, int BK, int NT, bool VEC>
struct TileA : TileRegs<BM, BK, NT, VEC> {  // rows brow.. of A (M x K), columns k0..
  using TileRegs<BM, BK, NT, VEC>::kLoads;
  using TileRegs<BM, BK, NT, VEC>::r;
  __device__ void fetch(const float* A, int M, int K, int brow, int k0, int tid) {
    TileRegs<BM, BK, NT, VEC>::fetch(A, M, K, brow, k0, tid);
  }
  __device__ void store(float* As, int tid) const {  // As is [BK][BM]: transpose on the way in
    for (int l = 0; l < kLoads; ++l) {
      const int idx = tid + l * NT, row = idx / (BK / 4), col = (idx % (BK / 4)) * 4;
      As[(col + 0) * BM + row] = r[l].x;
      As[(col + 1) * BM + row] = r[l].y;
      As[(col + 2) * BM + row] = r[l].z;
      As[(col + 3) * BM + row] = r[l].w;
    }
  }
};

template <int BN, int BK, int NT, bool VEC>
struct TileB : TileRegs<BK, BN, NT, VEC> {  // rows k0.. of B (K x N), columns bcol..
  using TileRegs<BK, BN, NT, VEC>::kLoads;
  using TileRegs<BK, BN, NT, VEC>::r;
  __device__ void fetch(const float* B, int K, int N, int bcol, int k0, int tid) {
    TileRegs<BK, BN, NT, VEC>::fetch(B, K, N, k0, bcol, tid);
  }
  __device__ void store(float* Bs, int tid) const {  // Bs is [BK][BN], as in global memory
    for (int l = 0; l < kLoads; ++l) {
      const int idx = tid + l * NT, row = idx / (BN / 4), col = (idx % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[row * BN + col]) = r[l];
    }
  }
};
// --8<-- [end:loaders]

// Writes a run of 4 consecutive results of one row of C (columns c..c+3), float4 when allowed.
template <bool VEC>
__device__ __forceinline__ void store4(float* C, int M, int N, int r, int c, const float* acc, float alpha,
                                       float beta) {
  if (r >= M) return;
  float* p = &C[static_cast<size_t>(r) * N + c];
  if (VEC && c + 3 < N) {
    float4 out;
    if (beta == 0.0f) {
      out = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
    } else {
      const float4 old = *reinterpret_cast<const float4*>(p);
      out = make_float4(alpha * acc[0] + beta * old.x, alpha * acc[1] + beta * old.y,
                        alpha * acc[2] + beta * old.z, alpha * acc[3] + beta * old.w);
    }
    *reinterpret_cast<float4*>(p) = out;
  } else {
    for (int j = 0; j < 4; ++j)
      if (c + j < N) p[j] = epilogue(alpha, acc[j], beta, &p[j]);
  }
}

// v6: v5's tiling with vectorised memory traffic. Per k a thread reads its TM values of A and TN of B
// from shared memory as float4s (As is transposed), and global tiles move as float4.
// --8<-- [start:v6]
template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemm_v6_vectorized(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                        float* C) {
  constexpr int NT = (BM * BN) / (TM * TN);
  __shared__ __align__(16) float As[BK * BM];
  __shared__ __align__(16) float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;
  TileA<BM, BK, NT, VEC> ta;
  TileB<BN, BK, NT, VEC> tb;
  float acc[TM][TN] = {};
  float a_reg[TM], b_reg[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    ta.fetch(A, M, K, brow, k0, tid);
    tb.fetch(B, K, N, bcol, k0, tid);
    ta.store(As, tid);
    tb.store(Bs, tid);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; i += 4)
        *reinterpret_cast<float4*>(&a_reg[i]) = *reinterpret_cast<const float4*>(&As[k * BM + trow * TM + i]);
#pragma unroll
      for (int j = 0; j < TN; j += 4)
        *reinterpret_cast<float4*>(&b_reg[j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + tcol * TN + j]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; j += 4)
      store4<VEC>(C, M, N, brow + trow * TM + i, bcol + tcol * TN + j, &acc[i][j], alpha, beta);
}
// --8<-- [end:v6]

// v7 and v8: warp tiling. The block tile (BM x BN) is split into warp tiles (WM x WN); a warp tile is
// covered WMI x WNI times by the warp's 32 threads, each computing a TM x TN block per pass. The
// threads of a warp then read neighbouring shared-memory addresses (few bank conflicts, broadcasts),
// and the warp's data stays in a small, fixed part of the block tile.
// DOUBLE = false: v7 (one shared buffer, two barriers per k-step).
// DOUBLE = true:  v8 (two shared buffers; the next tiles are fetched into registers from global
//                 memory while the current ones are used, one barrier per k-step).
// --8<-- [start:v7]
template <int BM, int BN, int BK, int WM, int WN, int WNI, int TM, int TN, bool VEC, bool DOUBLE>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
    sgemm_warptile(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  constexpr int NT = (BM / WM) * (BN / WN) * 32;
  constexpr int WMI = (WM * WN) / (32 * TM * TN * WNI);  // passes down the warp tile
  constexpr int WSUBM = WM / WMI, WSUBN = WN / WNI;       // one pass covers WSUBM x WSUBN
  static_assert(WMI * WNI * 32 * TM * TN == WM * WN, "warp tile must split evenly");
  static_assert((WSUBN / TN) * (WSUBM / TM) == 32, "a pass is 32 threads");
  constexpr int kStages = DOUBLE ? 2 : 1;
  __shared__ __align__(16) float As[kStages][BK * BM];
  __shared__ __align__(16) float Bs[kStages][BK * BN];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);  // this warp's tile in the block tile
  const int trow = lane / (WSUBN / TN), tcol = lane % (WSUBN / TN);  // this thread's block in a pass
  const int brow = blockIdx.y * BM, bcol = blockIdx.x * BN;

  TileA<BM, BK, NT, VEC> ta;
  TileB<BN, BK, NT, VEC> tb;
  float acc[WMI * TM][WNI * TN] = {};
  float a_reg[WMI * TM], b_reg[WNI * TN];

  ta.fetch(A, M, K, brow, 0, tid);
  tb.fetch(B, K, N, bcol, 0, tid);
  ta.store(As[0], tid);
  tb.store(Bs[0], tid);
  __syncthreads();
  int stage = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (DOUBLE && more) {  // issue the next tiles' global loads now; they land while we compute
      ta.fetch(A, M, K, brow, k0 + BK, tid);
      tb.fetch(B, K, N, bcol, k0 + BK, tid);
    }
    const float* as = As[stage];
    const float* bs = Bs[stage];
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int wm = 0; wm < WMI; ++wm)
#pragma unroll
        for (int i = 0; i < TM; i += 4)
          *reinterpret_cast<float4*>(&a_reg[wm * TM + i]) =
              *reinterpret_cast<const float4*>(&as[k * BM + wrow * WM + wm * WSUBM + trow * TM + i]);
#pragma unroll
      for (int wn = 0; wn < WNI; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
          *reinterpret_cast<float4*>(&b_reg[wn * TN + j]) =
              *reinterpret_cast<const float4*>(&bs[k * BN + wcol * WN + wn * WSUBN + tcol * TN + j]);
#pragma unroll
      for (int i = 0; i < WMI * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNI * TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    if (more) {
      if (DOUBLE) {  // write the other buffer: nobody reads it during this k-step
        ta.store(As[stage ^ 1], tid);
        tb.store(Bs[stage ^ 1], tid);
        stage ^= 1;
      } else {
        __syncthreads();  // everyone has finished reading before the buffer is overwritten
        ta.fetch(A, M, K, brow, k0 + BK, tid);
        tb.fetch(B, K, N, bcol, k0 + BK, tid);
        ta.store(As[0], tid);
        tb.store(Bs[0], tid);
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (int wm = 0; wm < WMI; ++wm)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int wn = 0; wn < WNI; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const int r = brow + wrow * WM + wm * WSUBM + trow * TM + i;
          const int c = bcol + wcol * WN + wn * WSUBN + tcol * TN + j;
          store4<VEC>(C, M, N, r, c, &acc[wm * TM + i][wn * TN + j], alpha, beta);
        }
}
// --8<-- [end:v7]

// v10: v8 with the shared-memory loads hidden as well. In v8 a k-step's fragments (the values of A and
// B a thread multiplies in that step) are read from shared memory right before they are used, and
// after each barrier every warp of the block waits for the new tile's first fragments at once. v10
// double-buffers the fragments in registers: step k + 1's are loaded while step k is computed. At the
// last step of a tile, the next tile is stored and the barrier passed *before* that step's
// multiply-adds, so the first loads from the new tile overlap them too. Tiles, thread layout and
// global loads are v8's. GROUP > 1 also renumbers the blocks (see below).
// --8<-- [start:v10]
template <int BM, int BN, int BK, int WM, int WN, int WNI, int TM, int TN, bool VEC, int GROUP>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
    sgemm_prefetch(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  constexpr int NT = (BM / WM) * (BN / WN) * 32;
  constexpr int WMI = (WM * WN) / (32 * TM * TN * WNI);
  constexpr int WSUBM = WM / WMI, WSUBN = WN / WNI;
  static_assert(WMI * WNI * 32 * TM * TN == WM * WN, "warp tile must split evenly");
  static_assert((WSUBN / TN) * (WSUBM / TM) == 32, "a pass is 32 threads");
  static_assert(BK % 2 == 0, "fragment buffers alternate, so a tile has an even number of k-steps");
  __shared__ __align__(16) float As[2][BK * BM];
  __shared__ __align__(16) float Bs[2][BK * BN];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
  const int trow = lane / (WSUBN / TN), tcol = lane % (WSUBN / TN);
  int bx = blockIdx.x, by = blockIdx.y;
  if (GROUP > 1) {  // grouped order: consecutive blocks walk down GROUP block rows, then move right
                    // (the usual way to make blocks that run together share tiles of A and B in L2)
    const int id = blockIdx.y * gridDim.x + blockIdx.x, per_group = GROUP * gridDim.x;
    const int first = (id / per_group) * GROUP, rows = min(GROUP, static_cast<int>(gridDim.y) - first);
    by = first + (id % per_group) % rows;
    bx = (id % per_group) / rows;
  }
  const int brow = by * BM, bcol = bx * BN;
  const int a_off = wrow * WM + trow * TM, b_off = wcol * WN + tcol * TN;  // this thread's fragments

  TileA<BM, BK, NT, VEC> ta;
  TileB<BN, BK, NT, VEC> tb;
  float acc[WMI * TM][WNI * TN] = {};
  float a_reg[2][WMI * TM], b_reg[2][WNI * TN];  // [k % 2]: one set in use, one being loaded
  auto load_fragments = [&](int f, const float* as, const float* bs, int k) {
#pragma unroll
    for (int wm = 0; wm < WMI; ++wm)
#pragma unroll
      for (int i = 0; i < TM; i += 4)
        *reinterpret_cast<float4*>(&a_reg[f][wm * TM + i]) =
            *reinterpret_cast<const float4*>(&as[k * BM + a_off + wm * WSUBM + i]);
#pragma unroll
    for (int wn = 0; wn < WNI; ++wn)
#pragma unroll
      for (int j = 0; j < TN; j += 4)
        *reinterpret_cast<float4*>(&b_reg[f][wn * TN + j]) =
            *reinterpret_cast<const float4*>(&bs[k * BN + b_off + wn * WSUBN + j]);
  };

  ta.fetch(A, M, K, brow, 0, tid);
  tb.fetch(B, K, N, bcol, 0, tid);
  ta.store(As[0], tid);
  tb.store(Bs[0], tid);
  __syncthreads();
  load_fragments(0, As[0], Bs[0], 0);
  int stage = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) {  // the next tiles' global loads, as in v8
      ta.fetch(A, M, K, brow, k0 + BK, tid);
      tb.fetch(B, K, N, bcol, k0 + BK, tid);
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k == BK - 1 && more) {  // publish the next tile before the last step's multiply-adds
        ta.store(As[stage ^ 1], tid);
        tb.store(Bs[stage ^ 1], tid);
        __syncthreads();
        stage ^= 1;
      }
      if (k + 1 < BK || more)  // step k + 1's fragments: from this tile, or the first of the next
        load_fragments((k + 1) % 2, As[stage], Bs[stage], (k + 1) % BK);
#pragma unroll
      for (int i = 0; i < WMI * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNI * TN; ++j) acc[i][j] += a_reg[k % 2][i] * b_reg[k % 2][j];
    }
  }
#pragma unroll
  for (int wm = 0; wm < WMI; ++wm)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int wn = 0; wn < WNI; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const int r = brow + a_off + wm * WSUBM + i, c = bcol + b_off + wn * WSUBN + j;
          store4<VEC>(C, M, N, r, c, &acc[wm * TM + i][wn * TN + j], alpha, beta);
        }
}
// --8<-- [end:v10]

// ---------------------------------------------------------------------------------------------
// Launchers. Every launcher takes device pointers and enqueues one multiply on the default stream.
struct Problem {
  int M, N, K;
  const float *A, *B;
  float* C;
  float alpha = 1.0f, beta = 0.0f;
};

static void launch_v1(const Problem& p) {
  const dim3 block(32, 32), grid(course::ceil_div(p.M, 32), course::ceil_div(p.N, 32));
  sgemm_v1_naive<<<grid, block>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
static void launch_v2(const Problem& p) {
  const dim3 block(32, 32), grid(course::ceil_div(p.N, 32), course::ceil_div(p.M, 32));
  sgemm_v2_coalesced<<<grid, block>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
static void launch_v3(const Problem& p) {
  const dim3 block(32, 32), grid(course::ceil_div(p.N, 32), course::ceil_div(p.M, 32));
  sgemm_v3_smem<32><<<grid, block>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
static void launch_v4(const Problem& p) {
  constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
  const dim3 grid(course::ceil_div(p.N, BN), course::ceil_div(p.M, BM));
  sgemm_v4_1d_blocking<BM, BN, BK, TM><<<grid, (BM * BN) / TM>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
static void launch_v5(const Problem& p) {
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  const dim3 grid(course::ceil_div(p.N, BN), course::ceil_div(p.M, BM));
  sgemm_v5_2d_blocking<BM, BN, BK, TM, TN>
      <<<grid, (BM * BN) / (TM * TN)>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
// float4 access is legal only if every row starts 16-byte aligned: K and N multiples of 4 (cudaMalloc
// returns 256-byte-aligned pointers).
static bool vec_ok(const Problem& p) { return p.K % 4 == 0 && p.N % 4 == 0; }

static void launch_v6(const Problem& p) {
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  const dim3 grid(course::ceil_div(p.N, BN), course::ceil_div(p.M, BM));
  constexpr int NT = (BM * BN) / (TM * TN);
  if (vec_ok(p))
    sgemm_v6_vectorized<BM, BN, BK, TM, TN, true><<<grid, NT>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  else
    sgemm_v6_vectorized<BM, BN, BK, TM, TN, false><<<grid, NT>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:configs]
// One warp-tiling configuration: the template arguments of sgemm_warptile, as a type.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int WNI_, int TM_, int TN_>
struct Cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, WNI = WNI_, TM = TM_, TN = TN_;
  static constexpr int kThreads = (BM / WM) * (BN / WN) * 32;
};
// v7 and v8 use the first; v9 tries Cfg0 to Cfg9 on the actual size and keeps the fastest.
using Cfg0 = Cfg<128, 128, 16, 64, 64, 4, 8, 4>;  // 128 threads, 128 results each
using Cfg1 = Cfg<128, 128, 8, 32, 64, 2, 8, 4>;   // 256 threads, 64 results each
using Cfg2 = Cfg<64, 128, 16, 32, 64, 2, 8, 4>;   // smaller block tile: more blocks on small sizes
using Cfg3 = Cfg<128, 256, 16, 64, 64, 4, 8, 4>;  // 256 threads, 128 results each, larger block tile
using Cfg4 = Cfg<64, 64, 16, 32, 32, 2, 4, 4>;    // small tiles for small sizes
using Cfg5 = Cfg<128, 128, 8, 64, 32, 2, 8, 4>;   // 256 threads, warps 64 x 32
using Cfg6 = Cfg<128, 256, 8, 64, 64, 4, 8, 4>;   // 256 threads, 128 results each, BK = 8
using Cfg7 = Cfg<256, 128, 8, 64, 64, 4, 8, 4>;   // the same, tall
using Cfg8 = Cfg<128, 128, 16, 32, 64, 2, 8, 4>;  // Cfg1 with BK = 16: half the barriers per K
using Cfg9 = Cfg<128, 128, 8, 64, 32, 1, 8, 8>;   // 8 x 8 per thread, one pass per warp tile
using Cfg10 = Cfg<128, 128, 8, 64, 64, 4, 8, 4>;  // v10 only: Cfg0 with BK = 8
// --8<-- [end:configs]

template <typename CF, bool DOUBLE>
static void launch_warptile(const Problem& p) {
  const dim3 grid(course::ceil_div(p.N, CF::BN), course::ceil_div(p.M, CF::BM));
  if (vec_ok(p))
    sgemm_warptile<CF::BM, CF::BN, CF::BK, CF::WM, CF::WN, CF::WNI, CF::TM, CF::TN, true, DOUBLE>
        <<<grid, CF::kThreads>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  else
    sgemm_warptile<CF::BM, CF::BN, CF::BK, CF::WM, CF::WN, CF::WNI, CF::TM, CF::TN, false, DOUBLE>
        <<<grid, CF::kThreads>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
static void launch_v7(const Problem& p) { launch_warptile<Cfg0, false>(p); }
static void launch_v8(const Problem& p) { launch_warptile<Cfg0, true>(p); }

using Launcher = void (*)(const Problem&);
struct Candidate {
  const char* name;
  Launcher launch;
};
static const std::vector<Candidate> kCandidates = {
    {"128x128x16 w64x64 128thr", launch_warptile<Cfg0, true>},
    {"128x128x8 w32x64 256thr", launch_warptile<Cfg1, true>},
    {"64x128x16 w32x64 128thr", launch_warptile<Cfg2, true>},
    {"128x256x16 w64x64 256thr", launch_warptile<Cfg3, true>},
    {"64x64x16 w32x32 128thr", launch_warptile<Cfg4, true>},
    {"128x128x8 w64x32 256thr", launch_warptile<Cfg5, true>},
    {"128x256x8 w64x64 256thr", launch_warptile<Cfg6, true>},
    {"256x128x8 w64x64 256thr", launch_warptile<Cfg7, true>},
    {"128x128x16 w32x64 256thr", launch_warptile<Cfg8, true>},
    {"128x128x8 w64x32 8x8 256thr", launch_warptile<Cfg9, true>},
};

// --8<-- [start:v10launch]
template <typename CF, int GROUP>
static void launch_prefetch(const Problem& p) {
  const dim3 grid(course::ceil_div(p.N, CF::BN), course::ceil_div(p.M, CF::BM));
  if (vec_ok(p))
    sgemm_prefetch<CF::BM, CF::BN, CF::BK, CF::WM, CF::WN, CF::WNI, CF::TM, CF::TN, true, GROUP>
        <<<grid, CF::kThreads>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  else
    sgemm_prefetch<CF::BM, CF::BN, CF::BK, CF::WM, CF::WN, CF::WNI, CF::TM, CF::TN, false, GROUP>
        <<<grid, CF::kThreads>>>(p.M, p.N, p.K, p.alpha, p.A, p.B, p.beta, p.C);
  CUDA_CHECK_LAUNCH();
}
// The shapes of the prefetching kernel that v10 tries, besides v9's (group8: grouped block order).
static const std::vector<Candidate> kPrefetchCandidates = {
    {"prefetch 128x256x8 w64x64 256thr", launch_prefetch<Cfg6, 0>},
    {"prefetch 128x256x8 w64x64 256thr group8", launch_prefetch<Cfg6, 8>},
    {"prefetch 256x128x8 w64x64 256thr group8", launch_prefetch<Cfg7, 8>},
    {"prefetch 128x128x8 w64x64 128thr", launch_prefetch<Cfg10, 0>},
    {"prefetch 64x128x16 w32x64 128thr", launch_prefetch<Cfg2, 0>},
};
// --8<-- [end:v10launch]

// --8<-- [start:autotune]
// v9: time each candidate on this problem exactly as the benchmark times a version (warm-up, L2 flushed
// before every run, median) and remember the winner per size. The tuning runs happen once per size,
// before the timed runs.
static int autotune_pick(const std::vector<Candidate>& cands, const Problem& p) {
  struct Entry {
    const std::vector<Candidate>* list;
    long long size;
    int best;
  };
  static std::vector<Entry> cache;  // the winner per candidate list and size
  const long long key = (static_cast<long long>(p.M) * 100003 + p.N) * 100003 + p.K;
  for (const Entry& e : cache)
    if (e.list == &cands && e.size == key) return e.best;
  int best = 0;
  float best_ms = 1e30f;
  for (int c = 0; c < static_cast<int>(cands.size()); ++c) {
    const float ms = course::time_kernel_ms([&] { cands[c].launch(p); });
    if (ms < best_ms) best_ms = ms, best = c;
  }
  cache.push_back({&cands, key, best});
  return best;
}
static void launch_v9(const Problem& p) { kCandidates[autotune_pick(kCandidates, p)].launch(p); }
// --8<-- [end:autotune]

// --8<-- [start:v10tune]
// v10: the same autotuner, offered v9's candidates and the prefetching kernel's.
static std::vector<Candidate> join(std::vector<Candidate> a, const std::vector<Candidate>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
static const std::vector<Candidate> kCandidates10 = join(kCandidates, kPrefetchCandidates);
static void launch_v10(const Problem& p) { kCandidates10[autotune_pick(kCandidates10, p)].launch(p); }
// --8<-- [end:v10tune]

// --8<-- [start:cublas]
// cuBLAS is column-major. A row-major M x N matrix C, read column-major, is C^T (N x M). Since
// C^T = B^T A^T, asking cuBLAS for the column-major product "B times A" with the dimensions swapped
// computes exactly our row-major C = A B, with no transposes or copies.
static cublasHandle_t g_cublas = nullptr;
static void launch_v0(const Problem& p) {
  CUBLAS_CHECK(cublasSgemm(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, p.N, p.M, p.K, &p.alpha, p.B, p.N, p.A, p.K,
                           &p.beta, p.C, p.N));
}
// --8<-- [end:cublas]

// --8<-- [start:program]
// What matmul_harness.cuh runs: the versions (id = index), the shapes an autotuner may pick (checked too),
// and the AUTOTUNE lines after each benchmark size.
static const Launcher kLaunch[] = {launch_v0, launch_v1, launch_v2, launch_v3, launch_v4, launch_v5,
                                   launch_v6, launch_v7, launch_v8, launch_v9, launch_v10};
struct Shape {
  int id;  // 100 + c: v9's candidate c; 200 + c: the prefetching kernel's candidate c
  const char* label;
  const char* details;
};

struct Program {
  using Elem = float;
  static constexpr course::BLayout kLayout = course::BLayout::kKxN;
  static constexpr const char* kCheck = "";
  static constexpr const char* kCase = "sgemm %dx%dx%d";
  static constexpr int kDefault[3] = {127, 255, 65};
  static constexpr int kKMultiple = 1;
  static constexpr bool kAlphaBeta = true;
  static constexpr int kPlantVersion = 8;
  static constexpr int kBenchSizes[] = {256, 512, 1024, 2048, 4096, 8192};
  static constexpr const char* kImpl[] = {"v0 cuBLAS", "v1 naive", "v2 coalesced", "v3 shared-memory tiles",
                                          "v4 1D register blocking", "v5 2D register blocking", "v6 vectorised",
                                          "v7 warp tiling", "v8 double-buffered", "v9 autotuned",
                                          "v10 fragment prefetch"};
  static bool timed_at(int id, int S) { return (id != 1 && id != 2) || S <= 4096; }  // the slowest: not at 8192
  static std::vector<Shape> extras() {  // every shape v9 or v10 may pick, not only today's winner
    static std::vector<std::string> labels;
    std::vector<Shape> out;
    if (labels.empty()) {
      for (size_t c = 0; c < kCandidates.size(); ++c) labels.push_back("v9cfg" + std::to_string(c));
      for (size_t c = 0; c < kPrefetchCandidates.size(); ++c) labels.push_back("v10cfg" + std::to_string(c));
    }
    for (size_t c = 0; c < kCandidates.size(); ++c)
      out.push_back({100 + static_cast<int>(c), labels[c].c_str(), kCandidates[c].name});
    for (size_t c = 0; c < kPrefetchCandidates.size(); ++c)
      out.push_back({200 + static_cast<int>(c), labels[kCandidates.size() + c].c_str(), kPrefetchCandidates[c].name});
    return out;
  }
  static void after_bench(const Problem& p) {
    if (p.M < 1024) return;
    std::printf("AUTOTUNE size=%d picked=%s\n", p.M, kCandidates[autotune_pick(kCandidates, p)].name);
    std::printf("AUTOTUNE v10 size=%d picked=%s\n", p.M, kCandidates10[autotune_pick(kCandidates10, p)].name);
  }
  // --cand C with --profile 9 or 10: launch v9's candidate C, or the prefetching kernel's candidate C,
  // directly, so that the profiled launch is not one of the autotuner's trial runs.
  struct Options {
    int cand;  // -1: none
    explicit Options(const course::Args& args) : cand(static_cast<int>(args.get_int("--cand", -1, 0, 1000))) {}
    bool selected(int) const { return true; }
    void setup() const {}
  };
  struct Launcher {
    const Options& opts;
    Launcher(const Problem&, const Options& o) : opts(o) {}
    void operator()(int id, const Problem& p) const {
      if (id >= 200) kPrefetchCandidates.at(id - 200).launch(p);
      else if (id >= 100) kCandidates.at(id - 100).launch(p);
      else if (opts.cand >= 0 && id != 0) candidate(id).launch(p);  // id 0 (cuBLAS) is the harness's warm-up
      else kLaunch[id](p);
    }
    const Candidate& candidate(int id) const {
      const std::vector<Candidate>* list = id == 9 ? &kCandidates : id == 10 ? &kPrefetchCandidates : nullptr;
      if (!list || opts.cand >= static_cast<int>(list->size())) {
        std::fprintf(stderr, "error: --cand needs --profile 9 (candidates 0 to %zu) or --profile 10 (0 to %zu)\n",
                     kCandidates.size() - 1, kPrefetchCandidates.size() - 1);
        std::exit(course::kExitFail);
      }
      return (*list)[opts.cand];
    }
  };
};
// --8<-- [end:program]

#include "matmul_harness.cuh"
