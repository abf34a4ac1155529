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
// Build: nvcc -std=c++17 -O3 -arch=native -lcublas -o build/attention/attention_naive kernels/attention/attention_naive.cu
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
#include <cuda_bf16.h>

#include <string>

#include "../common/check_cublas.cuh"
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
  bf16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float *scores = nullptr, *probs = nullptr;  // seq x seq per (batch, head), fp32
  bf16* probs_bf16 = nullptr;                 // reuses the scores' memory (they are dead by then)
  int* key_len = nullptr;
  double bytes = 0, score_bytes = 0;
};

// Allocates everything; returns false (and frees what it got) when the device memory runs out.
bool allocate(const attn::Shape& s, Buffers& d) {
  const size_t n = s.elements() * sizeof(bf16);
  const size_t score_elems = static_cast<size_t>(s.batch) * s.heads * s.seq * s.seq;
  d.score_bytes = 2.0 * score_elems * sizeof(float);
  d.bytes = 4.0 * n + d.score_bytes + s.batch * sizeof(int);
  void** slots[] = {reinterpret_cast<void**>(&d.q), reinterpret_cast<void**>(&d.k), reinterpret_cast<void**>(&d.v),
                    reinterpret_cast<void**>(&d.o), reinterpret_cast<void**>(&d.scores),
                    reinterpret_cast<void**>(&d.probs), reinterpret_cast<void**>(&d.key_len)};
  const size_t sizes[] = {n, n, n, n, score_elems * sizeof(float), score_elems * sizeof(float), s.batch * sizeof(int)};
  for (int i = 0; i < 7; ++i) {
    const cudaError_t err = cudaMalloc(slots[i], sizes[i]);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: running out is an answer here, not a failure
      for (int j = 0; j < i; ++j) CUDA_CHECK(cudaFree(*slots[j]));
      return false;
    }
    CUDA_CHECK(err);
  }
  d.probs_bf16 = reinterpret_cast<bf16*>(d.scores);
  return true;
}

void release(Buffers& d) {
  for (void* p : {static_cast<void*>(d.q), static_cast<void*>(d.k), static_cast<void*>(d.v), static_cast<void*>(d.o),
                  static_cast<void*>(d.scores), static_cast<void*>(d.probs), static_cast<void*>(d.key_len)})
    CUDA_CHECK(cudaFree(p));
}

// --8<-- [start:launch]
// cuBLAS is column-major; a row-major [seq][dim] matrix is its transpose. Row-major S = Q K^T is
// column-major S^T = K Q^T: op(A) = K (column-major K^T, transposed back), B = Q^T (column-major
// view of row-major Q). One strided-batched call covers every (batch, head).
void attention_naive(cublasHandle_t handle, const attn::Shape& s, const Buffers& d) {
  const long long bh = 1LL * s.batch * s.heads, head = 1LL * s.seq * s.dim, square = 1LL * s.seq * s.seq;
  const float scale = static_cast<float>(s.scale()), one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.seq, s.seq, s.dim, &scale, d.k,
                                          CUDA_R_16BF, s.dim, head, d.q, CUDA_R_16BF, s.dim, head, &zero, d.scores,
                                          CUDA_R_32F, s.seq, square, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
  const long long total = bh * square;
  apply_mask<<<4096, 256>>>(d.scores, d.key_len, s.heads, s.seq, s.causal, total);
  CUDA_CHECK_LAUNCH();
  softmax_block<<<static_cast<unsigned>(bh * s.seq), 256>>>(d.scores, d.probs, static_cast<int>(bh * s.seq), s.seq);
  CUDA_CHECK_LAUNCH();
  to_bf16<<<4096, 256>>>(d.probs, d.probs_bf16, total);
  CUDA_CHECK_LAUNCH();
  // Row-major O = P V is column-major O^T = V^T P^T: A = V^T (column-major view of V), B = P^T.
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, s.dim, s.seq, s.seq, &one, d.v,
                                          CUDA_R_16BF, s.dim, head, d.probs_bf16, CUDA_R_16BF, s.seq, square, &zero,
                                          d.o, CUDA_R_16BF, s.dim, head, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
}
// --8<-- [end:launch]

constexpr const char* kImpl = "three kernels: cuBLAS + course softmax (bf16, fp32 scores)";

// Check one shape on the chosen rows; with repeats > 0 also time it. Returns false on a failed check;
// sets out_of_memory (and checks nothing) when the score matrices do not fit.
bool check_and_time(cublasHandle_t handle, const attn::Shape& s, uint64_t seed, int repeats, bool& out_of_memory) {
  Buffers d;
  out_of_memory = !allocate(s, d);
  if (out_of_memory) {
    std::printf("MEMORY %s: the two score matrices need %.0f bytes: out of device memory\n",
                attn::case_name(s).c_str(), d.score_bytes);
    return true;
  }
  const attn::Inputs in = attn::make_inputs(s, seed);
  const size_t n = s.elements() * sizeof(bf16);
  CUDA_CHECK(cudaMemcpy(d.q, in.qb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.k, in.kb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.v, in.vb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.key_len, s.key_len.data(), s.batch * sizeof(int), cudaMemcpyHostToDevice));
  course::poison(d.o, n);
  course::poison(d.scores, d.score_bytes / 2);
  course::poison(d.probs, d.score_bytes / 2);
  attention_naive(handle, s, d);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<bf16> out(s.elements());
  CUDA_CHECK(cudaMemcpy(out.data(), d.o, n, cudaMemcpyDeviceToHost));
  std::printf("MEMORY %s: score matrices %.0f bytes (fp32 S and P), inputs and output %.0f bytes\n",
              attn::case_name(s).c_str(), d.score_bytes, 4.0 * n);
  // P is rounded to bf16 before P V, as in the fused tensor-core kernels: the same tolerances.
  const bool ok = attn::check_forward(("naive " + attn::case_name(s)).c_str(), s, in, out, {},
                                      attn::rows_to_check(s), attn::kRtol, attn::kAtolBf16P);
  if (repeats > 0) {
    const double ms = course::time_kernel_ms([&] { attention_naive(handle, s, d); }, 2, repeats);
    const double bytes = 4.0 * n;  // the same minimum as the fused kernels: Q, K, V in, O out
    attn::print_bench_row(attn::case_name(s).c_str(), kImpl, ms, bytes, s.forward_flops(), s.seq, d.bytes);
  }
  release(d);
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int batch = static_cast<int>(args.get_int("--batch", 2, 1, 64));
  const int heads = static_cast<int>(args.get_int("--heads", 3, 1, 64));
  const int seq = static_cast<int>(args.get_int("--seq", 333, 1, 1 << 16));
  const int dim = static_cast<int>(args.get_int("--dim", 128, 64, 128));
  const bool causal = args.has("--causal");
  const bool padding = args.has("--padding");
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2024, 0));
  const bool bench = args.has("--bench");
  args.finish();
  if (dim != 64 && dim != 128) {
    std::fprintf(stderr, "error: --dim must be 64 or 128, got %d\n", dim);
    return course::kExitFail;
  }
  course::require_compute_capability(8, 0, "bf16 GEMMs on tensor cores");
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  bool ok = true, oom = false;
  if (!bench) {
    const attn::Shape s{batch, heads, seq, dim, causal, attn::key_lengths(batch, seq, padding)};
    ok = check_and_time(handle, s, seed, 0, oom);
    if (oom) ok = false;  // the checked sizes are small: running out here is a failure
  } else {
    for (bool is_causal : {false, true}) {
      const attn::Shape s{4, 16, 4096, 128, is_causal, attn::key_lengths(4, 4096, false)};
      ok = check_and_time(handle, s, seed, 10, oom) && ok && !oom;
    }
    // Memory at growing sequence lengths, until the score matrices no longer fit.
    for (int n : {1024, 2048, 8192, 16384, 32768}) {
      const attn::Shape s{4, 16, n, 128, false, attn::key_lengths(4, n, false)};
      ok = check_and_time(handle, s, seed, 5, oom) && ok;
      if (oom) break;
    }
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  return ok ? 0 : course::kExitFail;
}
