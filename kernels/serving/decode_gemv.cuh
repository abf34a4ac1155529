// decode_gemv.cuh: the decode step's bf16 GEMV for batch 1 to 8, with the small kernels around it fused in:
// out[b][row] = x[b] . W[row] for weights stored output-major (n x k row-major, as torch.nn.Linear stores
// them), one warp per output row, every weight read once for all batch rows. Its prologue stages the
// batch's input rows in shared memory, optionally as the residual add and RMSNorm (AddNorm); its epilogue
// stores bf16 or fp32, or the MLP's SiLU-and-multiply of a gate row and its up row (SiluMul). On sm_90 and
// later it takes part in Programmatic Dependent Launch: it starts loading weights before the kernel
// before it has finished. Included by decode_step.cu; taught in docs/serving/decode-step.md.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "bf16_vectors.cuh"
#include "silu_mul.cuh"

namespace gemv {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxBatch = 8;
constexpr int kUnroll = 8;  // 16-byte weight loads a lane has in flight per row: 4 KiB a warp

enum class Prologue { kCopy, kAddNorm };
enum class Epilogue { kBf16, kFp32, kSiluMul };

struct Args {
  const __nv_bfloat16* x;             // [batch][k]: the input, or (AddNorm) the delta added to the residual
  const __nv_bfloat16* residual_in;   // AddNorm: [batch][k], read
  __nv_bfloat16* residual_out;        // AddNorm: [batch][k], residual_in + x rounded to bf16 (block 0 writes it)
  const __nv_bfloat16* norm_weight;   // AddNorm: [k]
  float eps;
  const __nv_bfloat16* w;             // [n][k], or (SiluMul) [2n][k]: the gate rows, then the up rows
  void* out;                          // [batch][n], bf16 or (Fp32) fp32
  int n, k;                           // k a multiple of 8: every row starts on a 16-byte boundary
};

// --8<-- [start:pdl]
// Programmatic Dependent Launch (sm_90+). launch_dependents lets the next kernel in the stream start
// launching; wait blocks until every kernel before this one has finished and its writes are visible.
// Both are no-ops when the kernel was launched without the attribute. Before wait, a kernel may only read
// what no earlier kernel of the step writes: here, the weights.
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_previous_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// --8<-- [end:pdl]

// --8<-- [start:prologue]
// The batch's input rows into shared memory (xs, [kBatch][k] bf16). AddNorm is fused_add_rmsnorm.cuh's
// arithmetic: s = bf16(residual + delta), inv_rms = rsqrt(mean(s^2) + eps), y = bf16(s * inv_rms * w). Every
// block recomputes it from L2 (a few KiB a row); only block 0 stores the new residual, into a second
// buffer, so no block reads a residual another has already updated.
template <int kBatch, Prologue kPro>
__device__ __forceinline__ void stage_inputs(const Args& a, __nv_bfloat16* xs) {
  const int vecs = a.k / 8;
  uint4* xs_vec = reinterpret_cast<uint4*>(xs);
  if constexpr (kPro == Prologue::kCopy) {
    const uint4* x_vec = reinterpret_cast<const uint4*>(a.x);
    for (int v = threadIdx.x; v < kBatch * vecs; v += kThreads) xs_vec[v] = x_vec[v];
    return;
  } else {
    __shared__ float warp_squares[kBatch][kWarps];
    float squares[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      squares[b] = 0.0f;
      const uint4* x_vec = reinterpret_cast<const uint4*>(a.x + static_cast<size_t>(b) * a.k);
      const uint4* r_vec = reinterpret_cast<const uint4*>(a.residual_in + static_cast<size_t>(b) * a.k);
      uint4* out_vec = reinterpret_cast<uint4*>(a.residual_out + static_cast<size_t>(b) * a.k);
      for (int v = threadIdx.x; v < vecs; v += kThreads) {
        float d[8], r[8], s[8];
        unpack8(x_vec[v], d);
        unpack8(r_vec[v], r);
#pragma unroll
        for (int j = 0; j < 8; ++j) s[j] = d[j] + r[j];
        const uint4 rounded = pack8(s);
        xs_vec[b * vecs + v] = rounded;
        if (blockIdx.x == 0) out_vec[v] = rounded;
        unpack8(rounded, s);  // the norm sees the stored bf16 values
#pragma unroll
        for (int j = 0; j < 8; ++j) squares[b] = fmaf(s[j], s[j], squares[b]);
      }
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) squares[b] += __shfl_xor_sync(0xffffffffu, squares[b], offset);
      if (lane == 0) warp_squares[b][warp] = squares[b];
    }
    __syncthreads();
    const uint4* w_vec = reinterpret_cast<const uint4*>(a.norm_weight);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += warp_squares[b][w];  // a fixed order: every block agrees
      const float inv_rms = rsqrtf(total / a.k + a.eps);
      for (int v = threadIdx.x; v < vecs; v += kThreads) {  // the vectors this thread stored above
        float s[8], w[8], y[8];
        unpack8(xs_vec[b * vecs + v], s);
        unpack8(w_vec[v], w);
#pragma unroll
        for (int j = 0; j < 8; ++j) y[j] = s[j] * inv_rms * w[j];
        xs_vec[b * vecs + v] = pack8(y);
      }
    }
  }
}
// --8<-- [end:prologue]

// --8<-- [start:kernel]
// One warp per output row (two rows, a gate row and its up row, for SiluMul); the rows are dealt to the
// warps of the grid in turn. A lane reads 16 bytes of a weight row at a time, kUnroll of them before it
// uses any, and multiplies each into all kBatch input rows from shared memory. The warp's partial sums
// meet through shuffles in a fixed order: the result does not depend on the grid or the batch.
template <int kBatch, Prologue kPro, Epilogue kEpi>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const Args a) {
  extern __shared__ uint4 staged[];  // [kBatch][k] bf16
  const __nv_bfloat16* xs = reinterpret_cast<const __nv_bfloat16*>(staged);
  constexpr int kRows = kEpi == Epilogue::kSiluMul ? 2 : 1;
  constexpr int kChunk = 32 * kUnroll;  // 16-byte vectors a warp reads per pass over a row
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, vecs = a.k / 8;
  int row = blockIdx.x * kWarps + warp;

  // The weights depend on nothing this step computes: the first pass of the first row is requested
  // before waiting for the kernel before, so the loads overlap its tail.
  uint4 wv[kRows][kUnroll];
  auto load_pass = [&](int at_row, int first) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4* w_row =
          reinterpret_cast<const uint4*>(a.w + (static_cast<size_t>(at_row) + static_cast<size_t>(r) * a.n) * a.k);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int v = first + u * 32 + lane;
        wv[r][u] = v < vecs ? __ldcs(w_row + v) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  if (row < a.n) load_pass(row, 0);
  allow_next_kernel();
  wait_for_previous_kernels();
  stage_inputs<kBatch, kPro>(a, reinterpret_cast<__nv_bfloat16*>(staged));
  __syncthreads();

  bool loaded = true;
  for (; row < a.n; row += gridDim.x * kWarps) {
    float acc[kRows][kBatch];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int b = 0; b < kBatch; ++b) acc[r][b] = 0.0f;
    for (int first = 0; first < vecs; first += kChunk) {
      if (!loaded) load_pass(row, first);
      loaded = false;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int v = first + u * 32 + lane;
        if (v >= vecs) break;
        float w[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) unpack8(wv[r][u], w[r]);
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          float x[8];
          unpack8(reinterpret_cast<const uint4*>(xs + static_cast<size_t>(b) * a.k)[v], x);
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r][b] = fmaf(w[r][j], x[j], acc[r][b]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) acc[r][b] += __shfl_xor_sync(0xffffffffu, acc[r][b], offset);
    if (lane < kBatch) {  // lane b stores batch row b's output
      float value = 0.0f;
#pragma unroll
      for (int b = 0; b < kBatch; ++b) value = lane == b ? acc[0][b] : value;
      const size_t at = static_cast<size_t>(lane) * a.n + row;
      if constexpr (kEpi == Epilogue::kFp32) {
        static_cast<float*>(a.out)[at] = value;
      } else if constexpr (kEpi == Epilogue::kBf16) {
        static_cast<__nv_bfloat16*>(a.out)[at] = __float2bfloat16(value);
      } else {  // gate and up rounded to bf16, as the unfused step stores them, then silu_mul.cuh's arithmetic
        float up = 0.0f;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) up = lane == b ? acc[1][b] : up;
        const float gate = __bfloat162float(__float2bfloat16(value));
        up = __bfloat162float(__float2bfloat16(up));
        static_cast<__nv_bfloat16*>(a.out)[at] = __float2bfloat16(swiglu::silu(gate) * up);
      }
    }
  }
}
// --8<-- [end:kernel]

// The largest dynamic shared memory a block of gemv_kernel may ask for on this device.
template <int kBatch, Prologue kPro, Epilogue kEpi>
inline size_t max_staged_bytes() {
  static const size_t bytes = [] {
    int device = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attrs;
    CUDA_CHECK(cudaFuncGetAttributes(&attrs, gemv_kernel<kBatch, kPro, kEpi>));
    const int dynamic = optin - static_cast<int>(attrs.sharedSizeBytes);
    CUDA_CHECK(cudaFuncSetAttribute(gemv_kernel<kBatch, kPro, kEpi>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    dynamic));
    return static_cast<size_t>(dynamic);
  }();
  return bytes;
}

// The grid: a row per warp, at most as many blocks as fit on an SM at once and no more than kBlocksPerSm
// (a grid-stride loop deals out the rest), so that every block runs in one wave and the AddNorm prologue
// is recomputed a bounded number of times (the logits have 128,256 rows). Found once per shared-memory
// size, on the eager step that precedes every capture.
constexpr int kBlocksPerSm = 4;

template <int kBatch, Prologue kPro, Epilogue kEpi>
inline int blocks_per_sm(size_t smem) {
  static std::map<size_t, int> known;
  const auto found = known.find(smem);
  if (found != known.end()) return found->second;
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, gemv_kernel<kBatch, kPro, kEpi>, kThreads, smem));
  blocks = std::max(1, std::min(blocks, kBlocksPerSm));
  known[smem] = blocks;
  return blocks;
}

template <int kBatch, Prologue kPro, Epilogue kEpi>
inline void launch_batch(const Args& a, int sms, bool pdl, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(kBatch) * a.k * sizeof(__nv_bfloat16);
  if (smem > max_staged_bytes<kBatch, kPro, kEpi>()) {
    std::fprintf(stderr, "error: gemv: %d rows of %d inputs need %zu bytes of shared memory, more than the "
                 "device has\n", kBatch, a.k, smem);
    std::exit(course::kExitFail);
  }
  cudaLaunchConfig_t config = {};
  const int blocks = std::min(course::ceil_div(a.n, kWarps), sms * blocks_per_sm<kBatch, kPro, kEpi>(smem));
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = s;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, gemv_kernel<kBatch, kPro, kEpi>, a));
}

// batch in 1..kMaxBatch (fits_batch says whether the shared memory allows it); n >= 1, k a multiple of 8.
template <Prologue kPro, Epilogue kEpi>
inline void launch(const Args& a, int batch, int sms, bool pdl, cudaStream_t s) {
  switch (batch) {
    case 1: launch_batch<1, kPro, kEpi>(a, sms, pdl, s); break;
    case 2: launch_batch<2, kPro, kEpi>(a, sms, pdl, s); break;
    case 3: launch_batch<3, kPro, kEpi>(a, sms, pdl, s); break;
    case 4: launch_batch<4, kPro, kEpi>(a, sms, pdl, s); break;
    case 5: launch_batch<5, kPro, kEpi>(a, sms, pdl, s); break;
    case 6: launch_batch<6, kPro, kEpi>(a, sms, pdl, s); break;
    case 7: launch_batch<7, kPro, kEpi>(a, sms, pdl, s); break;
    case 8: launch_batch<8, kPro, kEpi>(a, sms, pdl, s); break;
    default:
      std::fprintf(stderr, "error: gemv: batch %d is outside 1..%d\n", batch, kMaxBatch);
      std::exit(course::kExitFail);
  }
}

// Whether the GEMV can take this batch with inputs of up to max_k elements a row: at most kMaxBatch rows,
// staged in the shared memory one block may have (128 KiB at batch 8 and k = 8192; sm_75 has 64 KiB).
inline bool fits_batch(int batch, int max_k) {
  int device = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const size_t reserve = 1024;  // the prologue's static shared memory
  return batch >= 1 && batch <= kMaxBatch &&
         static_cast<size_t>(batch) * max_k * sizeof(__nv_bfloat16) + reserve <= static_cast<size_t>(optin);
}

// Programmatic Dependent Launch needs sm_90 or later.
inline bool has_pdl() {
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

}  // namespace gemv
