// fft.cu: batched 1D complex-to-complex FFTs (complex64, forward, unnormalised), made fast step by
// step and compared with cuFFT in the same run.
//
// Taught in docs/fast-matmul-fft/fft.md. X[k] = sum_n x[n] exp(-2 pi i n k / N), for `batch`
// contiguous transforms of power-of-two length N (2 to 4096).
//   v0  cuFFT (the peer)
//   v1  iterative radix-2 in global memory: a bit-reversal pass, then one launch per stage
//   v2  Stockham radix-2 in shared memory: one block per transform(s), one launch, no bit reversal
//   v3  Stockham radix-4 (a radix-2 stage when log2 N is odd): half the stages and barriers
//   v4  Stockham radix-8/4/2 with 16-byte loads: a third of the stages, two points per load
//   v5  v4 with N a template parameter (64 to 4096): every index computation is a constant
//   v6  four-step N = R1 x R2 (1024 = 32 x 32): R2 threads per transform, both passes of small DFTs
//       in registers, one transpose through shared memory (every power of two from 2 to 4096)
// Build: nvcc -O3 -arch=native -lcufft -o build/fft/fft kernels/fft/fft.cu
// Run:   ./build/fft/fft --n 1024 --batch 7    (checks every version against a float64 DFT)
//        ./build/fft/fft --bench               (also times N = 64 to 4096, N * batch = 2^24)
//
// course: gpu
// course: libs cufft
// course: run --n 1024 --batch 7
// course: run --n 2 --batch 5
// course: run --n 32 --batch 33
// course: run --n 4096 --batch 3
// course: run --n 128 --batch 1
// course: run --n 1024 --batch 7 --plant zeros-small
// course: run --n 4096 --batch 3 --plant zeros-small
// course: bench --bench
#include <type_traits>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_cufft.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// ---------------------------------------------------------------------------------------------
// CPU reference: the DFT by its definition, in float64 (O(N^2) per transform).
// --8<-- [start:reference]
static void dft_reference(int N, int batch, const float2* x, double* out /* 2*N*batch */) {
  std::vector<double> c(N), s(N);  // exp(-2 pi i m / N) for m = n*k mod N: exact index arithmetic
  for (int m = 0; m < N; ++m) c[m] = std::cos(2.0 * M_PI * m / N), s[m] = -std::sin(2.0 * M_PI * m / N);
  for (int b = 0; b < batch; ++b) {
    const float2* xb = x + static_cast<size_t>(b) * N;
    for (int k = 0; k < N; ++k) {
      double re = 0, im = 0;
      for (int n = 0; n < N; ++n) {
        const int m = static_cast<int>((static_cast<long long>(n) * k) % N);
        re += xb[n].x * c[m] - xb[n].y * s[m];
        im += xb[n].x * s[m] + xb[n].y * c[m];
      }
      out[2 * (static_cast<size_t>(b) * N + k)] = re;
      out[2 * (static_cast<size_t>(b) * N + k) + 1] = im;
    }
  }
}
// --8<-- [end:reference]

// Complex helpers. The twiddle table tw[m] = exp(-2 pi i m / N) is computed once on the host in
// float64 and read through the cache: more accurate than fast sincos, and cheap.
__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 csub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
__device__ __forceinline__ float2 mul_minus_i(float2 a) { return make_float2(a.y, -a.x); }  // a * (-i)

// ---------------------------------------------------------------------------------------------
// v1: iterative radix-2 (Cooley-Tukey, decimation in time) in global memory.
// --8<-- [start:v1]
__global__ void bit_reverse_copy(const float2* in, float2* out, int N, int log2n, size_t total) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int n = static_cast<int>(i % N);
  const size_t base = i - n;
  const int r = static_cast<int>(__brev(static_cast<unsigned>(n)) >> (32 - log2n));
  out[base + r] = in[i];  // element n of each transform goes to position bitreverse(n)
}

// One stage: butterflies of span `half`. Thread t handles one butterfly of one transform.
__global__ void radix2_stage(float2* x, const float2* tw, int N, int half, size_t butterflies) {
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= butterflies) return;
  const size_t transform = t / (N / 2);
  const int b = static_cast<int>(t % (N / 2));
  const int pos = b % half, group = b / half;
  const size_t i = transform * N + group * 2 * half + pos, j = i + half;
  const float2 w = tw[pos * (N / (2 * half))];  // exp(-2 pi i pos / (2 half))
  const float2 u = x[i], v = cmul(x[j], w);
  x[i] = cadd(u, v);
  x[j] = csub(u, v);
}
// --8<-- [end:v1]

// ---------------------------------------------------------------------------------------------
// v2 to v4: Stockham auto-sort FFT in shared memory. Every stage reads R points spaced N/R apart,
// twiddles them, does a size-R DFT in registers, and writes them spaced Ns apart at a position that
// already puts the output in natural order: no bit-reversal pass.
// --8<-- [start:butterflies]
template <int R>
__device__ __forceinline__ void dft_small(float2* v);

template <>
__device__ __forceinline__ void dft_small<2>(float2* v) {
  const float2 a = v[0], b = v[1];
  v[0] = cadd(a, b);
  v[1] = csub(a, b);
}
template <>
__device__ __forceinline__ void dft_small<4>(float2* v) {
  const float2 t0 = cadd(v[0], v[2]), t1 = csub(v[0], v[2]);
  const float2 t2 = cadd(v[1], v[3]), t3 = mul_minus_i(csub(v[1], v[3]));
  v[0] = cadd(t0, t2);
  v[2] = csub(t0, t2);
  v[1] = cadd(t1, t3);
  v[3] = csub(t1, t3);
}
template <>
__device__ __forceinline__ void dft_small<8>(float2* v) {  // two size-4 DFTs and one radix-2 step
  float2 e[4] = {v[0], v[2], v[4], v[6]}, o[4] = {v[1], v[3], v[5], v[7]};
  dft_small<4>(e);
  dft_small<4>(o);
  const float h = 0.70710678118654752f;  // exp(-2 pi i k / 8) for k = 1, 2, 3
  o[1] = make_float2(h * (o[1].x + o[1].y), h * (o[1].y - o[1].x));
  o[2] = mul_minus_i(o[2]);
  o[3] = make_float2(h * (o[3].y - o[3].x), -h * (o[3].x + o[3].y));
  for (int k = 0; k < 4; ++k) {
    v[k] = cadd(e[k], o[k]);
    v[k + 4] = csub(e[k], o[k]);
  }
}
// --8<-- [end:butterflies]

// --8<-- [start:stockham_stage]
// One radix-R Stockham stage on one transform held in shared memory `s` (in place: read everything,
// barrier, write). P threads share the transform; thread p does butterflies j = p, p + P, ...
// Every thread of the block calls it (the barriers must be reached by all); threads of a block's
// unused transform slots pass active = false and only take part in the barriers.
template <int R>
__device__ __forceinline__ void stockham_stage(float2* s, const float2* __restrict__ tw, int N, int Ns, int p,
                                               int P, bool active) {
  // Butterflies per thread: at most 8 / R with the launch shapes below. The loops are unrolled with
  // a guard so that v[][] lives in registers (a runtime index would put it in local memory).
  constexpr int kMaxPer = 8 / R;
  float2 v[kMaxPer][R];
  const int count = N / R;
#pragma unroll
  for (int n = 0; n < kMaxPer; ++n) {
    const int j = p + n * P;
    if (active && j < count) {
      const int k = j % Ns;  // position inside the current sub-transform of size Ns
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float2 x = s[j + r * count];
        v[n][r] = r == 0 ? x : cmul(x, tw[(r * k * (N / (Ns * R))) % N]);  // exp(-2 pi i r k / (Ns R))
      }
      dft_small<R>(v[n]);
    }
  }
  __syncthreads();  // every thread has read its inputs before anyone overwrites them
#pragma unroll
  for (int n = 0; n < kMaxPer; ++n) {
    const int j = p + n * P;
    if (active && j < count) {
      const int out = (j / Ns) * Ns * R + j % Ns;
#pragma unroll
      for (int r = 0; r < R; ++r) s[out + r * Ns] = v[n][r];
    }
  }
  __syncthreads();
}
// --8<-- [end:stockham_stage]

// --8<-- [start:stockham_kernel]
// A block holds T transforms of length N in shared memory; each has P = blockDim.x / T threads.
// RMAX is the largest radix used; smaller radices finish when log2 N is not a multiple.
template <int RMAX, bool VEC4>
__global__ void stockham_kernel(const float2* __restrict__ in, float2* __restrict__ out,
                                const float2* __restrict__ tw, int N, int T, int batch) {
  extern __shared__ float2 smem[];
  const int P = blockDim.x / T, which = threadIdx.x / P, p = threadIdx.x % P;
  const size_t first = static_cast<size_t>(blockIdx.x) * T;  // first transform of this block
  const int here = batch - static_cast<int>(first) < T ? batch - static_cast<int>(first) : T;
  const size_t base = first * N;
  const int points = here * N;
  // Load the block's transforms: consecutive threads read consecutive addresses (coalesced).
  if (VEC4) {  // two complex values per 16-byte load (N is even)
    const float4* in4 = reinterpret_cast<const float4*>(in + base);
    float4* s4 = reinterpret_cast<float4*>(smem);
    for (int i = threadIdx.x; i < points / 2; i += blockDim.x) s4[i] = in4[i];
  } else {
    for (int i = threadIdx.x; i < points; i += blockDim.x) smem[i] = in[base + i];
  }
  __syncthreads();
  float2* s = smem + which * N;
  const bool active = which < here;
  int Ns = 1;
  // All threads run the same stages (the barriers inside need every thread of the block).
  while (Ns < N) {
    const int left = N / Ns;
    if (RMAX >= 8 && left % 8 == 0) {
      stockham_stage<8>(s, tw, N, Ns, p, P, active);
      Ns *= 8;
    } else if (RMAX >= 4 && left % 4 == 0) {
      stockham_stage<4>(s, tw, N, Ns, p, P, active);
      Ns *= 4;
    } else {
      stockham_stage<2>(s, tw, N, Ns, p, P, active);
      Ns *= 2;
    }
  }
  if (VEC4) {
    float4* out4 = reinterpret_cast<float4*>(out + base);
    const float4* s4 = reinterpret_cast<const float4*>(smem);
    for (int i = threadIdx.x; i < points / 2; i += blockDim.x) out4[i] = s4[i];
  } else {
    for (int i = threadIdx.x; i < points; i += blockDim.x) out[base + i] = smem[i];
  }
}
// --8<-- [end:stockham_kernel]

// --8<-- [start:v5]
// v5: the same Stockham radix-8/4/2 FFT with N a template parameter. Every stage's radix, span Ns,
// and thread count are compile-time constants: loops unroll, divisions and remainders by powers of two
// become shifts and masks, and twiddle indices are computed with constants.
template <int N, int RMAX>
struct Fixed {
  static constexpr int P =
      (N / RMAX > N / 16 ? N / RMAX : N / 16) > 512
          ? 512
          : ((N / RMAX > N / 16 ? N / RMAX : N / 16) < 1 ? 1 : (N / RMAX > N / 16 ? N / RMAX : N / 16));
  static constexpr int T = 256 / P > 1 ? 256 / P : 1;  // transforms per block
};

template <int N, int Ns, int R, int P>
__device__ __forceinline__ void fixed_stage(float2* s, const float2* __restrict__ tw, int p, bool active) {
  constexpr int count = N / R, per = (count + P - 1) / P;
  float2 v[per][R];
#pragma unroll
  for (int n = 0; n < per; ++n) {
    const int j = p + n * P;
    if (active && (count % P == 0 || j < count)) {
      const int k = j % Ns;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float2 x = s[j + r * count];
        v[n][r] = r == 0 ? x : cmul(x, tw[r * k * (N / (Ns * R))]);
      }
      dft_small<R>(v[n]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < per; ++n) {
    const int j = p + n * P;
    if (active && (count % P == 0 || j < count)) {
      const int out = (j / Ns) * Ns * R + j % Ns;
#pragma unroll
      for (int r = 0; r < R; ++r) s[out + r * Ns] = v[n][r];
    }
  }
  __syncthreads();
}

template <int N, int Ns, int RMAX, int P>
__device__ __forceinline__ void fixed_stages(float2* s, const float2* __restrict__ tw, int p, bool active) {
  if constexpr (Ns < N) {
    constexpr int left = N / Ns;
    constexpr int R = (RMAX >= 8 && left % 8 == 0) ? 8 : (RMAX >= 4 && left % 4 == 0) ? 4 : 2;
    fixed_stage<N, Ns, R, P>(s, tw, p, active);
    fixed_stages<N, Ns * R, RMAX, P>(s, tw, p, active);
  }
}

template <int N>
__global__ void __launch_bounds__(Fixed<N, 8>::P * Fixed<N, 8>::T)
    stockham_fixed(const float2* __restrict__ in, float2* __restrict__ out, const float2* __restrict__ tw,
                   int batch) {
  constexpr int P = Fixed<N, 8>::P, T = Fixed<N, 8>::T, kThreads = P * T;
  __shared__ __align__(16) float2 smem[T * N];
  const int which = threadIdx.x / P, p = threadIdx.x % P;
  const size_t first = static_cast<size_t>(blockIdx.x) * T;
  const int here = batch - static_cast<int>(first) < T ? batch - static_cast<int>(first) : T;
  const float4* in4 = reinterpret_cast<const float4*>(in + first * N);
  float4* s4 = reinterpret_cast<float4*>(smem);
  if (here == T) {  // full block: fixed trip counts
#pragma unroll
    for (int i = threadIdx.x; i < T * N / 2; i += kThreads) s4[i] = in4[i];
  } else {
    for (int i = threadIdx.x; i < here * N / 2; i += kThreads) s4[i] = in4[i];
  }
  __syncthreads();
  fixed_stages<N, 1, 8, P>(smem + which * N, tw, p, which < here);
  float4* out4 = reinterpret_cast<float4*>(out + first * N);
  if (here == T) {
#pragma unroll
    for (int i = threadIdx.x; i < T * N / 2; i += kThreads) out4[i] = s4[i];
  } else {
    for (int i = threadIdx.x; i < here * N / 2; i += kThreads) out4[i] = s4[i];
  }
}
// --8<-- [end:v5]

// ---------------------------------------------------------------------------------------------
// --8<-- [start:v6]
// v6: the four-step FFT, every value in registers except for one transpose through shared memory.
// N = R1 * R2 with R2 = 2^floor(log2(N) / 2) and R1 = R2 or 2 * R2 (1024 = 32 x 32, 2048 = 64 x 32).
// With n = R2 n1 + n2 and k = k1 + R1 k2,
//   X[k1 + R1 k2] = sum_n2 W_R2^(n2 k2) W_N^(n2 k1) sum_n1 x[R2 n1 + n2] W_R1^(n1 k1),   W_M = exp(-2 pi i / M):
// R2 DFTs of length R1 down the columns, a twiddle, then R1 DFTs of length R2 along the rows. R2 threads
// share a transform (one warp for N = 1024). Handles every power of two from 2 to 4096.

// x * W_R^m, for R dividing 64 and m known once the loops are unrolled: the tests on m fold away,
// leaving a copy, a negation, a swap (m = R/4, 3R/4) or a multiply by two constants.
__device__ __forceinline__ float cos_2pi_64(int j) {  // cos(2 pi j / 64)
  const float c[17] = {1.0f, 0.99518472667219693f, 0.98078528040323043f, 0.95694033573220882f,
                       0.92387953251128674f, 0.88192126434835505f, 0.83146961230254524f, 0.77301045336273699f,
                       0.70710678118654757f, 0.63439328416364549f, 0.55557023301960229f, 0.47139673682599781f,
                       0.38268343236508984f, 0.29028467725446233f, 0.19509032201612833f, 0.09801714032956077f,
                       0.0f};
  j &= 63;
  return j <= 16 ? c[j] : j <= 32 ? -c[32 - j] : j <= 48 ? -c[j - 32] : c[64 - j];
}
template <int R>
__device__ __forceinline__ float2 mul_w(float2 x, int m) {
  m %= R;
  if (m == 0) return x;
  if (2 * m == R) return make_float2(-x.x, -x.y);
  if (4 * m == R) return mul_minus_i(x);
  if (4 * m == 3 * R) return make_float2(-x.y, x.x);  // x * i
  const int j = m * (64 / R);
  return cmul(x, make_float2(cos_2pi_64(j), -cos_2pi_64(j - 16)));  // sin t = cos(t - pi/2)
}

// In-place DFT of R = 1 to 64 values in registers, output in natural order. Above 8 it is the same
// decomposition one level down (R = 8 x R/8) with constant twiddles; every index is a constant.
template <int R>
__device__ __forceinline__ void dft_reg(float2* v) {
  if constexpr (R == 1) {
    return;
  } else if constexpr (R <= 8) {
    dft_small<R>(v);
  } else {
    constexpr int A = 8, B = R / 8;  // n = B a + b, k = ka + A kb
    float2 y[R];
#pragma unroll
    for (int b = 0; b < B; ++b) {
      float2 t[A];
#pragma unroll
      for (int a = 0; a < A; ++a) t[a] = v[B * a + b];
      dft_small<A>(t);
#pragma unroll
      for (int ka = 0; ka < A; ++ka) y[B * ka + b] = mul_w<R>(t[ka], b * ka);
    }
#pragma unroll
    for (int ka = 0; ka < A; ++ka) {
      float2 u[B];
#pragma unroll
      for (int b = 0; b < B; ++b) u[b] = y[B * ka + b];
      dft_reg<B>(u);
#pragma unroll
      for (int kb = 0; kb < B; ++kb) v[ka + A * kb] = u[kb];
    }
  }
}

constexpr int fourstep_r2(int log2n) { return 1 << (log2n / 2); }
constexpr int ilog2(int n) { return n <= 1 ? 0 : 1 + ilog2(n / 2); }

template <int N>
struct FourStep {
  static constexpr int R2 = fourstep_r2(ilog2(N)), R1 = N / R2;  // R1 = R2 or 2 R2
  static constexpr int P = R2;                                   // threads per transform
  static constexpr int kRow = R2 + 1;  // padded row: unpadded, a column read would hit one bank pair
  // Transforms' buffers. When a half-warp holds two transforms (P = 8), offset the second by half
  // the banks (a size of 8 mod 16 float2s) so their column reads do not collide either.
  static constexpr int kSlab = P >= 16 ? R1 * kRow : R1 * kRow + (24 - R1 * kRow % 16) % 16;
  // Launch shape, the fastest of the few tried on an H200: one transform per block once it fills a
  // warp (N >= 1024), else 128 threads. kMinBlocks is __launch_bounds__' minimum of resident blocks
  // per SM: 1 leaves ptxas free to spend registers; at N = 1024, 24 (all that shared memory holds on
  // Hopper) caps the registers so that 24 transforms fit per SM. Turing holds at most 16 blocks per SM,
  // and ptxas rejects a larger minimum there.
  static constexpr int T = P >= 32 ? 1 : 128 / P;  // transforms per block
  static constexpr int kThreads = P * T;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  static constexpr int kMinBlocks = N == 1024 ? 16 : 1;
#else
  static constexpr int kMinBlocks = N == 1024 ? 24 : 1;
#endif
};

// tw4[k1 * R2 + n2] = W_N^(n2 k1): the R2 threads of a transform read one row, coalesced.
template <int N>
__global__ void __launch_bounds__(FourStep<N>::kThreads, FourStep<N>::kMinBlocks)
    fourstep_kernel(const float2* __restrict__ in, float2* __restrict__ out, const float2* __restrict__ tw4,
                    int batch) {
  using F = FourStep<N>;
  constexpr int R1 = F::R1, R2 = F::R2;
  __shared__ float2 smem[F::T * F::kSlab];
  const int which = threadIdx.x / F::P, j = threadIdx.x % F::P;  // j: this thread's column n2
  const size_t t = static_cast<size_t>(blockIdx.x) * F::T + which;
  const bool active = t < static_cast<size_t>(batch);  // no early return: the barrier needs everyone
  const float2* x = in + t * N;
  float2* X = out + t * N;
  float2* s = smem + which * F::kSlab;
  // 1. Column n2 = j: x[R2 n1 + j] for n1 = 0..R1-1. Each load of the group reads R2 consecutive values.
  float2 v[R1];
#pragma unroll
  for (int n1 = 0; n1 < R1; ++n1) v[n1] = active ? x[R2 * n1 + j] : make_float2(0.0f, 0.0f);
  // 2. The column's DFT over n1 (giving k1), then the twiddle W_N^(j k1).
  dft_reg<R1>(v);
#pragma unroll
  for (int k1 = 1; k1 < R1; ++k1) v[k1] = cmul(v[k1], tw4[k1 * R2 + j]);
  // 3. Transpose: element (k1, n2) goes to s[k1 * (R2 + 1) + n2].
#pragma unroll
  for (int k1 = 0; k1 < R1; ++k1) s[k1 * F::kRow + j] = v[k1];
  if constexpr (F::P <= 32) {
    __syncwarp();  // a transform's threads are all in one warp
  } else {
    __syncthreads();
  }
  // 4. Thread j takes rows k1 = j + R2 r, does their DFT over n2 (giving k2), writes X[k1 + R1 k2]:
  //    each store of the group writes R2 consecutive values.
#pragma unroll
  for (int r = 0; r < R1 / R2; ++r) {
    float2* u = v + r * R2;
#pragma unroll
    for (int n2 = 0; n2 < R2; ++n2) u[n2] = s[(j + R2 * r) * F::kRow + n2];
    dft_reg<R2>(u);
    if (active) {
#pragma unroll
      for (int k2 = 0; k2 < R2; ++k2) X[j + R2 * r + R1 * k2] = u[k2];
    }
  }
}
// --8<-- [end:v6]

// ---------------------------------------------------------------------------------------------
struct Plan {
  int N, log2n, batch;
  const float2* tw;   // device twiddle table, N entries: tw[m] = exp(-2 pi i m / N)
  const float2* tw4;  // v6's table, N entries: tw4[k1 * R2 + n2] = exp(-2 pi i n2 k1 / N)
};

static void launch_v1(const Plan& p, const float2* in, float2* out) {
  const size_t total = static_cast<size_t>(p.N) * p.batch, butterflies = total / 2;
  constexpr int kThreads = 256;
  bit_reverse_copy<<<static_cast<unsigned>(course::ceil_div<size_t>(total, kThreads)), kThreads>>>(
      in, out, p.N, p.log2n, total);
  CUDA_CHECK_LAUNCH();
  for (int half = 1; half < p.N; half *= 2) {
    radix2_stage<<<static_cast<unsigned>(course::ceil_div<size_t>(butterflies, kThreads)), kThreads>>>(
        out, p.tw, p.N, half, butterflies);
    CUDA_CHECK_LAUNCH();
  }
}

// --8<-- [start:launch_stockham]
// Threads per transform: N / RMAX butterflies per stage, at most 8 per thread, at most 512 per block.
// Transforms per block: enough to give the block about 256 threads (small N) and at least 4 KiB of data.
template <int RMAX, bool VEC4>
static void launch_stockham(const Plan& p, const float2* in, float2* out) {
  const int per_transform = std::max(1, std::min(512, std::max(p.N / RMAX, p.N / 2 / 8)));
  const int T = std::max(1, std::min(p.batch, 256 / per_transform));
  const int blocks = course::ceil_div(p.batch, T);
  const size_t smem = static_cast<size_t>(T) * p.N * sizeof(float2);
  stockham_kernel<RMAX, VEC4><<<blocks, T * per_transform, smem>>>(in, out, p.tw, p.N, T, p.batch);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:launch_stockham]
static void launch_v2(const Plan& p, const float2* in, float2* out) { launch_stockham<2, false>(p, in, out); }
static void launch_v3(const Plan& p, const float2* in, float2* out) { launch_stockham<4, false>(p, in, out); }
static void launch_v4(const Plan& p, const float2* in, float2* out) { launch_stockham<8, true>(p, in, out); }

template <int N>
static void launch_fixed(const Plan& p, const float2* in, float2* out) {
  constexpr int T = Fixed<N, 8>::T;
  stockham_fixed<N><<<course::ceil_div(p.batch, T), Fixed<N, 8>::P * T>>>(in, out, p.tw, p.batch);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [start:dispatch]
// Calls f(std::integral_constant<int, N>) for the power of two N = n, trying LO, 2 LO, ... 4096: the one
// place where a runtime length becomes a template argument. False if n is none of them.
template <int LO, typename F>
static bool with_compile_time_n(int n, F&& f) {
  if (n == LO) return f(std::integral_constant<int, LO>{}), true;
  if constexpr (LO < 4096) return with_compile_time_n<2 * LO>(n, f);
  return false;
}
// --8<-- [end:dispatch]

// Compile-time N exists for 64..4096; other sizes fall back to v4.
static void launch_v5(const Plan& p, const float2* in, float2* out) {
  if (!with_compile_time_n<64>(p.N, [&](auto n) { launch_fixed<decltype(n)::value>(p, in, out); }))
    launch_v4(p, in, out);
}

// --8<-- [start:launch_v6]
template <int N>
static void launch_fourstep(const Plan& p, const float2* in, float2* out) {
  using F = FourStep<N>;
  fourstep_kernel<N><<<course::ceil_div(p.batch, F::T), F::kThreads>>>(in, out, p.tw4, p.batch);
  CUDA_CHECK_LAUNCH();
}
static void launch_v6(const Plan& p, const float2* in, float2* out) {  // every power of two from 2 to 4096
  if (!with_compile_time_n<2>(p.N, [&](auto n) { launch_fourstep<decltype(n)::value>(p, in, out); }))
    launch_v5(p, in, out);  // not reached: main accepts powers of two up to 4096
}
// --8<-- [end:launch_v6]

static void allow_large_smem() {  // N = 4096 needs 32 KiB per transform; allow up to 64 KiB
  CUDA_CHECK(cudaFuncSetAttribute(stockham_kernel<2, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CUDA_CHECK(cudaFuncSetAttribute(stockham_kernel<4, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CUDA_CHECK(cudaFuncSetAttribute(stockham_kernel<8, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
}

using Launcher = void (*)(const Plan&, const float2*, float2*);
struct Version {
  int id;
  const char* name;
  Launcher launch;  // nullptr: cuFFT
};
static const Version kVersions[] = {
    {0, "v0 cuFFT", nullptr},
    {1, "v1 radix-2, global memory", launch_v1},
    {2, "v2 Stockham radix-2, shared", launch_v2},
    {3, "v3 Stockham radix-4", launch_v3},
    {4, "v4 Stockham radix-8, 16-byte loads", launch_v4},
    {5, "v5 radix-8, N known at compile time", launch_v5},
    {6, "v6 four-step, registers + one transpose", launch_v6},
};

static float2* make_twiddles(int N) {
  std::vector<float2> tw(N);
  for (int m = 0; m < N; ++m)
    tw[m] = make_float2(static_cast<float>(std::cos(2.0 * M_PI * m / N)),
                        static_cast<float>(-std::sin(2.0 * M_PI * m / N)));
  float2* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, N * sizeof(float2)));
  CUDA_CHECK(cudaMemcpy(d, tw.data(), N * sizeof(float2), cudaMemcpyHostToDevice));
  return d;
}

// v6's table, row k1 (R1 rows of R2): exp(-2 pi i n2 k1 / N), n2 * k1 < N so no reduction is needed.
static float2* make_fourstep_twiddles(int N, int log2n) {
  const int R2 = fourstep_r2(log2n), R1 = N / R2;
  std::vector<float2> tw(N);
  for (int k1 = 0; k1 < R1; ++k1)
    for (int n2 = 0; n2 < R2; ++n2)
      tw[k1 * R2 + n2] = make_float2(static_cast<float>(std::cos(2.0 * M_PI * n2 * k1 / N)),
                                     static_cast<float>(-std::sin(2.0 * M_PI * n2 * k1 / N)));
  float2* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, N * sizeof(float2)));
  CUDA_CHECK(cudaMemcpy(d, tw.data(), N * sizeof(float2), cudaMemcpyHostToDevice));
  return d;
}

// --8<-- [start:cufft]
struct CufftPlan {
  cufftHandle h = 0;
  size_t workspace = 0;
  CufftPlan(int N, int batch) {
    CUFFT_CHECK(cufftPlan1d(&h, N, CUFFT_C2C, batch));
    CUFFT_CHECK(cufftGetSize(h, &workspace));  // the scratch memory cuFFT allocated for this plan
  }
  ~CufftPlan() { cufftDestroy(h); }
  void forward(const float2* in, float2* out) const {
    // cuFFT takes a non-const input pointer; an out-of-place forward C2C transform does not write it.
    CUFFT_CHECK(cufftExecC2C(h, const_cast<cufftComplex*>(reinterpret_cast<const cufftComplex*>(in)),
                             reinterpret_cast<cufftComplex*>(out), CUFFT_FORWARD));
  }
};
// --8<-- [end:cufft]

static void run_version(const Version& v, const Plan& p, const CufftPlan& cf, const float2* in, float2* out) {
  if (v.launch) v.launch(p, in, out);
  else cf.forward(in, out);
}

// What every run of the versions needs on the device: the input (uploaded), the output, our plan with
// its twiddle tables and cuFFT's plan; freed when it goes out of scope.
struct DeviceRun {
  Plan p;
  CufftPlan cf;
  float2 *d_in = nullptr, *d_out = nullptr;
  DeviceRun(int N, int batch, const std::vector<float>& host)
      : p{N, ilog2(N), batch, make_twiddles(N), make_fourstep_twiddles(N, ilog2(N))}, cf(N, batch) {
    const size_t n = static_cast<size_t>(N) * batch;
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float2)));
    CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float2)));
    CUDA_CHECK(cudaMemcpy(d_in, host.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
  }
  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;
  ~DeviceRun() {
    CUDA_CHECK(cudaFree(const_cast<float2*>(p.tw)));
    CUDA_CHECK(cudaFree(const_cast<float2*>(p.tw4)));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
  }
};

// --8<-- [start:tolerance]
// Rounding in a float32 FFT moves every output of a transform by about u log2(N) times the norm of the
// transform's input (u = 2^-24), whatever that output's own size: a bin that cancels to almost zero gets
// the same absolute error as a large one. So the tolerance is absolute per transform, proportional to
// its input's norm, and it follows the data: a quiet transform in the batch gets a small tolerance.
// c = 20 equals the fixed atol this check once used, 1e-6 sqrt(N) (log2 N + 1), on inputs in [-1, 1).
static std::vector<double> fft_atol(const float* x /* 2 * N * batch */, int N, int batch, double c) {
  int log2n = 0;
  while ((1 << log2n) < N) ++log2n;
  std::vector<double> atol(2 * static_cast<size_t>(N) * batch);
  for (int b = 0; b < batch; ++b) {
    const size_t first = 2 * static_cast<size_t>(b) * N, last = first + 2 * static_cast<size_t>(N);
    double norm2 = 0;
    for (size_t i = first; i < last; ++i) norm2 += static_cast<double>(x[i]) * x[i];
    std::fill(atol.begin() + first, atol.begin() + last, c * 0x1p-24 * (log2n + 1) * std::sqrt(norm2));
  }
  return atol;
}
// --8<-- [end:tolerance]

static bool check_all(int N, int batch, uint64_t seed, bool plant) {
  const size_t n = static_cast<size_t>(N) * batch;
  std::vector<float> host(2 * n), got(2 * n);
  course::fill_uniform(host, seed);
  // Every third transform is 2^20 times quieter (an exact scaling): batches mix loud and quiet signals,
  // and a quiet transform's outputs are all below a tolerance fixed for the loud ones.
  for (int b = 1; b < batch; b += 3)
    for (size_t i = 2 * static_cast<size_t>(b) * N; i < 2 * static_cast<size_t>(b + 1) * N; ++i) host[i] *= 0x1p-20f;
  std::vector<double> want(2 * n);
  dft_reference(N, batch, reinterpret_cast<const float2*>(host.data()), want.data());
  const int log2n = ilog2(N);
  const DeviceRun dev(N, batch, host);
  const Plan& p = dev.p;
  const CufftPlan& cf = dev.cf;
  float2 *const d_in = dev.d_in, *const d_out = dev.d_out;
  const std::vector<double> atol = fft_atol(host.data(), N, batch, 20);
  const auto check = [&](const char* name, const float* out) {
    return course::check_close_each(name, out, want.data(), atol.data(), 2 * n, 1e-4);
  };
  bool ok = true;
  for (const Version& v : kVersions) {
    course::poison(d_out, n * sizeof(float2));
    run_version(v, p, cf, d_in, d_out);
    CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float2), cudaMemcpyDeviceToHost));
    char name[64];
    std::snprintf(name, sizeof(name), "fft_v%d_n%d_batch%d", v.id, N, batch);
    ok &= check(name, got.data());
  }
  if (plant) {  // the last version's output, with zeros where the reference is below the old fixed atol
    const double old_atol = 1e-6 * std::sqrt(static_cast<double>(N)) * (log2n + 1);
    const size_t planted = course::plant_zeros_small(got.data(), want.data(), 2 * n, old_atol);
    const bool passed = course::verdict_quietly([&] { return check("planted", got.data()); });
    ok &= course::report_planted_zeros_small(planted, passed);
  }
  return ok;
}

// --8<-- [start:bench]
// Each size moves the same 2^24 complex values (128 MiB in, 128 MiB out). Each version is checked
// against cuFFT's output on the same input before it is timed.
static bool bench_size(int N, uint64_t seed) {
  const int batch = (1 << 24) / N;
  const size_t n = static_cast<size_t>(N) * batch;
  std::vector<float> host(2 * n), ref(2 * n), got(2 * n);
  course::fill_uniform(host, seed);
  const int log2n = ilog2(N);
  const DeviceRun dev(N, batch, host);
  const Plan& p = dev.p;
  const CufftPlan& cf = dev.cf;
  float2 *const d_in = dev.d_in, *const d_out = dev.d_out;
  cf.forward(d_in, d_out);
  CUDA_CHECK(cudaMemcpy(ref.data(), d_out, n * sizeof(float2), cudaMemcpyDeviceToHost));
  char cs[64];
  std::snprintf(cs, sizeof(cs), "fft N=%d batch=%d", N, batch);
  const std::vector<double> atol = fft_atol(host.data(), N, batch, 40);  // both sides round: twice the error
  const double bytes = 2.0 * n * sizeof(float2), flops = 5.0 * n * log2n;  // 5 N log2 N per transform
  bool ok = true;
  for (const Version& v : kVersions) {
    if (v.id != 0) {
      course::poison(d_out, n * sizeof(float2));
      run_version(v, p, cf, d_in, d_out);
      CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float2), cudaMemcpyDeviceToHost));
      char name[64];
      std::snprintf(name, sizeof(name), "fft_v%d_vs_cufft_n%d", v.id, N);
      ok &= course::check_close_each(name, got.data(), ref.data(), atol.data(), 2 * n, 1e-4);
    }
    const float ms = course::time_kernel_ms([&] { run_version(v, p, cf, d_in, d_out); });
    // Workspace: cuFFT's scratch; for ours the twiddle tables.
    const double ws = v.id == 0 ? static_cast<double>(cf.workspace) : (v.id == 6 ? 2.0 : 1.0) * N * sizeof(float2);
    course::print_bench(cs, v.name, ms, bytes, flops, v.id == 0,
                        {{"size", N}, {"workspace_bytes", ws}, {"peak_bytes", bytes + ws}});
  }
  return ok;
}
// --8<-- [end:bench]

// One launch of one version on random input, for a profiler (kernels/fft/fft_ncu.py); no check.
static int profile_once(const Version& v, int N, int batch, uint64_t seed) {
  const size_t n = static_cast<size_t>(N) * batch;
  std::vector<float> host(2 * n);
  course::fill_uniform(host, seed);
  const DeviceRun dev(N, batch, host);
  run_version(v, dev.p, dev.cf, dev.d_in, dev.d_out);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("profiled %s at N=%d batch=%d\n", v.name, N, batch);
  return 0;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long N = args.get_int("--n", 1024, 2, 4096), batch = args.get_int("--batch", 7, 1);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const long long profile = args.get_int("--profile", -1, 0, 6);  // -1: not profiling
  const bool bench = args.has("--bench");
  const bool plant = course::plant_zeros_small_requested(args);
  args.finish();
  if ((N & (N - 1)) != 0) {
    std::fprintf(stderr, "error: --n must be a power of two from 2 to 4096 (got %lld)\n", N);
    return course::kExitFail;
  }
  if (N * batch > (1LL << 26)) {
    std::fprintf(stderr, "error: N * batch must be at most 2^26 (got %lld)\n", N * batch);
    return course::kExitFail;
  }
  if (profile >= 0 && bench) {
    std::fprintf(stderr, "error: --profile and --bench are separate modes; give one\n");
    return course::kExitFail;
  }
  allow_large_smem();
  if (profile >= 0) return profile_once(kVersions[profile], static_cast<int>(N), static_cast<int>(batch), seed);
  bool ok = check_all(static_cast<int>(N), static_cast<int>(batch), seed, plant);
  if (ok && bench)
    for (int n = 64; n <= 4096; n *= 2) ok &= bench_size(n, seed + 10);
  return ok ? 0 : course::kExitFail;
}
