// mnist_cnn.cu: trains the course's MNIST CNN on the GPU, in four versions of increasing speed.
//
//   conv3x3(1->32) BN ReLU maxpool2 -> conv3x3(32->64) BN ReLU maxpool2 -> flatten
//   -> linear(3136->128) ReLU -> linear(128->10) -> softmax cross-entropy; plain SGD.
//
//   version 1 "naive"     one simple kernel per layer and direction (layers_naive.cuh)
//   version 2 "libraries" cuBLAS for the linear layers, implicit-GEMM convolutions (conv_igemm.cuh)
//   version 3 "fused"     fused batch-norm/ReLU/pool and softmax/loss kernels (layers_fused.cuh),
//                         and, in "fused + CUDA graph", the whole step replayed as one CUDA graph;
//                         "tf32" is the same with the convolutions on the tensor cores in TF32, the
//                         precision PyTorch allows its cuDNN convolutions by default
//   version 4 "tc"        the matrix products on the tensor cores in bf16 with fp32 accumulation
//                         (layers_tc.cuh), fp32 master weights, the step as one CUDA graph
//   TF32 and version 4 need compute capability 8.0: on an older GPU (7.5) they are skipped with a
//   message and versions 1 to 3 run as usual; asking for version 4 there (--version 4) waives.
//
// Taught in docs/mnist/: index.md (main, training loop), naive.md (layout, forward, backward),
// libraries.md (cuBLAS), fused.md (the step and its CUDA graph), tensor-cores.md (version 4),
// results.md (timing). The data folder is --data-dir, else $MNIST_DIR, else data/mnist.
// Build: nvcc -std=c++17 -O3 -arch=native -o build/mnist/mnist_cnn kernels/mnist/mnist_cnn.cu -lcublas
// Run:   ./build/mnist/mnist_cnn                    (versions agree on one step; one epoch trains)
//        ./build/mnist/mnist_cnn --agree-only       (only the layer checks and the one-step agreement
//                                                    of the versions: what compute-sanitizer runs)
//        ./build/mnist/mnist_cnn --train --epochs 8 (trains, checks test accuracy >= 99%)
//        ./build/mnist/mnist_cnn --train --version 4 --epochs 3 --save w.bin   (trains v4, saves)
//        ./build/mnist/mnist_cnn --predict w.bin    (classifies the test set with saved weights)
//        ./build/mnist/mnist_cnn --predict w.bin --image digit.pgm   (one 28x28 8-bit PGM image)
//        ./build/mnist/mnist_cnn --bench            (step and epoch times, batch 64/256/1024)
//        ./build/mnist/mnist_cnn --loss-curve DIR --version 4   (initial weights and 50 steps' losses
//                                                    for loss_curve.py)
//        ./build/mnist/mnist_cnn --check-layers DIR (one step on weights and a batch from
//                                                    kernels/mnist/check_layers.py; dumps everything)
//
// course: gpu
// course: libs cublas
// course: run --agree-only
// course: run
// course: run --train --version 4 --epochs 5 --save build/mnist/v4-weights.bin --predict build/mnist/v4-weights.bin
// course: bench --bench
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "../common/check_cublas.cuh"
#include "../common/course.cuh"
#include "../common/gemm_reference.cuh"
#include "conv_igemm.cuh"
#include "layers_fused.cuh"
#include "layers_naive.cuh"
#include "layers_tc.cuh"
#include "mnist_idx.h"

namespace mnist {

// --8<-- [start:layout]
// All parameters live in one buffer, in PyTorch's model.parameters() order, and their gradients
// in another with the same layout: one SGD kernel updates everything.
enum Param { W1, G1, BE1, W2, G2, BE2, W3, B3, W4, B4, kNumParams };
constexpr int kParamSize[kNumParams] = {32 * 9, 32, 32, 64 * 32 * 9, 64, 64, 128 * 3136, 128, 10 * 128, 10};
constexpr int offset_of(int p) { return p == 0 ? 0 : offset_of(p - 1) + kParamSize[p - 1]; }
constexpr int kTotalParams = offset_of(kNumParams);  // 421,738
// --8<-- [end:layout]

// kTf32: kFused with TF32 tensor-core convolutions; kTc: version 4 (bf16 tensor cores).
enum Version { kNaive, kLibraries, kFused, kTf32, kTc };
constexpr const char* kVersionName[] = {"naive", "libraries", "fused", "tf32", "tc"};

template <typename T>
T* dalloc(size_t count) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

// Every buffer of the network, sized for the largest batch.
struct Net {
  int max_batch;
  cudaStream_t st;
  cublasHandle_t blas;
  float *params, *grads, *ones;
  float* x;
  int* y;
  float *c1, *a1, *r1, *p1, *c2, *a2, *r2, *p2;  // conv out, BN out, ReLU out, pooled
  uint8_t *arg1, *arg2;                          // max-pool winners
  float *h_pre, *h, *logits, *probs, *dlogits;
  float *dh, *dh_pre, *dp2, *dr2, *da2, *dc2, *dp1, *dr1, *da1, *dc1;
  float *mean1, *rstd1, *mean2, *rstd2;
  float4 *coef1, *coef2, *bcoef1, *bcoef2;  // fused: per-channel BN coefficients (forward, backward)
  double* stats;  // fused: sums for BN: [sum1 32 | sumsq1 32 | sum2 64 | sumsq2 64 | dsum1, dsumx1, dsum2, dsumx2]
  int* step;      // device step counter: which batch of the epoch the next step gathers
  float* params_backup;
  int* step_backup;
  __nv_bfloat16* params_bf16;  // version 4: the bf16 copy of params that the tensor cores read
  __nv_bfloat16 *p1_bf16, *p2_bf16;  // version 4: the pooled activations, read only by bf16 products
  float* wgrad_part;  // version 4: conv2's weight gradient, one partial sum per slice of the batch
  float* loss_part;            // version 4: per-block partial losses, and the counter that finds the
  unsigned* loss_blocks_done;  // last block (tc::fc2_loss_and_backward)
  int sms;
  cudaStream_t side;               // version 4: the weight gradients run beside the backward chain
  cudaEvent_t fork_fc1, fork_conv2, join;
  float* loss_hist;
  int loss_cap;

  float* param(int p) const { return params + offset_of(p); }
  const __nv_bfloat16* param_bf16(int p) const { return params_bf16 + offset_of(p); }
  float* grad(int p) const { return grads + offset_of(p); }

  explicit Net(int max_b, int loss_capacity) : max_batch(max_b), loss_cap(loss_capacity) {
    const size_t B = max_b;
    CUDA_CHECK(cudaStreamCreate(&st));  // a blocking stream: ordered with cudaMemcpy and cudaMemset
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasSetStream(blas, st));
    params = dalloc<float>(kTotalParams);
    grads = dalloc<float>(kTotalParams);
    ones = dalloc<float>(B);
    std::vector<float> h_ones(B, 1.0f);
    CUDA_CHECK(cudaMemcpy(ones, h_ones.data(), B * sizeof(float), cudaMemcpyHostToDevice));
    x = dalloc<float>(B * 784);
    y = dalloc<int>(B);
    for (float** p : {&c1, &a1, &r1, &dr1, &da1, &dc1}) *p = dalloc<float>(B * 32 * 784);
    for (float** p : {&p1, &dp1}) *p = dalloc<float>(B * 32 * 196);
    for (float** p : {&c2, &a2, &r2, &dr2, &da2, &dc2}) *p = dalloc<float>(B * 64 * 196);
    for (float** p : {&p2, &dp2}) *p = dalloc<float>(B * 3136);
    arg1 = dalloc<uint8_t>(B * 32 * 196);
    arg2 = dalloc<uint8_t>(B * 3136);
    for (float** p : {&h_pre, &h, &dh, &dh_pre}) *p = dalloc<float>(B * 128);
    for (float** p : {&logits, &probs, &dlogits}) *p = dalloc<float>(B * 10);
    for (float** p : {&mean1, &rstd1}) *p = dalloc<float>(32);
    for (float** p : {&mean2, &rstd2}) *p = dalloc<float>(64);
    stats = dalloc<double>(384);
    coef1 = dalloc<float4>(32);
    bcoef1 = dalloc<float4>(32);
    coef2 = dalloc<float4>(64);
    bcoef2 = dalloc<float4>(64);
    step = dalloc<int>(1);
    params_backup = dalloc<float>(kTotalParams);
    step_backup = dalloc<int>(1);
    loss_hist = dalloc<float>(loss_capacity);
    CUDA_CHECK(cudaMemset(step, 0, sizeof(int)));
    params_bf16 = dalloc<__nv_bfloat16>(kTotalParams);
    p1_bf16 = dalloc<__nv_bfloat16>(B * 32 * 196);
    p2_bf16 = dalloc<__nv_bfloat16>(B * 3136);
    loss_part = dalloc<float>(tc::kLossBlocks);
    loss_blocks_done = dalloc<unsigned>(1);
    CUDA_CHECK(cudaMemset(loss_blocks_done, 0, sizeof(unsigned)));
    sms = igemm::sm_count();
    wgrad_part = dalloc<float>(tc::conv_wgrad_partial_floats(max_b, sms, 32, 64));
    CUDA_CHECK(cudaStreamCreate(&side));
    for (cudaEvent_t* e : {&fork_fc1, &fork_conv2, &join})
      CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }
};

// PyTorch's default initialisation: weights and biases uniform in +-1/sqrt(fan_in); BN gamma 1, beta 0.
std::vector<float> init_params(uint64_t seed) {
  std::vector<float> p(kTotalParams);
  auto fill = [&](int which, float bound, uint64_t s) {
    std::vector<float> v(kParamSize[which]);
    course::fill_uniform(v, s, -bound, bound);
    std::copy(v.begin(), v.end(), p.begin() + offset_of(which));
  };
  fill(W1, 1.0f / 3.0f, seed + 1);
  fill(W2, 1.0f / std::sqrt(288.0f), seed + 2);
  fill(W3, 1.0f / std::sqrt(3136.0f), seed + 3);
  fill(B3, 1.0f / std::sqrt(3136.0f), seed + 4);
  fill(W4, 1.0f / std::sqrt(128.0f), seed + 5);
  fill(B4, 1.0f / std::sqrt(128.0f), seed + 6);
  std::fill_n(p.begin() + offset_of(G1), 32, 1.0f);
  std::fill_n(p.begin() + offset_of(BE1), 32, 0.0f);
  std::fill_n(p.begin() + offset_of(G2), 64, 1.0f);
  std::fill_n(p.begin() + offset_of(BE2), 64, 0.0f);
  return p;
}

inline int blocks(long long n, int threads = 256) { return static_cast<int>(course::ceil_div<long long>(n, threads)); }

// --- cuBLAS: row-major Y[B][O] = X[B][I] W[O][I]^T is column-major Y^T = W^T-as-stored^T X^T ---------
// --8<-- [start:cublas]
void linear_forward_blas(const Net& n, const float* X, const float* W, float* Y, int B, int I, int O) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_T, CUBLAS_OP_N, O, B, I, &one, W, I, X, I, &zero, Y, O));
}

// Y[b][o] += bias[o], as a rank-1 product bias * ones^T, so that version 2 is cuBLAS only.
void add_bias_blas(const Net& n, const float* bias, float* Y, int B, int O) {
  const float one = 1.0f;
  CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_N, O, B, 1, &one, bias, O, n.ones, 1, &one, Y, O));
}

// dW = dY^T X, db = dY^T 1, dX = dY W (dX skipped when null).
void linear_backward_blas(const Net& n, const float* dY, const float* X, const float* W, float* dX, float* dW,
                          float* db, int B, int I, int O) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, B, &one, X, I, dY, O, &zero, dW, I));
  CUBLAS_CHECK(cublasSgemv(n.blas, CUBLAS_OP_N, O, B, &one, dY, O, n.ones, 1, &zero, db, 1));
  if (dX) CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_N, I, B, O, &one, W, I, dY, O, &zero, dX, I));
}
// --8<-- [end:cublas]

// --- the three versions ---------------------------------------------------------------------------

// Batch norm, ReLU and pooling of one block, unfused (versions 1 and 2).
void bn_relu_pool_unfused(const Net& n, const float* c, float* a, float* r, float* p, uint8_t* arg, float* mean,
                          float* rstd, int gamma, int beta, int B, int C, int H) {
  const int HW = H * H, total = B * C * HW;
  naive::batchnorm_stats<<<C, 1024, 0, n.st>>>(c, mean, rstd, B, C, HW);
  naive::batchnorm_apply<<<blocks(total), 256, 0, n.st>>>(c, mean, rstd, n.param(gamma), n.param(beta), a, B, C, HW);
  naive::relu_forward<<<blocks(total), 256, 0, n.st>>>(a, r, total);
  naive::maxpool_forward<<<blocks(total / 4), 256, 0, n.st>>>(r, p, arg, B * C, H, H);
  CUDA_CHECK_LAUNCH();
}

void bn_relu_pool_backward_unfused(const Net& n, const float* dp, const uint8_t* arg, float* dr, const float* a,
                                   float* da, const float* c, const float* mean, const float* rstd, int gamma,
                                   int beta, float* dc, int B, int C, int H) {
  const int HW = H * H, total = B * C * HW;
  naive::maxpool_backward<<<blocks(total), 256, 0, n.st>>>(dp, arg, dr, B * C, H, H);
  naive::relu_backward<<<blocks(total), 256, 0, n.st>>>(dr, a, da, total);
  naive::batchnorm_backward_reduce<<<C, 1024, 0, n.st>>>(da, c, mean, rstd, n.grad(gamma), n.grad(beta), B, C, HW);
  naive::batchnorm_backward_apply<<<blocks(total), 256, 0, n.st>>>(da, c, mean, rstd, n.param(gamma), n.grad(gamma),
                                                                   n.grad(beta), dc, B, C, HW);
  CUDA_CHECK_LAUNCH();
}

// Fused version: pass 1 (per-channel sums) and pass 2 (every element) of the block's backward.
template <typename T>  // the pooled activations: float (version 3) or bf16 (version 4)
void bn_relu_pool_backward_fused(const Net& n, const float* dp, const T* p, const uint8_t* arg, const float* c,
                                 const float4* coef, float4* bcoef, double* dsum, double* dsumx, int gamma, int beta,
                                 float* dc, int B, int C, int H) {
  const int pooled_per_channel = B * (H / 2) * (H / 2);
  const int slices = std::max(1, std::min(32, course::ceil_div(pooled_per_channel, 2048)));
  fused::bn_relu_pool_backward_reduce<<<dim3(slices, C), 256, 0, n.st>>>(dp, p, arg, c, coef, dsum, dsumx, B, C, H, H);
  fused::bn_backward_finalize<<<1, C, 0, n.st>>>(dsum, dsumx, coef, C, B * H * H, bcoef, n.grad(gamma), n.grad(beta));
  fused::bn_relu_pool_backward_apply<<<blocks(B * C * H * H), 256, 0, n.st>>>(dp, p, arg, c, coef, bcoef, dc, B, C, H,
                                                                              H);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:tc_step]
// Version 4. conv1 (one input channel: a GEMM with K = 9) stays on the CUDA cores, with its batch-norm
// statistics, in a kernel of its own (tc::conv1_forward); conv2 and fc1, forward and backward, are bf16 GEMMs on
// the tensor cores (layers_tc.cuh); fc2, the loss and fc2's backward are one small kernel, with fc1's
// bias and ReLU in front and fc1's ReLU mask and bias gradient behind.
void forward_tc(const Net& n, const Source& src, int B, float* loss_out, int cap) {
  gather_batch<<<blocks(B * 784), 256, 0, n.st>>>(src, B, n.x, n.y);
  CUDA_CHECK_LAUNCH();
  double* s = n.stats;
  // Zero what the step adds into: the eight BN sums (forward and backward), fc1's k-slices, and every
  // gradient from conv2's weight on (bn2's two, in that range, are simply overwritten).
  const int n_grads = kTotalParams - offset_of(W2);
  tc::zero_accumulators<<<blocks(n_grads, 1024), 1024, 0, n.st>>>(s, 384, n.h_pre, B * 128, n.grad(W2), n_grads);
  tc::conv1_forward(n.x, n.param(W1), n.c1, B, s, s + 32, n.sms, n.st);
  fused::bn_finalize<<<1, 32, 0, n.st>>>(s, s + 32, n.param(G1), n.param(BE1), 32, B * 784, n.coef1);
  fused::bn_relu_pool_forward<<<blocks(B * 32 * 196), 256, 0, n.st>>>(n.c1, n.coef1, n.p1_bf16, n.arg1, B, 32, 28, 28);
  tc::conv_forward<14, 32, 64>(n.param_bf16(W2), n.p1_bf16, n.c2, B, s + 64, s + 128, n.sms, n.st);
  fused::bn_finalize<<<1, 64, 0, n.st>>>(s + 64, s + 128, n.param(G2), n.param(BE2), 64, B * 196, n.coef2);
  fused::bn_relu_pool_forward<<<blocks(B * 3136), 256, 0, n.st>>>(n.c2, n.coef2, n.p2_bf16, n.arg2, B, 64, 14, 14);
  tc::linear_forward(n.p2_bf16, n.param_bf16(W3), n.h_pre, B, 3136, 128, n.sms, n.st);
  tc::fc2_loss_and_backward<<<tc::fc2_loss_blocks(B), tc::kLossThreads, 0, n.st>>>(
      n.h_pre, n.param(B3), n.param(W4), n.param(B4), n.y, n.h, n.logits, n.dlogits, n.dh_pre, n.grad(B3), n.grad(W4),
      n.grad(B4), B, src.step, loss_out, cap, n.loss_part, n.loss_blocks_done);
  CUDA_CHECK_LAUNCH();
}

void backward_tc(const Net& n, int B) {
  // fc2's backward ran with the loss (forward_tc); the gradient sums and the gradients this adds
  // into were zeroed there too. The weight gradients of fc1 and conv2 feed nothing but SGD: they run
  // on a second stream beside the chain of input gradients (a fork and a join in the captured graph),
  // so that at small batches, where one kernel leaves most SMs idle, they overlap.
  double* s = n.stats;
  CUDA_CHECK(cudaEventRecord(n.fork_fc1, n.st));
  CUDA_CHECK(cudaStreamWaitEvent(n.side, n.fork_fc1, 0));
  tc::linear_backward_weight(n.dh_pre, n.p2_bf16, n.grad(W3), B, 3136, 128, n.sms, n.side);
  tc::linear_backward_data(n.dh_pre, n.param_bf16(W3), n.dp2, B, 3136, 128, n.st);
  bn_relu_pool_backward_fused(n, n.dp2, n.p2_bf16, n.arg2, n.c2, n.coef2, n.bcoef2, s + 256, s + 320, G2, BE2, n.dc2, B, 64,
                              14);
  CUDA_CHECK(cudaEventRecord(n.fork_conv2, n.st));
  CUDA_CHECK(cudaStreamWaitEvent(n.side, n.fork_conv2, 0));
  tc::conv_backward_weight<14, 32, 64>(n.dc2, n.p1_bf16, n.grad(W2), n.wgrad_part, B, n.sms, n.side);
  tc::conv_backward_data<14, 32, 64>(n.param_bf16(W2), n.dc2, n.dp1, B, n.sms, n.st);
  bn_relu_pool_backward_fused(n, n.dp1, n.p1_bf16, n.arg1, n.c1, n.coef1, n.bcoef1, s + 192, s + 224, G1, BE1, n.dc1, B, 32,
                              28);
  igemm::backward_weight(n.dc1, n.x, n.grad(W1), B, 1, 32, 28, 28, n.st);
  CUDA_CHECK(cudaEventRecord(n.join, n.side));  // SGD waits for the side stream
  CUDA_CHECK(cudaStreamWaitEvent(n.st, n.join, 0));
}
// --8<-- [end:tc_step]

// --8<-- [start:forward]
// Gathers the batch and runs the network forward, up to the loss (stored at loss_out[step % cap]).
void forward(const Net& n, Version v, const Source& src, int B, float* loss_out, int cap) {
  if (v == kTc) return forward_tc(n, src, B, loss_out, cap);
  gather_batch<<<blocks(B * 784), 256, 0, n.st>>>(src, B, n.x, n.y);
  CUDA_CHECK_LAUNCH();
  double* s = n.stats;
  if (v == kNaive) {
    naive::conv3x3_forward<<<blocks(B * 32 * 784), 256, 0, n.st>>>(n.x, n.param(W1), n.c1, B, 1, 32, 28, 28);
    bn_relu_pool_unfused(n, n.c1, n.a1, n.r1, n.p1, n.arg1, n.mean1, n.rstd1, G1, BE1, B, 32, 28);
    naive::conv3x3_forward<<<blocks(B * 64 * 196), 256, 0, n.st>>>(n.p1, n.param(W2), n.c2, B, 32, 64, 14, 14);
    bn_relu_pool_unfused(n, n.c2, n.a2, n.r2, n.p2, n.arg2, n.mean2, n.rstd2, G2, BE2, B, 64, 14);
  } else if (v == kLibraries) {
    igemm::forward(n.x, n.param(W1), n.c1, B, 1, 32, 28, 28, n.st);
    bn_relu_pool_unfused(n, n.c1, n.a1, n.r1, n.p1, n.arg1, n.mean1, n.rstd1, G1, BE1, B, 32, 28);
    igemm::forward(n.p1, n.param(W2), n.c2, B, 32, 64, 14, 14, n.st);
    bn_relu_pool_unfused(n, n.c2, n.a2, n.r2, n.p2, n.arg2, n.mean2, n.rstd2, G2, BE2, B, 64, 14);
  } else {
    const bool tf32 = v == kTf32;
    CUDA_CHECK(cudaMemsetAsync(s, 0, 192 * sizeof(double), n.st));  // the four BN sums
    igemm::forward<true>(n.x, n.param(W1), n.c1, B, 1, 32, 28, 28, n.st, s, s + 32, tf32);
    fused::bn_finalize<<<1, 32, 0, n.st>>>(s, s + 32, n.param(G1), n.param(BE1), 32, B * 784, n.coef1);
    fused::bn_relu_pool_forward<<<blocks(B * 32 * 196), 256, 0, n.st>>>(n.c1, n.coef1, n.p1, n.arg1, B, 32, 28, 28);
    igemm::forward<true>(n.p1, n.param(W2), n.c2, B, 32, 64, 14, 14, n.st, s + 64, s + 128, tf32);
    fused::bn_finalize<<<1, 64, 0, n.st>>>(s + 64, s + 128, n.param(G2), n.param(BE2), 64, B * 196, n.coef2);
    fused::bn_relu_pool_forward<<<blocks(B * 3136), 256, 0, n.st>>>(n.c2, n.coef2, n.p2, n.arg2, B, 64, 14, 14);
  }
  if (v == kNaive) {
    naive::linear_forward<<<blocks(B * 128), 256, 0, n.st>>>(n.p2, n.param(W3), n.param(B3), n.h_pre, B, 3136, 128);
    naive::relu_forward<<<blocks(B * 128), 256, 0, n.st>>>(n.h_pre, n.h, B * 128);
    naive::linear_forward<<<blocks(B * 10), 256, 0, n.st>>>(n.h, n.param(W4), n.param(B4), n.logits, B, 128, 10);
  } else if (v == kLibraries) {
    linear_forward_blas(n, n.p2, n.param(W3), n.h_pre, B, 3136, 128);
    add_bias_blas(n, n.param(B3), n.h_pre, B, 128);
    naive::relu_forward<<<blocks(B * 128), 256, 0, n.st>>>(n.h_pre, n.h, B * 128);
    linear_forward_blas(n, n.h, n.param(W4), n.logits, B, 128, 10);
    add_bias_blas(n, n.param(B4), n.logits, B, 10);
  } else {
    linear_forward_blas(n, n.p2, n.param(W3), n.h, B, 3136, 128);
    fused::bias_relu<<<blocks(B * 128), 256, 0, n.st>>>(n.h, n.param(B3), B, 128);
    linear_forward_blas(n, n.h, n.param(W4), n.logits, B, 128, 10);
    fused::softmax_cross_entropy<<<1, 1024, 0, n.st>>>(n.logits, n.param(B4), n.y, n.dlogits, B, src.step, loss_out,
                                                       cap);
  }
  if (v < kFused) {
    naive::softmax_rows<<<blocks(B), 256, 0, n.st>>>(n.logits, n.probs, B);
    naive::cross_entropy_loss<<<1, 1024, 0, n.st>>>(n.probs, n.y, B, src.step, loss_out, cap);
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:forward]

// --8<-- [start:backward]
void backward(const Net& n, Version v, int B) {
  if (v == kTc) return backward_tc(n, B);
  double* s = n.stats;
  if (v == kNaive) {
    naive::cross_entropy_backward<<<blocks(B * 10), 256, 0, n.st>>>(n.probs, n.y, n.dlogits, B);
    naive::linear_backward_weight<<<blocks(10 * 128), 256, 0, n.st>>>(n.dlogits, n.h, n.grad(W4), n.grad(B4), B, 128,
                                                                      10);
    naive::linear_backward_data<<<blocks(B * 128), 256, 0, n.st>>>(n.dlogits, n.param(W4), n.dh, B, 128, 10);
    naive::relu_backward<<<blocks(B * 128), 256, 0, n.st>>>(n.dh, n.h_pre, n.dh_pre, B * 128);
    naive::linear_backward_weight<<<blocks(128 * 3136), 256, 0, n.st>>>(n.dh_pre, n.p2, n.grad(W3), n.grad(B3), B,
                                                                        3136, 128);
    naive::linear_backward_data<<<blocks(B * 3136), 256, 0, n.st>>>(n.dh_pre, n.param(W3), n.dp2, B, 3136, 128);
  } else {
    if (v == kLibraries)
      naive::cross_entropy_backward<<<blocks(B * 10), 256, 0, n.st>>>(n.probs, n.y, n.dlogits, B);
    const float* h_mask = v == kLibraries ? n.h_pre : n.h;  // fused keeps only h = relu(h_pre)
    linear_backward_blas(n, n.dlogits, n.h, n.param(W4), n.dh, n.grad(W4), n.grad(B4), B, 128, 10);
    naive::relu_backward<<<blocks(B * 128), 256, 0, n.st>>>(n.dh, h_mask, n.dh_pre, B * 128);
    linear_backward_blas(n, n.dh_pre, n.p2, n.param(W3), n.dp2, n.grad(W3), n.grad(B3), B, 3136, 128);
  }
  CUDA_CHECK_LAUNCH();

  if (v >= kFused) {
    CUDA_CHECK(cudaMemsetAsync(s + 192, 0, 192 * sizeof(double), n.st));  // the four gradient sums
    bn_relu_pool_backward_fused(n, n.dp2, n.p2, n.arg2, n.c2, n.coef2, n.bcoef2, s + 256, s + 320, G2, BE2, n.dc2, B, 64,
                                14);
  } else {
    bn_relu_pool_backward_unfused(n, n.dp2, n.arg2, n.dr2, n.a2, n.da2, n.c2, n.mean2, n.rstd2, G2, BE2, n.dc2, B, 64,
                                  14);
  }
  if (v == kNaive) {
    naive::conv3x3_backward_data<<<blocks(B * 32 * 196), 256, 0, n.st>>>(n.dc2, n.param(W2), n.dp1, B, 32, 64, 14, 14);
    naive::conv3x3_backward_weight<<<64 * 32 * 9, 256, 0, n.st>>>(n.dc2, n.p1, n.grad(W2), B, 32, 64, 14, 14);
  } else {
    igemm::backward_data(n.dc2, n.param(W2), n.dp1, B, 32, 64, 14, 14, n.st, v == kTf32);
    igemm::backward_weight(n.dc2, n.p1, n.grad(W2), B, 32, 64, 14, 14, n.st, v == kTf32);
  }
  if (v >= kFused) {
    bn_relu_pool_backward_fused(n, n.dp1, n.p1, n.arg1, n.c1, n.coef1, n.bcoef1, s + 192, s + 224, G1, BE1, n.dc1, B, 32,
                                28);
  } else {
    bn_relu_pool_backward_unfused(n, n.dp1, n.arg1, n.dr1, n.a1, n.da1, n.c1, n.mean1, n.rstd1, G1, BE1, n.dc1, B, 32,
                                  28);
  }
  if (v == kNaive) {
    naive::conv3x3_backward_weight<<<32 * 9, 256, 0, n.st>>>(n.dc1, n.x, n.grad(W1), B, 1, 32, 28, 28);
  } else {
    igemm::backward_weight(n.dc1, n.x, n.grad(W1), B, 1, 32, 28, 28, n.st, v == kTf32);
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:backward]

// --8<-- [start:step]
// One training step: gather the batch, forward, backward, SGD (which also advances the step counter).
void train_step(const Net& n, Version v, const Source& src, int B, float lr) {
  forward(n, v, src, B, n.loss_hist, n.loss_cap);
  backward(n, v, B);
  if (v == kTc)  // the fp32 master weights and, in the same pass, their bf16 copy for the next step
    tc::sgd_update_bf16<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, n.params_bf16, lr, kTotalParams,
                                                                n.step);
  else
    naive::sgd_update<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, lr, kTotalParams, n.step);
  CUDA_CHECK_LAUNCH();
}

// Version 4's bf16 copy of weights that were uploaded or restored from fp32.
void refresh_bf16(const Net& n) {
  tc::to_bf16<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.params_bf16, kTotalParams);
  CUDA_CHECK_LAUNCH();
}

// The same step recorded once into a CUDA graph: replaying it launches all ~30 kernels, memsets
// and cuBLAS calls with one call, and their launch costs overlap on the GPU.
cudaGraphExec_t capture_step(const Net& n, Version v, const Source& src, int B, float lr) {
  // One eager step first, so that every kernel and cuBLAS routine is loaded before the capture;
  // the weights and the step counter are put back afterwards.
  CUDA_CHECK(cudaMemcpyAsync(n.params_backup, n.params, kTotalParams * sizeof(float), cudaMemcpyDeviceToDevice, n.st));
  CUDA_CHECK(cudaMemcpyAsync(n.step_backup, n.step, sizeof(int), cudaMemcpyDeviceToDevice, n.st));
  train_step(n, v, src, B, lr);
  CUDA_CHECK(cudaMemcpyAsync(n.params, n.params_backup, kTotalParams * sizeof(float), cudaMemcpyDeviceToDevice, n.st));
  CUDA_CHECK(cudaMemcpyAsync(n.step, n.step_backup, sizeof(int), cudaMemcpyDeviceToDevice, n.st));
  refresh_bf16(n);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(n.st, cudaStreamCaptureModeGlobal));
  train_step(n, v, src, B, lr);
  CUDA_CHECK(cudaStreamEndCapture(n.st, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}
// --8<-- [end:step]

}  // namespace mnist

using namespace mnist;

// --- host side: data, evaluation, the modes ------------------------------------------------------

struct DeviceData {
  uint8_t *train_images, *train_labels, *test_images, *test_labels;
  int *perm, *test_perm, *eval_step;
  int train_count, test_count;
  std::vector<uint8_t> test_labels_host;
};

static DeviceData upload(const Split& train, const Split& test) {
  DeviceData d;
  d.train_count = train.count;
  d.test_count = test.count;
  d.test_labels_host = test.labels;
  d.train_images = dalloc<uint8_t>(train.images.size());
  d.train_labels = dalloc<uint8_t>(train.labels.size());
  d.test_images = dalloc<uint8_t>(test.images.size());
  d.test_labels = dalloc<uint8_t>(test.labels.size());
  CUDA_CHECK(cudaMemcpy(d.train_images, train.images.data(), train.images.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.train_labels, train.labels.data(), train.labels.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.test_images, test.images.data(), test.images.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.test_labels, test.labels.data(), test.labels.size(), cudaMemcpyHostToDevice));
  d.perm = dalloc<int>(train.count);
  d.test_perm = dalloc<int>(test.count);
  std::vector<int> id(test.count);
  std::iota(id.begin(), id.end(), 0);
  CUDA_CHECK(cudaMemcpy(d.test_perm, id.data(), id.size() * sizeof(int), cudaMemcpyHostToDevice));
  d.eval_step = dalloc<int>(1);
  return d;
}

// A new shuffle of the training set for the next epoch, and the step counter back to 0.
static void new_epoch(const Net& n, DeviceData& d, std::mt19937_64& rng, std::vector<int>& perm_host) {
  perm_host.resize(d.train_count);
  std::iota(perm_host.begin(), perm_host.end(), 0);
  std::shuffle(perm_host.begin(), perm_host.end(), rng);
  CUDA_CHECK(cudaMemcpyAsync(d.perm, perm_host.data(), perm_host.size() * sizeof(int), cudaMemcpyHostToDevice, n.st));
  CUDA_CHECK(cudaMemsetAsync(n.step, 0, sizeof(int), n.st));
}

constexpr int kEvalChunk = 1000;  // as the PyTorch reference: batch-norm statistics of 1000 test images

// Test accuracy (%), evaluated with the fused forward pass; fills pred with every prediction.
static double evaluate(const Net& n, DeviceData& d, Version v, std::vector<int>& pred) {
  static float* scratch_loss = dalloc<float>(16);
  const Source src{d.test_images, d.test_labels, d.test_perm, d.eval_step, d.test_count / kEvalChunk};
  std::vector<float> logits(kEvalChunk * 10);
  pred.assign(d.test_count, -1);
  int correct = 0;
  for (int chunk = 0; chunk < d.test_count / kEvalChunk; ++chunk) {
    CUDA_CHECK(cudaMemcpyAsync(d.eval_step, &chunk, sizeof(int), cudaMemcpyHostToDevice, n.st));
    forward(n, v, src, kEvalChunk, scratch_loss, 16);
    CUDA_CHECK(cudaMemcpyAsync(logits.data(), n.logits, logits.size() * sizeof(float), cudaMemcpyDeviceToHost, n.st));
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    for (int i = 0; i < kEvalChunk; ++i) {
      const float* z = &logits[i * 10];
      const int k = static_cast<int>(std::max_element(z, z + 10) - z);
      pred[chunk * kEvalChunk + i] = k;
      correct += k == d.test_labels_host[chunk * kEvalChunk + i];
    }
  }
  return 100.0 * correct / d.test_count;
}

static void upload_params(const Net& n, const std::vector<float>& p) {
  CUDA_CHECK(cudaMemcpy(n.params, p.data(), p.size() * sizeof(float), cudaMemcpyHostToDevice));
  refresh_bf16(n);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
}

static std::vector<float> download(const float* dev, size_t count) {
  std::vector<float> h(count);
  CUDA_CHECK(cudaMemcpy(h.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// TF32 and bf16 tensor cores exist from compute capability 8.0 on (conv_igemm.cuh and layers_tc.cuh
// compile stubs for older GPUs). On an older GPU the TF32 variant and version 4 are skipped, with one
// message, and versions 1 to 3 run as usual.
static bool tf32_supported() {
  static int cc = 0;
  if (!cc) {
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    cc = major * 10 + minor;
    if (cc < 80)
      std::printf("NOTE TF32 and version 4 (bf16) skipped: their tensor-core instructions need compute "
                  "capability 8.0, this GPU is %d.%d; versions 1 to 3 (FP32) run as usual\n", major, minor);
  }
  return cc >= 80;
}

// Which implementation runs the step: a version, launched kernel by kernel, or the fused version's graph.
struct Runner {
  Version v;
  bool graph;
  const char* name() const {
    if (v == kTc) return "CUDA v4 tensor cores (bf16, fp32 accumulate)";
    if (v == kTf32) return "CUDA TF32 + graph";
    if (graph) return "CUDA fused + graph";
    return v == kNaive ? "CUDA naive" : v == kLibraries ? "CUDA libraries" : "CUDA fused";
  }
};

// --8<-- [start:train]
struct TrainResult {
  std::vector<double> accuracy;
  std::vector<float> losses;  // every step's loss
  std::vector<int> pred;
  double seconds;
};

static TrainResult train(Net& n, DeviceData& d, Runner r, int epochs, int B, float lr, uint64_t seed) {
  upload_params(n, init_params(seed));
  std::mt19937_64 rng(seed);
  std::vector<int> perm_host;
  const int steps = d.train_count / B;  // the last partial batch is dropped, as in the reference
  const Source src{d.train_images, d.train_labels, d.perm, n.step, steps};
  cudaGraphExec_t exec = nullptr;
  TrainResult res;
  double train_ms = 0;
  for (int e = 0; e < epochs; ++e) {
    new_epoch(n, d, rng, perm_host);
    if (r.graph && !exec) exec = capture_step(n, r.v, src, B, lr);
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    CUDA_CHECK(cudaEventRecord(t0, n.st));
    for (int s = 0; s < steps; ++s) {
      if (exec) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
      else train_step(n, r.v, src, B, lr);
    }
    CUDA_CHECK(cudaEventRecord(t1, n.st));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    train_ms += ms;
    const std::vector<float> l = download(n.loss_hist, steps);  // loss_cap >= steps
    res.losses.insert(res.losses.end(), l.begin(), l.end());
    res.accuracy.push_back(evaluate(n, d, r.v, res.pred));
    std::printf("epoch %d: loss %.4f  test accuracy %.2f%%  (%.3f s)\n", e + 1, l.back(), res.accuracy.back(), ms / 1e3);
  }
  if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
  res.seconds = train_ms / 1e3;
  return res;
}
// --8<-- [end:train]

static void write_curves(const char* path, const TrainResult& t, const std::vector<uint8_t>& labels, const char* impl,
                         int B, float lr, int epochs) {
  std::ofstream f(path);
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path);
    std::exit(course::kExitFail);
  }
  const int every = 10;
  f << "{\"impl\": \"" << impl << "\", \"batch\": " << B << ", \"lr\": " << lr << ", \"epochs\": " << epochs
    << ", \"train_seconds\": " << t.seconds << ", \"loss_every\": " << every << ", \"loss\": [";
  for (size_t i = 0; i < t.losses.size(); i += every) f << (i ? ", " : "") << t.losses[i];
  f << "], \"test_accuracy\": [";
  for (size_t i = 0; i < t.accuracy.size(); ++i) f << (i ? ", " : "") << t.accuracy[i];
  f << "], \"misclassified\": [";
  bool first = true;
  for (size_t i = 0; i < t.pred.size(); ++i) {
    if (t.pred[i] == labels[i]) continue;
    f << (first ? "" : ", ") << "[" << i << ", " << t.pred[i] << ", " << int(labels[i]) << "]";
    first = false;
  }
  f << "]}\n";
}

static double step_flops(int b) {
  const double conv1 = 2.0 * b * 784 * 32 * 9, conv2 = 2.0 * b * 196 * 64 * 288;
  const double fc1 = 2.0 * b * 3136 * 128, fc2 = 2.0 * b * 128 * 10;
  return 2 * conv1 + 3 * conv2 + 3 * fc1 + 3 * fc2;
}
static double step_bytes(int b) { return b * 784.0 + b * 4.0 + 2.0 * 4 * kTotalParams; }

static void print_bench(const char* kind, int B, const char* impl, double ms, int steps, double acc = -1) {
  // Plot fields: "step_ms" only on step rows and "epoch_s" only on epoch rows, so that a plot of one
  // of them draws only that kind of row.
  char extra[96] = "";
  if (acc >= 0) std::snprintf(extra, sizeof(extra), ", \"test_accuracy\": %.2f", acc);
  if (std::strcmp(kind, "step") == 0) std::snprintf(extra, sizeof(extra), ", \"step_ms\": %.6g", ms);
  if (std::strcmp(kind, "epoch") == 0) std::snprintf(extra, sizeof(extra), ", \"epoch_s\": %.6g", ms / 1e3);
  std::printf(
      "BENCH {\"case\": \"%s, batch %d\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": false, \"batch\": %d, \"kind\": \"%s\", \"steps\": %d%s}\n",
      kind, B, impl, ms, steps * step_bytes(B), steps * step_flops(B), B, kind, steps, extra);
  std::fflush(stdout);
}


// --8<-- [start:timing]
// Median time of one step over `repeats` steps, each timed alone with CUDA events from an idle GPU
// (as the PyTorch benchmark does), after warm-up.
static float median_step_ms(const Net& n, Runner r, const Source& src, int B, float lr, cudaGraphExec_t exec,
                            int repeats) {
  auto one = [&] {
    if (exec) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
    else train_step(n, r.v, src, B, lr);
  };
  for (int i = 0; i < 10; ++i) one();
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> t(repeats);
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(a, n.st));
    one();
    CUDA_CHECK(cudaEventRecord(b, n.st));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&t[i], a, b));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(t.begin(), t.begin() + repeats / 2, t.end());
  return t[repeats / 2];
}

// One full epoch (reshuffle included) from the first step to the last, after a warm-up epoch.
static float epoch_ms(const Net& n, DeviceData& d, Runner r, const Source& src, int B, float lr,
                      cudaGraphExec_t exec, std::mt19937_64& rng) {
  std::vector<int> perm_host;
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  float ms = 0;
  for (int rep = 0; rep < 2; ++rep) {
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    CUDA_CHECK(cudaEventRecord(a, n.st));
    new_epoch(n, d, rng, perm_host);
    for (int s = 0; s < src.steps_per_epoch; ++s) {
      if (exec) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
      else train_step(n, r.v, src, B, lr);
    }
    CUDA_CHECK(cudaEventRecord(b, n.st));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return ms;
}
// --8<-- [end:timing]

// --8<-- [start:layer_bench]
// Version 4's matrix products one by one, on the buffers the last step left (L2 flushed, median):
// rows "<layer>, batch B" whose flops and bytes (the least each must move: inputs read once, the
// output written once; weights in bf16) give the share of the tensor cores' peak on the page.
static void bench_tc_layers(const Net& n, int B, const char* impl) {
  const double b = B;
  double* s = n.stats;
  auto row = [&](const char* layer, double flops, double bytes, auto&& launch) {
    const float ms = course::time_kernel_ms(launch, 3, 50);
    char name[64];
    std::snprintf(name, sizeof(name), "%s, batch %d", layer, B);
    std::printf("  %-28s %8.4f ms  %7.2f TFLOP/s\n", name, ms, flops / ms / 1e9);
    course::print_bench(name, impl, ms, bytes, flops);
  };
  row("conv1 forward (CUDA cores)", 2 * b * 784 * 32 * 9, b * 784 * 4 + b * 32 * 784 * 4 + 288 * 4,
      [&] { tc::conv1_forward(n.x, n.param(W1), n.c1, B, s, s + 32, n.sms, n.st); });
  row("conv2 forward", 2 * b * 196 * 64 * 288, b * 32 * 196 * 2 + 18432 * 2 + b * 64 * 196 * 4,
      [&] { tc::conv_forward<14, 32, 64>(n.param_bf16(W2), n.p1_bf16, n.c2, B, s + 64, s + 128, n.sms, n.st); });
  row("conv2 input gradient", 2 * b * 196 * 64 * 288, b * 64 * 196 * 4 + 18432 * 2 + b * 32 * 196 * 4,
      [&] { tc::conv_backward_data<14, 32, 64>(n.param_bf16(W2), n.dc2, n.dp1, B, n.sms, n.st); });
  row("conv2 weight gradient", 2 * b * 196 * 64 * 288, b * 64 * 196 * 4 + b * 32 * 196 * 2 + 18432 * 4,
      [&] { tc::conv_backward_weight<14, 32, 64>(n.dc2, n.p1_bf16, n.grad(W2), n.wgrad_part, B, n.sms, n.st); });
  row("fc1 forward", 2 * b * 3136 * 128, b * 3136 * 2 + 401408 * 2 + b * 128 * 4,
      [&] { tc::linear_forward(n.p2_bf16, n.param_bf16(W3), n.h_pre, B, 3136, 128, n.sms, n.st); });
  row("fc1 input gradient", 2 * b * 3136 * 128, b * 128 * 4 + 401408 * 2 + b * 3136 * 4,
      [&] { tc::linear_backward_data(n.dh_pre, n.param_bf16(W3), n.dp2, B, 3136, 128, n.st); });
  row("fc1 weight gradient", 2 * b * 3136 * 128, b * 128 * 4 + b * 3136 * 2 + 401408 * 4,
      [&] { tc::linear_backward_weight(n.dh_pre, n.p2_bf16, n.grad(W3), B, 3136, 128, n.sms, n.st); });
}
// --8<-- [end:layer_bench]

static const Runner kRunners[] = {{kNaive, false}, {kLibraries, false}, {kFused, false},
                                  {kFused, true},  {kTf32, true},       {kTc, true}};
constexpr int kNumRunners = 6;  // the last two need compute capability 8.0

// --version N (1 to 4; 0: all): the version number of a runner (TF32 is a variant of version 3).
static int version_number(Version v) { return v == kTc ? 4 : v == kTf32 ? 3 : static_cast<int>(v) + 1; }

static void bench(Net& n, DeviceData& d, float lr, int only_version) {
  for (int B : {64, 256, 1024}) {
    for (Runner r : kRunners) {
      if ((r.v == kTf32 || r.v == kTc) && !tf32_supported()) continue;
      if (only_version && version_number(r.v) != only_version) continue;
      upload_params(n, init_params(0));
      std::mt19937_64 rng(1);
      std::vector<int> perm_host;
      new_epoch(n, d, rng, perm_host);
      const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
      cudaGraphExec_t exec = r.graph ? capture_step(n, r.v, src, B, lr) : nullptr;
      const float step = median_step_ms(n, r, src, B, lr, exec, r.v == kNaive ? 100 : 200);
      const float epoch = epoch_ms(n, d, r, src, B, lr, exec, rng);
      if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
      std::printf("batch %4d  %-20s step %8.4f ms  epoch %7.3f s\n", B, r.name(), step, epoch / 1e3);
      print_bench("step", B, r.name(), step, 1);
      print_bench("epoch", B, r.name(), epoch, src.steps_per_epoch);
      if (r.v == kTc) bench_tc_layers(n, B, r.name());
    }
  }
}

// Every version, and the captured graphs, take one step from the same weights on the same batch;
// versions 2 to 4 must agree with version 1 (which check_layers.py checks against PyTorch).
static bool versions_agree(Net& n, DeviceData& d, int B, float lr) {
  const std::vector<float> init = init_params(7);
  std::mt19937_64 rng(3);
  std::vector<int> perm_host;
  const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
  std::vector<float> grads[kNumRunners], params[kNumRunners], loss[kNumRunners];
  const int runners = tf32_supported() ? kNumRunners : kNumRunners - 2;  // kTf32, kTc: the last two
  for (int k = 0; k < runners; ++k) {
    const Runner r = kRunners[k];
    upload_params(n, init);
    course::poison(n.grads, kTotalParams * sizeof(float));
    new_epoch(n, d, rng, perm_host);
    rng.seed(3);  // the same shuffle for every version
    if (r.graph) {
      cudaGraphExec_t exec = capture_step(n, r.v, src, B, lr);
      CUDA_CHECK(cudaGraphLaunch(exec, n.st));
      CUDA_CHECK(cudaStreamSynchronize(n.st));
      CUDA_CHECK(cudaGraphExecDestroy(exec));
    } else {
      train_step(n, r.v, src, B, lr);
    }
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    grads[k] = download(n.grads, kTotalParams);
    params[k] = download(n.params, kTotalParams);
    loss[k] = download(n.loss_hist, 1);
  }
  bool ok = true;
  const char* names[kNumParams] = {"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight",
                                   "bn2.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  for (int k = 1; k < runners; ++k) {
    // TF32 rounds every product's inputs to 10 mantissa bits: a looser tolerance for that version;
    // bf16 (version 4) keeps 7, 8 times coarser: the loss within 2% (tol / 10).
    const Version v = kRunners[k].v;
    const double tol = v == kTc ? 2e-1 : v == kTf32 ? 2e-2 : 2e-3;
    char name[96];
    std::snprintf(name, sizeof(name), "%s_loss_vs_naive", kRunners[k].name());
    for (char* c = name; *c; ++c) *c = std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
    ok &= course::check_close(name, loss[k].data(), loss[0].data(), 1, tol / 10, 1e-5);
    if (v == kTf32 || v == kTc) {
      // TF32 rounding moves some max-pool winners and ReLU masks, which changes individual gradient
      // values by more than any elementwise tolerance; check_layers.py checks each TF32 kernel on its
      // own inputs instead, and check_tc_* (below) each version-4 kernel. Here: the loss above, and
      // the gradients' relative L2 distance as a note.
      for (int p = 0; p < kNumParams; ++p) {
        double d2 = 0, w2 = 0;
        for (int i = 0; i < kParamSize[p]; ++i) {
          const double g = grads[k][offset_of(p) + i], w = grads[0][offset_of(p) + i];
          d2 += (g - w) * (g - w);
          w2 += w * w;
        }
        const double dist = std::sqrt(d2 / w2);
        std::printf("NOTE %s grad %s: relative L2 distance to version 1 = %.3g\n", kVersionName[v], names[p], dist);
        if (v == kTc) {  // bf16: at least every gradient written (finite) and closer to version 1's than zero is
          std::snprintf(name, sizeof(name), "tc_grad_%s_finite_and_nearer_than_zero", names[p]);
          ok &= course::check_true(name, std::isfinite(dist) && dist < 1.0, kParamSize[p]);
        }
      }
      continue;
    }
    if (kRunners[k].graph && kRunners[k].v == kFused) {
      std::snprintf(name, sizeof(name), "graph_params_after_step_vs_fused");
      ok &= course::check_close(name, params[k].data(), params[2].data(), kTotalParams, 1e-5, 1e-7);
      continue;
    }
    for (int p = 0; p < kNumParams; ++p) {
      const float* want = grads[0].data() + offset_of(p);
      float scale = 0;
      for (int i = 0; i < kParamSize[p]; ++i) scale = std::max(scale, std::fabs(want[i]));
      std::snprintf(name, sizeof(name), "%s_grad_%s_vs_naive", kVersionName[kRunners[k].v], names[p]);
      ok &= course::check_close(name, grads[k].data() + offset_of(p), want, kParamSize[p], tol, tol * scale);
    }
  }
  return ok;
}

// --check-layers DIR: one step of every version on the weights and batch that check_layers.py
// wrote, dumping activations, gradients and updated weights for it to compare with PyTorch.
template <typename T>
static std::vector<T> read_bin(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    std::fprintf(stderr, "error: cannot read %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
  const size_t bytes = static_cast<size_t>(f.tellg());
  std::vector<T> v(bytes / sizeof(T));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return v;
}

static void dump(const std::string& path, const float* dev, size_t count) {
  const std::vector<float> h = download(dev, count);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
}

static int check_layers(const std::string& dir, float lr) {
  const std::vector<float> params = read_bin<float>(dir + "/params.f32");
  const std::vector<uint8_t> images = read_bin<uint8_t>(dir + "/images.u8");
  const std::vector<uint8_t> labels = read_bin<uint8_t>(dir + "/labels.u8");
  const std::vector<int> indices = read_bin<int>(dir + "/indices.i32");
  const int B = static_cast<int>(indices.size());
  if (params.size() != static_cast<size_t>(kTotalParams) || images.size() != labels.size() * 784 || B < 1 ||
      B > 1024) {
    std::fprintf(stderr, "error: %s: inconsistent inputs (%zu params, %zu images, %zu labels, batch %d)\n",
                 dir.c_str(), params.size(), images.size() / 784, labels.size(), B);
    return course::kExitFail;
  }
  Net n(B, 16);
  uint8_t* d_images = dalloc<uint8_t>(images.size());
  uint8_t* d_labels = dalloc<uint8_t>(labels.size());
  int* d_perm = dalloc<int>(B);
  CUDA_CHECK(cudaMemcpy(d_images, images.data(), images.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_labels, labels.data(), labels.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_perm, indices.data(), B * sizeof(int), cudaMemcpyHostToDevice));
  const Source src{d_images, d_labels, d_perm, n.step, 1};
  const std::vector<std::pair<const char*, std::pair<float*, size_t>>> acts = {
      {"x", {n.x, B * 784u}},        {"c1", {n.c1, B * 32u * 784}}, {"p1", {n.p1, B * 32u * 196}},
      {"c2", {n.c2, B * 64u * 196}}, {"p2", {n.p2, B * 3136u}},     {"h", {n.h, B * 128u}},
      {"logits", {n.logits, B * 10u}}};
  for (Version v : {kNaive, kLibraries, kFused, kTf32}) {
    if (v == kTf32 && !tf32_supported()) continue;  // check_layers.py skips its TF32 checks too
    upload_params(n, params);
    CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
    for (const auto& a : acts) course::poison(a.second.first, a.second.second * sizeof(float));
    course::poison(n.grads, kTotalParams * sizeof(float));
    course::poison(n.loss_hist, 16 * sizeof(float));
    forward(n, v, src, B, n.loss_hist, n.loss_cap);
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    const std::string pre = dir + "/" + kVersionName[v] + ".";
    for (const auto& a : acts) dump(pre + a.first + ".f32", a.second.first, a.second.second);
    dump(pre + "loss.f32", n.loss_hist, 1);
    backward(n, v, B);
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    dump(pre + "grads.f32", n.grads, kTotalParams);
    dump(pre + "dc2.f32", n.dc2, B * 64u * 196);  // gradients at the convolutions' outputs and conv2's input
    dump(pre + "dp1.f32", n.dp1, B * 32u * 196);
    dump(pre + "dc1.f32", n.dc1, B * 32u * 784);
    naive::sgd_update<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, lr, kTotalParams, n.step);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    dump(pre + "params.f32", n.params, kTotalParams);
  }
  // The fused step as a CUDA graph: warm up (loads every kernel), reset, capture, replay once.
  upload_params(n, params);
  CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
  train_step(n, kFused, src, B, lr);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  upload_params(n, params);
  CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
  course::poison(n.loss_hist, 16 * sizeof(float));
  cudaGraphExec_t exec = capture_step(n, kFused, src, B, lr);
  CUDA_CHECK(cudaGraphLaunch(exec, n.st));
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  dump(dir + "/graph.params.f32", n.params, kTotalParams);
  dump(dir + "/graph.loss.f32", n.loss_hist, 1);
  std::printf("wrote one step of naive, libraries, fused, %sgraph to %s (batch %d)\n",
              tf32_supported() ? "tf32 and " : "", dir.c_str(), B);
  return 0;
}

// --8<-- [start:tc_checks]
// Version 4's layers, each on its own random inputs against float64 on the CPU, outputs poisoned
// (the k-split GEMMs add into outputs that the step zeroes first: those are poisoned, then zeroed).
// The inputs are stored as the step stores them (weights and pooled activations in bf16, gradients
// in fp32), so the kernels checked are the ones the step runs; the references use the fp32 values.
// Tolerance from bf16: an fp32 value rounded to bf16 (8 significant bits) is off by at most
// u = 2^-8 relatively, so a product of two rounded inputs by at most 2u |a| |b|. The K errors of a
// dot product have random signs, so their sum grows like sqrt(K) (a random walk), not like K: spread
// evenly over [-u, u], its standard deviation is below u sqrt(2/3) sqrt(K) max|a| max|b|. The check
// allows atol = 6u sqrt(K) max|a| max|b|, over 7 standard deviations; fp32 accumulation (2^-24 per
// addition) is far below that. A wrong index or a lost k-slice is off by about the value itself,
// sqrt(K) max|a| max|b| / 3 for uniform inputs: some 14 times the tolerance.
static double bf16_atol(int K, double amax, double bmax) {
  return 6.0 * std::ldexp(1.0, -8) * std::sqrt(static_cast<double>(K)) * amax * bmax;
}

template <typename T>
static T* to_device(const std::vector<T>& h) {
  T* d = dalloc<T>(h.size());
  CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
static std::vector<T> fetch(const T* dev, size_t count) {
  std::vector<T> h(count);
  CUDA_CHECK(cudaMemcpy(h.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

static std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  course::fill_uniform(v, seed, lo, hi);
  return v;
}

static std::vector<__nv_bfloat16> to_bf16_host(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

static bool check_tc_convs(cudaStream_t st) {
  // conv2's shapes on 3 images, launched as on a GPU of one SM: two blocks, so that the first one
  // loops over two images (batch-norm sums and weight-gradient partials added across images).
  constexpr int N = 3, C = 32, K = 64, H = 14, HW = H * H, sms = 1;
  const std::vector<float> in = random_vector(N * C * HW, 101), w = random_vector(K * C * 9, 102),
                           dout = random_vector(N * K * HW, 103);
  __nv_bfloat16* d_in = to_device(to_bf16_host(in));  // stored in bf16 by the step (p1); dout in fp32
  float* d_dout = to_device(dout);
  __nv_bfloat16* d_w = to_device(to_bf16_host(w));
  float* d_out = dalloc<float>(N * K * HW);
  float* d_din = dalloc<float>(N * C * HW);
  float* d_dw = dalloc<float>(K * C * 9);
  double* d_stats = dalloc<double>(2 * K);
  const size_t part_floats = tc::conv_wgrad_partial_floats(N, sms, C, K);
  float* d_part = dalloc<float>(part_floats);
  course::poison(d_part, part_floats * sizeof(float));  // every slice's partial must be written
  course::poison(d_out, N * K * HW * sizeof(float));
  course::poison(d_din, N * C * HW * sizeof(float));
  course::poison(d_dw, K * C * 9 * sizeof(float));
  CUDA_CHECK(cudaMemset(d_dw, 0, K * C * 9 * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_stats, 0, 2 * K * sizeof(double)));
  tc::conv_forward<H, C, K>(d_w, d_in, d_out, N, d_stats, d_stats + K, sms, st);
  tc::conv_backward_data<H, C, K>(d_w, d_dout, d_din, N, sms, st);
  tc::conv_backward_weight<H, C, K>(d_dout, d_in, d_dw, d_part, N, sms, st);
  CUDA_CHECK(cudaStreamSynchronize(st));

  // The three products written as plain convolution sums (not as the im2col GEMM the kernels use).
  std::vector<double> out(N * K * HW, 0.0), din(N * C * HW, 0.0), dw(K * C * 9, 0.0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < 3; ++r)
          for (int q = 0; q < 3; ++q) {
            const double wv = w[((k * C + c) * 3 + r) * 3 + q];
            double acc_dw = 0.0;
            for (int y = 0; y < H; ++y)
              for (int x = 0; x < H; ++x) {
                const int iy = y + r - 1, ix = x + q - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= H) continue;
                const double iv = in[(n * C + c) * HW + iy * H + ix], g = dout[(n * K + k) * HW + y * H + x];
                out[(n * K + k) * HW + y * H + x] += iv * wv;  // out[y][x] += in[y+r-1][x+s-1] w[r][s]
                din[(n * C + c) * HW + iy * H + ix] += g * wv;  // its transpose
                acc_dw += g * iv;
              }
            dw[((k * C + c) * 3 + r) * 3 + q] += acc_dw;
          }
  bool ok = true;
  const std::vector<float> got = fetch(d_out, out.size());
  ok &= course::check_close("v4_conv2_forward_vs_fp64", got.data(), out.data(), out.size(), 0.0, bf16_atol(C * 9, 1, 1));
  // The epilogue's batch-norm sums: of the values the kernel stored, up to fp32 partial sums.
  std::vector<double> sum(K, 0.0), sumsq(K, 0.0), sum_abs(K, 0.0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int p = 0; p < HW; ++p) {
        const double v = got[(n * K + k) * HW + p];
        sum[k] += v;
        sumsq[k] += v * v;
        sum_abs[k] += std::fabs(v);
      }
  const std::vector<double> stats = fetch(d_stats, 2 * K);
  const double max_abs = *std::max_element(sum_abs.begin(), sum_abs.end());
  ok &= course::check_close("v4_conv2_bn_sum_vs_stored", stats.data(), sum.data(), K, 1e-5, 1e-5 * max_abs);
  ok &= course::check_close("v4_conv2_bn_sumsq_vs_stored", stats.data() + K, sumsq.data(), K, 1e-5, 1e-6);
  ok &= course::check_close("v4_conv2_input_grad_vs_fp64", fetch(d_din, din.size()).data(), din.data(), din.size(),
                            0.0, bf16_atol(K * 9, 1, 1));
  ok &= course::check_close("v4_conv2_weight_grad_vs_fp64", fetch(d_dw, dw.size()).data(), dw.data(), dw.size(), 0.0,
                            bf16_atol(N * HW, 1, 1));
  for (void* p : {static_cast<void*>(d_in), static_cast<void*>(d_dout), static_cast<void*>(d_w),
                  static_cast<void*>(d_out), static_cast<void*>(d_din), static_cast<void*>(d_dw),
                  static_cast<void*>(d_stats), static_cast<void*>(d_part)})
    CUDA_CHECK(cudaFree(p));
  return ok;
}

// conv1's kernel (fp32, CUDA cores): 5 images launched as on a GPU of one SM (one block that loops
// over the 5 images, prefetching each next one). Each output is 9 fp32 products added in fp32: |error| <= 9 * 2^-24 *
// sum |w x| <= 1.6e-6 for |w| <= 1/3, |x| <= 1; a wrong index is off by about a product (0.1).
static bool check_tc_conv1(cudaStream_t st) {
  constexpr int N = 5, C = 32, H = 28, HW = H * H, sms = 1;
  const std::vector<float> x = random_vector(N * HW, 111), w = random_vector(C * 9, 112, -1.0f / 3, 1.0f / 3);
  float *d_x = to_device(x), *d_w = to_device(w), *d_out = dalloc<float>(N * C * HW);
  double* d_stats = dalloc<double>(2 * C);
  course::poison(d_out, N * C * HW * sizeof(float));
  CUDA_CHECK(cudaMemset(d_stats, 0, 2 * C * sizeof(double)));
  tc::conv1_forward(d_x, d_w, d_out, N, d_stats, d_stats + C, sms, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> out(N * C * HW, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y)
        for (int xx = 0; xx < H; ++xx)
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
              const int iy = y + r - 1, ix = xx + s - 1;
              if (iy >= 0 && iy < H && ix >= 0 && ix < H)
                out[(n * C + c) * HW + y * H + xx] += static_cast<double>(w[c * 9 + r * 3 + s]) * x[n * HW + iy * H + ix];
            }
  const std::vector<float> got = fetch(d_out, out.size());
  bool ok = course::check_close("v4_conv1_forward_vs_fp64", got.data(), out.data(), out.size(), 0.0, 1e-5);
  std::vector<double> sum(C, 0.0), sumsq(C, 0.0), sum_abs(C, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < HW; ++p) {
        const double v = got[(n * C + c) * HW + p];
        sum[c] += v;
        sumsq[c] += v * v;
        sum_abs[c] += std::fabs(v);
      }
  const std::vector<double> stats = fetch(d_stats, 2 * C);
  const double max_abs = *std::max_element(sum_abs.begin(), sum_abs.end());
  ok &= course::check_close("v4_conv1_bn_sum_vs_stored", stats.data(), sum.data(), C, 1e-5, 1e-5 * max_abs);
  ok &= course::check_close("v4_conv1_bn_sumsq_vs_stored", stats.data() + C, sumsq.data(), C, 1e-5, 1e-6);
  for (void* p : {static_cast<void*>(d_x), static_cast<void*>(d_w), static_cast<void*>(d_out),
                  static_cast<void*>(d_stats)})
    CUDA_CHECK(cudaFree(p));
  return ok;
}

static bool check_tc_linears(int sms, cudaStream_t st) {
  // fc1's shapes on a batch of 5 (not a multiple of the 64-row tile; fc1 forward splits k = 3136).
  constexpr int B = 5, I = 3136, O = 128;
  const std::vector<float> x = random_vector(B * I, 201), w = random_vector(O * I, 202), dy = random_vector(B * O, 203);
  __nv_bfloat16* d_x = to_device(to_bf16_host(x));  // stored in bf16 by the step (p2); dy in fp32
  float* d_dy = to_device(dy);
  __nv_bfloat16* d_w = to_device(to_bf16_host(w));
  float* d_y = dalloc<float>(B * O);
  float* d_dx = dalloc<float>(B * I);
  float* d_dw = dalloc<float>(O * I);
  course::poison(d_y, B * O * sizeof(float));
  course::poison(d_dx, B * I * sizeof(float));
  course::poison(d_dw, O * I * sizeof(float));
  CUDA_CHECK(cudaMemset(d_y, 0, B * O * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_dw, 0, O * I * sizeof(float)));
  tc::linear_forward(d_x, d_w, d_y, B, I, O, sms, st);
  tc::linear_backward_data(d_dy, d_w, d_dx, B, I, O, st);
  tc::linear_backward_weight(d_dy, d_x, d_dw, B, I, O, sms, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> y(B * O), dx(B * I), dw(O * I);
  std::vector<float> dy_t(O * B);  // dy transposed: dw = dy^T x
  for (int b = 0; b < B; ++b)
    for (int o = 0; o < O; ++o) dy_t[o * B + b] = dy[b * O + o];
  course::gemm_reference(B, O, I, x.data(), w.data(), y.data(), course::BLayout::kNxK);    // y = x w^T
  course::gemm_reference(B, I, O, dy.data(), w.data(), dx.data(), course::BLayout::kKxN);  // dx = dy w
  course::gemm_reference(O, I, B, dy_t.data(), x.data(), dw.data(), course::BLayout::kKxN);
  bool ok = true;
  ok &= course::check_close("v4_fc1_forward_vs_fp64", fetch(d_y, y.size()).data(), y.data(), y.size(), 0.0,
                            bf16_atol(I, 1, 1));
  ok &= course::check_close("v4_fc1_input_grad_vs_fp64", fetch(d_dx, dx.size()).data(), dx.data(), dx.size(), 0.0,
                            bf16_atol(O, 1, 1));
  ok &= course::check_close("v4_fc1_weight_grad_vs_fp64", fetch(d_dw, dw.size()).data(), dw.data(), dw.size(), 0.0,
                            bf16_atol(B, 1, 1));
  for (void* p : {static_cast<void*>(d_x), static_cast<void*>(d_dy), static_cast<void*>(d_w), static_cast<void*>(d_y),
                  static_cast<void*>(d_dx), static_cast<void*>(d_dw)})
    CUDA_CHECK(cudaFree(p));
  return ok;
}

// The fp32 kernels around the GEMMs: fc2 with the loss and its backward, SGD with the bf16 copy.
static bool check_tc_small_kernels(cudaStream_t st) {
  constexpr int B = 301, n_params = 1000;  // several loss blocks, the last one partly empty
  const std::vector<float> h_pre = random_vector(B * 128, 301), b3 = random_vector(128, 302, -0.1f, 0.1f),
                           w4 = random_vector(1280, 303, -0.1f, 0.1f), b4 = random_vector(10, 304, -0.1f, 0.1f);
  std::vector<int> labels(B);
  for (int b = 0; b < B; ++b) labels[b] = (b * 7 + 3) % 10;
  float *d_hpre = to_device(h_pre), *d_b3 = to_device(b3), *d_w4 = to_device(w4), *d_b4 = to_device(b4);
  int* d_labels = to_device(labels);
  int* d_step = to_device(std::vector<int>{0});
  float *d_h = dalloc<float>(B * 128), *d_logits = dalloc<float>(B * 10), *d_dlogits = dalloc<float>(B * 10);
  float *d_loss = dalloc<float>(1), *d_part = dalloc<float>(tc::kLossBlocks);
  unsigned* d_done = to_device(std::vector<unsigned>{0});
  float *d_dhpre = dalloc<float>(B * 128), *d_g = dalloc<float>(128 + 1280 + 10);  // db3 | dw4 | db4
  course::poison(d_loss, sizeof(float));
  course::poison(d_h, B * 128 * sizeof(float));
  course::poison(d_logits, B * 10 * sizeof(float));
  course::poison(d_dlogits, B * 10 * sizeof(float));
  course::poison(d_dhpre, B * 128 * sizeof(float));
  course::poison(d_g, 1418 * sizeof(float));
  CUDA_CHECK(cudaMemset(d_g, 0, 1418 * sizeof(float)));  // sums: zeroed by the step before the kernel
  tc::fc2_loss_and_backward<<<tc::fc2_loss_blocks(B), tc::kLossThreads, 0, st>>>(
      d_hpre, d_b3, d_w4, d_b4, d_labels, d_h, d_logits, d_dlogits, d_dhpre, d_g, d_g + 128, d_g + 1408, B, d_step,
      d_loss, 1, d_part, d_done);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(st));

  std::vector<double> h(B * 128), z(B * 10), dz(B * 10), dhpre(B * 128), g(1418, 0.0);
  double loss = 0.0;
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < 128; ++i) h[b * 128 + i] = std::max(0.0, double(h_pre[b * 128 + i]) + b3[i]);
    double m = -INFINITY, sum = 0.0;
    for (int k = 0; k < 10; ++k) {
      double acc = b4[k];
      for (int i = 0; i < 128; ++i) acc += h[b * 128 + i] * w4[k * 128 + i];
      z[b * 10 + k] = acc;
      m = std::max(m, acc);
    }
    for (int k = 0; k < 10; ++k) sum += std::exp(z[b * 10 + k] - m);
    loss += (std::log(sum) + m - z[b * 10 + labels[b]]) / B;
    for (int k = 0; k < 10; ++k) dz[b * 10 + k] = (std::exp(z[b * 10 + k] - m) / sum - (k == labels[b])) / B;
    for (int i = 0; i < 128; ++i) {
      double d = 0.0;
      for (int k = 0; k < 10; ++k) {
        d += dz[b * 10 + k] * w4[k * 128 + i];
        g[128 + k * 128 + i] += dz[b * 10 + k] * h[b * 128 + i];  // dW4 = dlogits^T h
      }
      dhpre[b * 128 + i] = h[b * 128 + i] > 0.0 ? d : 0.0;
      g[i] += dhpre[b * 128 + i];  // db3
    }
    for (int k = 0; k < 10; ++k) g[1408 + k] += dz[b * 10 + k];  // db4
  }
  bool ok = true;
  ok &= course::check_close("v4_fc1_bias_relu_vs_fp64", fetch(d_h, h.size()).data(), h.data(), h.size(), 1e-6, 1e-6);
  ok &= course::check_close("v4_fc2_logits_vs_fp64", fetch(d_logits, z.size()).data(), z.data(), z.size(), 1e-5, 1e-5);
  ok &= course::check_close("v4_softmax_xent_grad_vs_fp64", fetch(d_dlogits, dz.size()).data(), dz.data(), dz.size(),
                            1e-4, 1e-8);
  ok &= course::check_close("v4_softmax_xent_loss_vs_fp64", fetch(d_loss, 1).data(), &loss, 1, 1e-5, 1e-6);
  ok &= course::check_close("v4_fc2_backward_dh_vs_fp64", fetch(d_dhpre, dhpre.size()).data(), dhpre.data(),
                            dhpre.size(), 1e-4, 1e-8);
  ok &= course::check_close("v4_fc2_backward_grads_vs_fp64", fetch(d_g, g.size()).data(), g.data(), g.size(), 1e-4,
                            1e-6);
  ok &= course::check_true("v4_loss_counter_reset", fetch(d_done, 1)[0] == 0, 1);

  // SGD: fp32 master weights and their bf16 copy (within bf16's relative rounding, 2^-8).
  const std::vector<float> p0 = random_vector(n_params, 306), g0 = random_vector(n_params, 307);
  float* d_p = to_device(p0);
  float* d_g0 = to_device(g0);
  __nv_bfloat16* d_p16 = dalloc<__nv_bfloat16>(n_params);
  course::poison(d_p16, n_params * sizeof(__nv_bfloat16));
  tc::sgd_update_bf16<<<course::ceil_div(n_params, 256), 256, 0, st>>>(d_p, d_g0, d_p16, 0.05f, n_params, d_step);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> p1(n_params);
  for (int i = 0; i < n_params; ++i) p1[i] = double(p0[i]) - 0.05 * double(g0[i]);
  const std::vector<__nv_bfloat16> p16 = fetch(d_p16, n_params);
  std::vector<float> p16f(n_params);
  for (int i = 0; i < n_params; ++i) p16f[i] = __bfloat162float(p16[i]);
  ok &= course::check_close("v4_sgd_fp32_vs_fp64", fetch(d_p, n_params).data(), p1.data(), n_params, 1e-6, 1e-7);
  ok &= course::check_close("v4_sgd_bf16_copy_vs_fp64", p16f.data(), p1.data(), n_params, std::ldexp(1.0, -8), 0.0);
  ok &= course::check_true("v4_sgd_advances_step", fetch(d_step, 1)[0] == 1, 1);
  for (void* p : {static_cast<void*>(d_hpre), static_cast<void*>(d_b3), static_cast<void*>(d_w4),
                  static_cast<void*>(d_b4), static_cast<void*>(d_labels),
                  static_cast<void*>(d_step), static_cast<void*>(d_h), static_cast<void*>(d_logits),
                  static_cast<void*>(d_dlogits), static_cast<void*>(d_loss), static_cast<void*>(d_part),
                  static_cast<void*>(d_done), static_cast<void*>(d_dhpre), static_cast<void*>(d_g),
                  static_cast<void*>(d_p), static_cast<void*>(d_g0), static_cast<void*>(d_p16)})
    CUDA_CHECK(cudaFree(p));
  return ok;
}
// --8<-- [end:tc_checks]

// --8<-- [start:weights_file]
// The weights file of --save and --predict (little-endian, as every GPU host the course targets):
//   8 bytes   "MNISTCNN"   magic
//   uint32    1            format version
//   uint32    10           number of tensors, in PyTorch's model.parameters() order
//   per tensor: uint32 rank, then rank uint32 sizes (conv1.weight: 4 32 1 3 3; ...; fc2.bias: 1 10)
//   float32   421,738 values: the tensors one after the other, each row-major (PyTorch's layout)
constexpr char kWeightsMagic[8] = {'M', 'N', 'I', 'S', 'T', 'C', 'N', 'N'};
constexpr uint32_t kWeightsVersion = 1;
static const std::vector<uint32_t> kShapes[kNumParams] = {{32, 1, 3, 3}, {32}, {32}, {64, 32, 3, 3}, {64},
                                                          {64},          {128, 3136}, {128}, {10, 128}, {10}};

static void save_weights(const std::string& path, const std::vector<float>& p) {
  std::ofstream f(path, std::ios::binary);
  auto put = [&](uint32_t v) { f.write(reinterpret_cast<const char*>(&v), sizeof(v)); };
  f.write(kWeightsMagic, sizeof(kWeightsMagic));
  put(kWeightsVersion);
  put(kNumParams);
  for (const auto& shape : kShapes) {
    put(static_cast<uint32_t>(shape.size()));
    for (uint32_t d : shape) put(d);
  }
  f.write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
}

// Reads a weights file, or exits 1 saying what is wrong with it.
static std::vector<float> load_weights(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "error: %s: %s\n", path.c_str(), why.c_str());
    std::exit(course::kExitFail);
  };
  if (!f) fail("cannot open it");
  char magic[8] = {};
  f.read(magic, sizeof(magic));
  if (!f || std::memcmp(magic, kWeightsMagic, sizeof(magic)) != 0)
    fail("not a weights file of mnist_cnn (no \"MNISTCNN\" magic at its start)");
  auto get = [&]() {
    uint32_t v = 0;
    f.read(reinterpret_cast<char*>(&v), sizeof(v));
    if (!f) fail("truncated header");
    return v;
  };
  if (const uint32_t v = get(); v != kWeightsVersion) fail("format version " + std::to_string(v) + ", expected 1");
  if (const uint32_t c = get(); c != kNumParams) fail(std::to_string(c) + " tensors, expected 10");
  for (int t = 0; t < kNumParams; ++t) {
    const uint32_t rank = get();
    std::vector<uint32_t> shape(rank <= 4 ? rank : 0);
    for (auto& d : shape) d = get();
    if (shape != kShapes[t]) fail("tensor " + std::to_string(t) + " has the wrong shape for this network");
  }
  std::vector<float> p(kTotalParams);
  f.read(reinterpret_cast<char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
  if (!f) fail("truncated: fewer than 421738 weights");
  if (f.peek() != std::char_traits<char>::eof()) fail("longer than a weights file: extra bytes after the weights");
  for (float v : p)
    if (!std::isfinite(v)) fail("contains a NaN or infinite weight");
  return p;
}
// --8<-- [end:weights_file]

// --8<-- [start:pgm]
// A 28 x 28 8-bit greyscale image in binary PGM ("P5": the header "P5 28 28 255", whitespace and
// #-comments allowed between its fields, one whitespace byte, then 784 pixel bytes, row by row).
// Like MNIST's digits it should be a light digit on a dark background (0 = black).
static std::vector<uint8_t> read_pgm(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "error: %s: %s\n", path.c_str(), why.c_str());
    std::exit(course::kExitFail);
  };
  if (!f) fail("cannot open it");
  auto field = [&]() {  // the next header field, skipping whitespace and comments
    std::string tok;
    int ch;
    while ((ch = f.get()) != EOF) {
      if (ch == '#') {
        while ((ch = f.get()) != EOF && ch != '\n') {
        }
        continue;
      }
      if (std::isspace(ch)) {
        if (!tok.empty()) break;
        continue;
      }
      tok += static_cast<char>(ch);
      if (tok.size() > 8) fail("malformed PGM header");
    }
    return tok;
  };
  if (field() != "P5") fail("not a binary PGM image (it must start with \"P5\")");
  int dims[3];
  for (int& d : dims) {
    const std::string tok = field();
    if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos) fail("malformed PGM header");
    d = std::stoi(tok);
  }
  if (dims[0] != 28 || dims[1] != 28) {
    fail("image is " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + ", expected 28x28");
  }
  if (dims[2] < 1 || dims[2] > 255) fail("maximum value " + std::to_string(dims[2]) + ", expected 1..255 (8-bit)");
  std::vector<uint8_t> px(784);
  f.read(reinterpret_cast<char*>(px.data()), 784);
  if (!f) fail("truncated: fewer than 784 pixel bytes");
  for (auto& v : px) {
    if (v > dims[2]) fail("a pixel exceeds the header's maximum value");
    v = static_cast<uint8_t>((v * 255 + dims[2] / 2) / dims[2]);  // to 0..255
  }
  return px;
}
// --8<-- [end:pgm]

// --8<-- [start:predict]
// --predict: the test set's accuracy with saved weights; with --image, that one image's class. Batch
// norm normalises with the statistics of the batch at hand (the model keeps no running statistics),
// so the image is classified in a batch with the first 999 test images, as evaluation does with
// batches of 1000: it sees the statistics it was trained with.
static double predict(Net& n, DeviceData& d, Version v, const std::vector<float>& weights, const std::string& image) {
  upload_params(n, weights);
  std::vector<int> pred;
  const double acc = evaluate(n, d, v, pred);
  std::printf("test accuracy %.2f%% with the saved weights (version %d)\n", acc, version_number(v));
  if (image.empty()) return acc;
  const std::vector<uint8_t> px = read_pgm(image);
  uint8_t* imgs = dalloc<uint8_t>(kEvalChunk * 784);
  uint8_t* labels = dalloc<uint8_t>(kEvalChunk);
  CUDA_CHECK(cudaMemcpy(imgs, d.test_images, (kEvalChunk - 1) * 784, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy(imgs + (kEvalChunk - 1) * 784, px.data(), 784, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(labels, d.test_labels, kEvalChunk, cudaMemcpyDeviceToDevice));  // the image's: unused
  const int zero = 0;
  CUDA_CHECK(cudaMemcpy(d.eval_step, &zero, sizeof(int), cudaMemcpyHostToDevice));
  float* scratch_loss = dalloc<float>(1);
  const Source src{imgs, labels, d.test_perm, d.eval_step, 1};  // test_perm starts 0, 1, 2, ...
  forward(n, v, src, kEvalChunk, scratch_loss, 1);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  const std::vector<float> z = fetch(n.logits + (kEvalChunk - 1) * 10, 10);
  const float m = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (float zi : z) sum += std::exp(zi - m);
  const int best = static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin());
  std::printf("%s: digit %d (probability %.3f); all:", image.c_str(), best, 1.0 / sum);
  for (int k = 0; k < 10; ++k) std::printf(" %d:%.3f", k, std::exp(z[k] - m) / sum);
  std::printf("\n");
  for (void* p : {static_cast<void*>(imgs), static_cast<void*>(labels), static_cast<void*>(scratch_loss)})
    CUDA_CHECK(cudaFree(p));
  return acc;
}
// --8<-- [end:predict]

// --8<-- [start:loss_curve]
// --loss-curve DIR: the initial weights (DIR/init.bin, the weights-file format) and the losses of the
// first 50 steps (DIR/losses-<version>.txt, one a line) of version 3 (fp32, "fused") and/or 4 (bf16,
// "tc"), with the training images in file order (no shuffle), so that loss_curve.py
// can train PyTorch from the same weights on the same batches and compare the curves step by step.
constexpr int kCurveSteps = 50;

static void loss_curve(Net& n, DeviceData& d, const std::string& dir, int only_version, int B, float lr) {
  const std::vector<float> init = init_params(0);
  save_weights(dir + "/init.bin", init);
  std::vector<int> order(d.train_count);
  std::iota(order.begin(), order.end(), 0);
  CUDA_CHECK(cudaMemcpy(d.perm, order.data(), order.size() * sizeof(int), cudaMemcpyHostToDevice));
  const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
  for (Version v : {kFused, kTc}) {
    if (only_version && version_number(v) != only_version) continue;
    if (v == kTc && !tf32_supported()) continue;
    upload_params(n, init);
    CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
    for (int s = 0; s < kCurveSteps; ++s) train_step(n, v, src, B, lr);
    const std::vector<float> losses = fetch(n.loss_hist, kCurveSteps);
    const std::string path = dir + "/losses-" + kVersionName[v] + ".txt";
    std::ofstream f(path);
    f.precision(9);
    for (float l : losses) f << l << "\n";
    if (!f) {
      std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
      std::exit(course::kExitFail);
    }
    std::printf("wrote %d losses of version %d (batch %d) to %s; first %.4f, last %.4f\n", kCurveSteps,
                version_number(v), B, path.c_str(), losses.front(), losses.back());
  }
}
// --8<-- [end:loss_curve]

// --8<-- [start:main]
int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const std::string layers_dir = args.get_str("--check-layers", "");
  const std::string data_dir = mnist::data_dir(args.get_str("--data-dir", "").c_str());
  const int epochs = static_cast<int>(args.get_int("--epochs", 8, 1, 1000));
  const int batch = static_cast<int>(args.get_int("--batch", 64, 1, 1024));
  const int only_version = static_cast<int>(args.get_int("--version", 0, 0, 4));  // 0: every version
  const bool bench_mode = args.has("--bench"), train_mode = args.has("--train"), agree_only = args.has("--agree-only");
  const std::string curves[2] = {args.get_str("--curves", ""), args.get_str("--curves-tf32", "")};
  const std::string save_path = args.get_str("--save", ""), predict_path = args.get_str("--predict", "");
  const std::string image_path = args.get_str("--image", ""), curve_dir = args.get_str("--loss-curve", "");
  args.finish();
  const float lr = 0.05f;  // the reference's learning rate (kernels/mnist/mnist_torch.py)
  if (!image_path.empty() && predict_path.empty()) {
    std::fprintf(stderr, "error: --image needs --predict WEIGHTS (the weights to classify it with)\n");
    return course::kExitFail;
  }
  if (!predict_path.empty() && train_mode && save_path.empty()) {
    std::fprintf(stderr, "error: with --train, --predict reads back what --save wrote; give --save too\n");
    return course::kExitFail;
  }
  if (!curve_dir.empty() && (only_version == 1 || only_version == 2)) {
    std::fprintf(stderr, "error: --loss-curve writes versions 3 and 4 (--version 3 or 4, or neither)\n");
    return course::kExitFail;
  }
  if (!save_path.empty() && !train_mode) {
    std::fprintf(stderr, "error: --save writes the weights that --train trained; give --train too\n");
    return course::kExitFail;
  }
  // A weights file that cannot be read is an error before any GPU work.
  const std::vector<float> saved = predict_path.empty() || train_mode ? std::vector<float>{} : load_weights(predict_path);
  if (!layers_dir.empty()) return check_layers(layers_dir, lr);
  if (only_version == 4)
    course::require_compute_capability(8, 0, "version 4 multiplies on bf16 tensor cores (mma.sync m16n8k16.bf16)");

  Split train_split, test_split;
  try {  // a missing or damaged file: a clear message and exit code 1, before any GPU work
    train_split = load_split(data_dir, "train", 60000);
    test_split = load_split(data_dir, "t10k", 10000);
  } catch (const IdxError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return course::kExitFail;
  }
  Net n(1024, 60000);
  DeviceData d = upload(train_split, test_split);
  bool ok = true;
  // Predictions run version 4 where the GPU has it (or the one --version names), else version 3.
  const Version predict_version = only_version == 4 || (only_version == 0 && tf32_supported()) ? kTc : kFused;

  if (!curve_dir.empty()) {
    loss_curve(n, d, curve_dir, only_version, batch, lr);
    return 0;
  }
  if (!predict_path.empty() && !train_mode) {
    predict(n, d, predict_version, saved, image_path);
    return 0;
  }
  if (bench_mode) bench(n, d, lr, only_version);
  if (bench_mode || train_mode) {
    // The accuracy runs: the fastest version of each precision (FP32, TF32, bf16), the reference's
    // hyper-parameters; --version N trains only version N's.
    for (const Runner r : {Runner{kFused, true}, Runner{kTf32, true}, Runner{kTc, true}}) {
      if ((r.v == kTf32 || r.v == kTc) && !tf32_supported()) continue;
      if (only_version && version_number(r.v) != only_version) continue;
      if (only_version == 0 && !save_path.empty() && r.v != predict_version) continue;  // train what is saved
      const TrainResult t = train(n, d, r, epochs, batch, lr, 0);
      // "Reaches 99%": the first epoch whose test accuracy is at least 99.0%. With a constant learning
      // rate the accuracy goes up and down from epoch to epoch, so the best and the last are printed too.
      int reached = 0;
      for (size_t e = 0; e < t.accuracy.size() && !reached; ++e)
        if (t.accuracy[e] >= 99.0) reached = static_cast<int>(e) + 1;
      char detail[160], check_name[64], kind[64];
      std::snprintf(detail, sizeof(detail), "reached_at_epoch=%d best=%.2f%% last=%.2f%% epochs=%d batch=%d lr=%g",
                    reached, *std::max_element(t.accuracy.begin(), t.accuracy.end()), t.accuracy.back(), epochs,
                    batch, lr);
      std::snprintf(check_name, sizeof(check_name), "%s_test_accuracy_reaches_99", kVersionName[r.v]);
      ok &= course::check_true(check_name, reached > 0, 10000, detail);
      std::snprintf(kind, sizeof(kind), "train %d epochs", epochs);
      print_bench(kind, batch, r.name(), t.seconds * 1e3, epochs * (d.train_count / batch), t.accuracy.back());
      if (r.v != kTc) {
        const std::string& path = curves[r.v == kTf32 ? 1 : 0];
        if (!path.empty()) write_curves(path.c_str(), t, test_split.labels, r.name(), batch, lr, epochs);
      }
      if (!save_path.empty() && r.v == predict_version) {
        save_weights(save_path, fetch(n.params, kTotalParams));
        std::printf("saved the weights of version %d to %s\n", version_number(r.v), save_path.c_str());
        if (!predict_path.empty()) {  // read them back, and the same kernels must classify as in training
          const double acc = predict(n, d, r.v, load_weights(predict_path), image_path);
          char what[96];
          std::snprintf(what, sizeof(what), "after_training=%.2f%% from_file=%.2f%%", t.accuracy.back(), acc);
          ok &= course::check_true("saved_weights_predict_as_trained", std::fabs(acc - t.accuracy.back()) <= 0.1,
                                   10000, what);
        }
      }
    }
  } else {
    // The checked run: version 4's layers against float64, then the versions agree on one step
    // (batch 61, a prime), then one epoch trains.
    if (tf32_supported() && (only_version == 0 || only_version == 4)) {
      ok &= check_tc_conv1(n.st);
      ok &= check_tc_convs(n.st);
      ok &= check_tc_linears(n.sms, n.st);
      ok &= check_tc_small_kernels(n.st);
    }
    ok &= versions_agree(n, d, 61, lr);
    if (agree_only) return ok ? 0 : course::kExitFail;
    const TrainResult t = train(n, d, {kFused, true}, 1, 64, lr, 0);
    char detail[64];
    std::snprintf(detail, sizeof(detail), "accuracy=%.2f%% after 1 epoch", t.accuracy.back());
    ok &= course::check_true("one_epoch_learns", t.accuracy.back() >= 97.0, 10000, detail);
    if (tf32_supported()) {
      const TrainResult t4 = train(n, d, {kTc, true}, 1, 64, lr, 0);
      std::snprintf(detail, sizeof(detail), "accuracy=%.2f%% after 1 epoch", t4.accuracy.back());
      ok &= course::check_true("tc_one_epoch_learns", t4.accuracy.back() >= 97.0, 10000, detail);
    }
  }
  return ok ? 0 : course::kExitFail;
}
// --8<-- [end:main]
