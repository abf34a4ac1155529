// attention_naive.cu: attention as three library-and-course kernels, O = softmax(scale * Q K^T + mask) V,
// with the N x N score matrix materialised in device memory; checked against a float64 reference,
// timed on the chapter's benchmark, and its memory measured at growing sequence lengths.
//
// Taught in docs/attention/three-kernels.md. bf16 Q, K, V and O ([batch][heads][seq][dim]):
//   1 S = scale * Q K^T      cuBLAS cublasGemmStridedBatchedEx, bf16 in, fp32 scores out
//   2 mask                   a small kernel writes -inf where a key is padding or after the query
//   3 P = softmax(S)         the course's softmax_block (kernels/memory-model/softmax.cuh), fp32
//   4 P -> bf16              a conversion, so that the next multiply runs on tensor cores
//   5 O = P V                cuBLAS again, bf16 in, fp32 accumulate, bf16 out
// (Three kernels in spirit, five launches in fact: steps 2 and 4 are the glue between them.)
// Build: nvcc -std=c++17 -O3 -arch=native -lcublas -o build/attention/attention_naive
//        kernels/attention/attention_naive.cu
// Run:   ./build/attention/attention_naive --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
//        ./build/attention/attention_naive --bench   (b4 h16 s4096 d128; memory up to running out)
// Needs compute capability 8.0 (bf16 GEMMs on tensor cores).
//
// course: gpu
// course: libs cublas
// course: run --batch 3 --heads 2 --seq 127 --dim 64 --padding
// course: run --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 1 --heads 3 --seq 333 --dim 64 --causal
// course: bench --bench
// course: invariant grows seq
#include <cuda_bf16.h>

#include <string>

#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../memory-model/softmax.cuh"
#include "attention_common.cuh"

using bf16 = __nv_bfloat16;

// --8<-- [start:glue]
// Step 2: -inf where query i may not see key j (-inf is what softmax.cuh's rules expect of a mask).
__global__ void apply_mask(float* scores, const int* key_len, int heads, int seq, bool causal, long long total) {
  for (long long e = blockIdx.x * 1LL * blockDim.x + threadIdx.x; e < total; e += 1LL * gridDim.x * blockDim.x) {
    const int j = static_cast<int>(e % seq), i = static_cast<int>(e / seq % seq);
    const int b = static_cast<int>(e / (1LL * seq * seq) / heads);
    if (j >= key_len[b] || (causal && j > i)) scores[e] = SOFTMAX_NEG_INF;
  }
}

// Step 4: fp32 probabilities to bf16, the input type of the second tensor-core GEMM.
__global__ void to_bf16(const float* __restrict__ in, bf16* __restrict__ out, long long total) {
  for (long long e = blockIdx.x * 1LL * blockDim.x + threadIdx.x; e < total; e += 1LL * gridDim.x * blockDim.x)
    out[e] = __float2bfloat16(in[e]);
}
// --8<-- [end:glue]

struct Buffers {
  attn::DeviceInputs in;
  bf16* o = nullptr;
  float *scores = nullptr, *probs = nullptr;  // seq x seq per (batch, head), fp32
  bf16* probs_bf16 = nullptr;                 // reuses the scores' memory (they are dead by then)
  double bytes = 0, score_bytes = 0;
};

// Allocates the two score matrices; returns false (and frees what it got) when the device memory
// runs out. The caller generates and uploads the inputs only after this succeeded: at the largest
// lengths they are gigabytes of host memory, wasted when the scores cannot fit.
bool allocate_scores(const attn::Shape& s, Buffers& d) {
  const size_t score_elems = static_cast<size_t>(s.batch) * s.heads * s.seq * s.seq;
  d.score_bytes = 2.0 * score_elems * sizeof(float);
  for (float** slot : {&d.scores, &d.probs}) {
    const cudaError_t err = cudaMalloc(slot, score_elems * sizeof(float));
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: running out is an answer here, not a failure
      if (slot == &d.probs) CUDA_CHECK(cudaFree(d.scores));
      return false;
    }
    CUDA_CHECK(err);
  }
  d.probs_bf16 = reinterpret_cast<bf16*>(d.scores);
  return true;
}

void release(const Buffers& d) {
  d.in.release();
  attn::device_free({d.o, d.scores, d.probs});
}

// --8<-- [start:launch]
// cuBLAS is column-major; a row-major [seq][dim] matrix is its transpose. Row-major S = Q K^T is
// column-major S^T = K Q^T: op(A) = K (column-major K^T, transposed back), B = Q^T (column-major
// view of row-major Q). One strided-batched call covers every (batch, head).
void attention_naive(cublasHandle_t handle, const attn::Shape& s, const Buffers& d) {
  const long long bh = 1LL * s.batch * s.heads, head = 1LL * s.seq * s.dim, square = 1LL * s.seq * s.seq;
  const float scale = static_cast<float>(s.scale()), one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.seq, s.seq, s.dim, &scale, d.in.k,
                                          CUDA_R_16BF, s.dim, head, d.in.q, CUDA_R_16BF, s.dim, head, &zero, d.scores,
                                          CUDA_R_32F, s.seq, square, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
  const long long total = bh * square;
  apply_mask<<<4096, 256>>>(d.scores, d.in.key_len, s.heads, s.seq, s.causal, total);
  CUDA_CHECK_LAUNCH();
  softmax_block<<<static_cast<unsigned>(bh * s.seq), 256>>>(d.scores, d.probs, static_cast<int>(bh * s.seq), s.seq);
  CUDA_CHECK_LAUNCH();
  to_bf16<<<4096, 256>>>(d.probs, d.probs_bf16, total);
  CUDA_CHECK_LAUNCH();
  // Row-major O = P V is column-major O^T = V^T P^T: A = V^T (column-major view of V), B = P^T.
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, s.dim, s.seq, s.seq, &one, d.in.v,
                                          CUDA_R_16BF, s.dim, head, d.probs_bf16, CUDA_R_16BF, s.seq, square, &zero,
                                          d.o, CUDA_R_16BF, s.dim, head, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:launch]

constexpr const char* kImpl = "three kernels: cuBLAS + course softmax (bf16, fp32 scores)";

// Check one shape on the chosen rows; with repeats > 0 also time it. Returns false on a failed check;
// sets out_of_memory (and checks nothing) when the score matrices do not fit.
bool check_and_time(cublasHandle_t handle, const attn::Shape& s, uint64_t seed, int repeats, bool& out_of_memory,
                    double check_budget = attn::kCheckBudget) {
  Buffers d;
  out_of_memory = !allocate_scores(s, d);
  if (out_of_memory) {
    std::printf("MEMORY %s: the two score matrices need %.0f bytes: out of device memory\n",
                attn::case_name(s).c_str(), d.score_bytes);
    return true;
  }
  const attn::Inputs in = attn::make_inputs(s, seed);
  const size_t n = s.elements() * sizeof(bf16);
  d.in = attn::upload(s, in);
  d.o = attn::device_alloc<bf16>(s.elements());
  d.bytes = d.in.bytes + n + d.score_bytes;
  course::poison(d.o, n);
  course::poison(d.scores, d.score_bytes / 2);
  course::poison(d.probs, d.score_bytes / 2);
  attention_naive(handle, s, d);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<bf16> out = attn::to_host(d.o, s.elements());
  std::printf("MEMORY %s: score matrices %.0f bytes (fp32 S and P), inputs and output %.0f bytes\n",
              attn::case_name(s).c_str(), d.score_bytes, 4.0 * n);
  // P is rounded to bf16 before P V, as in the fused tensor-core kernels: the same rounded reference.
  const attn::ForwardReference ref = attn::forward_reference(s, in, attn::rows_to_check(s, check_budget));
  const bool ok = attn::check_forward("naive " + attn::case_name(s), s, ref, out, {}, true);
  if (repeats > 0) {
    const double ms = course::time_kernel_ms([&] { attention_naive(handle, s, d); }, 2, repeats);
    const double bytes = 4.0 * n;  // the same minimum as the fused kernels: Q, K, V in, O out
    attn::print_bench_row(attn::case_name(s).c_str(), kImpl, ms, bytes, s.forward_flops(), s.seq, d.bytes);
  }
  release(d);
  return ok;
}

int main(int argc, char** argv) {
  const attn::Options opt = attn::parse_options(argc, argv, 1 << 16, false);
  course::require_compute_capability(8, 0, "bf16 GEMMs on tensor cores");
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  bool ok = true, oom = false;
  if (!opt.bench) {
    ok = check_and_time(handle, opt.shape, opt.seed, 0, oom);
    if (oom) ok = false;  // the checked sizes are small: running out here is a failure
  } else {
    for (bool is_causal : {false, true})
      ok = check_and_time(handle, attn::bench_shape(is_causal), opt.seed, 10, oom) && ok && !oom;
    // Memory at growing sequence lengths, until the score matrices no longer fit.
    for (int n : {1024, 2048, 8192, 16384, 32768}) {
      ok = check_and_time(handle, attn::bench_shape(false, n), opt.seed, 5, oom, attn::kSweepBudget) && ok;
      if (oom) break;
    }
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
