// mnist_model.cuh: the course's MNIST CNN on the GPU, shared by the three MNIST programs
// (mnist_train.cu, mnist_bench.cu, mnist_check.cu): the parameters' layout, the network's buffers,
// and one training step in each of four versions of increasing speed.
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
//
// Taught in docs/mnist/: naive.md (layout, forward, backward), libraries.md (cuBLAS), fused.md (the
// step and its CUDA graph), tensor-cores.md (version 4). The host side the programs share (data,
// evaluation, the training loop) is mnist_host.cuh.
//
// course: header
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/check.cuh"
#include "../common/check_cublas.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "conv_igemm.cuh"
#include "layers_fused.cuh"
#include "layers_naive.cuh"
#include "layers_tc.cuh"

namespace mnist {

// --8<-- [start:layout]
// All parameters live in one buffer, in PyTorch's model.parameters() order, and their gradients
// in another with the same layout: one SGD kernel updates everything.
enum Param { W1, G1, BE1, W2, G2, BE2, W3, B3, W4, B4, kNumParams };
constexpr int kParamSize[kNumParams] = {32 * 9, 32, 32, 64 * 32 * 9, 64, 64, 128 * 3136, 128, 10 * 128, 10};
constexpr int offset_of(int p) { return p == 0 ? 0 : offset_of(p - 1) + kParamSize[p - 1]; }
constexpr int kTotalParams = offset_of(kNumParams);  // 421,738
// --8<-- [end:layout]

// The most slices of the batch that a batch-norm backward's sums are split into (one part each).
constexpr int kBnBackwardSlices = 32;

// kTf32: kFused with TF32 tensor-core convolutions; kTc: version 4 (bf16 tensor cores).
enum Version { kNaive, kLibraries, kFused, kTf32, kTc };
constexpr const char* kVersionName[] = {"naive", "libraries", "fused", "tf32", "tc"};

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
  int* run_step;  // version 4: the run's step counter (step + 1), which the learning-rate schedule reads
  float* lr_now;  // version 4: this step's learning rate (tc::next_learning_rate)
  int lr_warmup_steps = 0, lr_total_steps = 0;  // version 4's schedule (tc::LrSchedule); 0: constant
  float* params_backup;
  int* step_backup;
  __nv_bfloat16* params_bf16;  // version 4: the bf16 copy of params that the tensor cores read
  __nv_bfloat16 *p1_bf16, *p2_bf16;  // version 4: the pooled activations, read only by bf16 products
  // Deterministic sums: every reduction across blocks writes one part per block, and reduce_parts
  // adds the parts in a fixed order (no atomics): a step gives the same bits in every run.
  double* stat_part;     // the batch-norm sums' parts (versions 3 and 4, forward and backward)
  float* wgrad_part;     // version 4: conv2's weight gradient, one partial sum per slice of the batch
  float* fc1_part;       // version 4: fc1 forward's slices of k
  float* fc1_wgrad_part;  // version 4: fc1's weight gradient's slices of the batch (on the side stream)
  float* fc2_part;       // version 4: fc2's and fc1's bias gradients, one part per block
  float* c1_wgrad_part;  // conv1's weight gradient's slices of the batch (versions 2 to 4)
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
    params = course::device_alloc<float>(kTotalParams);
    grads = course::device_alloc<float>(kTotalParams);
    ones = course::device_alloc<float>(B);
    std::vector<float> h_ones(B, 1.0f);
    CUDA_CHECK(cudaMemcpy(ones, h_ones.data(), B * sizeof(float), cudaMemcpyHostToDevice));
    x = course::device_alloc<float>(B * 784);
    y = course::device_alloc<int>(B);
    for (float** p : {&c1, &a1, &r1, &dr1, &da1, &dc1}) *p = course::device_alloc<float>(B * 32 * 784);
    for (float** p : {&p1, &dp1}) *p = course::device_alloc<float>(B * 32 * 196);
    for (float** p : {&c2, &a2, &r2, &dr2, &da2, &dc2}) *p = course::device_alloc<float>(B * 64 * 196);
    for (float** p : {&p2, &dp2}) *p = course::device_alloc<float>(B * 3136);
    arg1 = course::device_alloc<uint8_t>(B * 32 * 196);
    arg2 = course::device_alloc<uint8_t>(B * 3136);
    for (float** p : {&h_pre, &h, &dh, &dh_pre}) *p = course::device_alloc<float>(B * 128);
    for (float** p : {&logits, &probs, &dlogits}) *p = course::device_alloc<float>(B * 10);
    for (float** p : {&mean1, &rstd1}) *p = course::device_alloc<float>(32);
    for (float** p : {&mean2, &rstd2}) *p = course::device_alloc<float>(64);
    stats = course::device_alloc<double>(384);
    coef1 = course::device_alloc<float4>(32);
    bcoef1 = course::device_alloc<float4>(32);
    coef2 = course::device_alloc<float4>(64);
    bcoef2 = course::device_alloc<float4>(64);
    step = course::device_alloc<int>(2);
    run_step = step + 1;
    lr_now = course::device_alloc<float>(1);
    params_backup = course::device_alloc<float>(kTotalParams);
    step_backup = course::device_alloc<int>(2);
    loss_hist = course::device_alloc<float>(loss_capacity);
    CUDA_CHECK(cudaMemset(step, 0, 2 * sizeof(int)));
    params_bf16 = course::device_alloc<__nv_bfloat16>(kTotalParams);
    p1_bf16 = course::device_alloc<__nv_bfloat16>(B * 32 * 196);
    p2_bf16 = course::device_alloc<__nv_bfloat16>(B * 3136);
    loss_part = course::device_alloc<float>(tc::kLossBlocks);
    loss_blocks_done = course::device_alloc<unsigned>(1);
    CUDA_CHECK(cudaMemset(loss_blocks_done, 0, sizeof(unsigned)));
    sms = igemm::sm_count();
    wgrad_part = course::device_alloc<float>(tc::conv_wgrad_partial_floats(max_b, sms, 32, 64));
    stat_part =
        course::device_alloc<double>(std::max<size_t>(tc::bn_stat_part_doubles(sms), kBnBackwardSlices * 128));
    fc1_part = course::device_alloc<float>(tc::linear_part_floats(max_b, 3136, 128, sms));
    fc1_wgrad_part = course::device_alloc<float>(tc::linear_part_floats(max_b, 3136, 128, sms));
    fc2_part = course::device_alloc<float>(static_cast<size_t>(tc::kLossBlocks) * tc::kFc2Grads);
    c1_wgrad_part = course::device_alloc<float>(igemm::wgrad_c1_part_floats(max_b, 32));
    CUDA_CHECK(cudaStreamCreate(&side));
    for (cudaEvent_t* e : {&fork_fc1, &fork_conv2, &join})
      CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }
};

// PyTorch's default initialisation: weights and biases uniform in +-1/sqrt(fan_in); BN gamma 1, beta 0.
inline std::vector<float> init_params(uint64_t seed) {
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

inline int blocks(long long n, int threads = 256) {
  return static_cast<int>(course::ceil_div<long long>(n, threads));
}

// --- cuBLAS: row-major Y[B][O] = X[B][I] W[O][I]^T is column-major Y^T = W^T-as-stored^T X^T ---------
// --8<-- [start:cublas]
inline void linear_forward_blas(const Net& n, const float* X, const float* W, float* Y, int B, int I, int O) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_T, CUBLAS_OP_N, O, B, I, &one, W, I, X, I, &zero, Y, O));
}

// Y[b][o] += bias[o], as a rank-1 product bias * ones^T, so that version 2 is cuBLAS only.
inline void add_bias_blas(const Net& n, const float* bias, float* Y, int B, int O) {
  const float one = 1.0f;
  CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_N, O, B, 1, &one, bias, O, n.ones, 1, &one, Y, O));
}

// dW = dY^T X, db = dY^T 1, dX = dY W (dX skipped when null).
inline void linear_backward_blas(const Net& n, const float* dY, const float* X, const float* W, float* dX, float* dW,
                          float* db, int B, int I, int O) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, B, &one, X, I, dY, O, &zero, dW, I));
  CUBLAS_CHECK(cublasSgemv(n.blas, CUBLAS_OP_N, O, B, &one, dY, O, n.ones, 1, &zero, db, 1));
  if (dX) CUBLAS_CHECK(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_N, I, B, O, &one, W, I, dY, O, &zero, dX, I));
}
// --8<-- [end:cublas]

// --- the three versions ---------------------------------------------------------------------------

// Batch norm, ReLU and pooling of one block, unfused (versions 1 and 2).
inline void bn_relu_pool_unfused(const Net& n, const float* c, float* a, float* r, float* p, uint8_t* arg,
                                 float* mean, float* rstd, int gamma, int beta, int B, int C, int H) {
  const int HW = H * H, total = B * C * HW;
  naive::batchnorm_stats<<<C, 1024, 0, n.st>>>(c, mean, rstd, B, C, HW);
  naive::batchnorm_apply<<<blocks(total), 256, 0, n.st>>>(c, mean, rstd, n.param(gamma), n.param(beta), a, B, C, HW);
  naive::relu_forward<<<blocks(total), 256, 0, n.st>>>(a, r, total);
  naive::maxpool_forward<<<blocks(total / 4), 256, 0, n.st>>>(r, p, arg, B * C, H, H);
  CUDA_CHECK_LAUNCH();
}

inline void bn_relu_pool_backward_unfused(const Net& n, const float* dp, const uint8_t* arg, float* dr,
                                          const float* a, float* da, const float* c, const float* mean,
                                          const float* rstd, int gamma, int beta, float* dc, int B, int C, int H) {
  const int HW = H * H, total = B * C * HW;
  naive::maxpool_backward<<<blocks(total), 256, 0, n.st>>>(dp, arg, dr, B * C, H, H);
  naive::relu_backward<<<blocks(total), 256, 0, n.st>>>(dr, a, da, total);
  naive::batchnorm_backward_reduce<<<C, 1024, 0, n.st>>>(da, c, mean, rstd, n.grad(gamma), n.grad(beta), B, C, HW);
  naive::batchnorm_backward_apply<<<blocks(total), 256, 0, n.st>>>(da, c, mean, rstd, n.param(gamma), n.grad(gamma),
                                                                   n.grad(beta), dc, B, C, HW);
  CUDA_CHECK_LAUNCH();
}

// Fused version: pass 1 (per-channel sums, one part per slice, added in a fixed order into dsum[0..C)
// and dsum[C..2C)) and pass 2 (every element) of the block's backward.
template <typename T>  // the pooled activations: float (version 3) or bf16 (version 4)
inline void bn_relu_pool_backward_fused(const Net& n, const float* dp, const T* p, const uint8_t* arg, const float* c,
                                 const float4* coef, float4* bcoef, double* dsum, int gamma, int beta, float* dc,
                                 int B, int C, int H) {
  const int pooled_per_channel = B * (H / 2) * (H / 2);
  const int slices = std::max(1, std::min(kBnBackwardSlices, course::ceil_div(pooled_per_channel, 2048)));
  fused::bn_relu_pool_backward_reduce<<<dim3(slices, C), 256, 0, n.st>>>(dp, p, arg, c, coef, n.stat_part, B, C, H,
                                                                         H);
  CUDA_CHECK_LAUNCH();
  reduce_parts(n.stat_part, slices, 2 * C, dsum, n.st);
  fused::bn_backward_finalize<<<1, C, 0, n.st>>>(dsum, dsum + C, coef, C, B * H * H, bcoef, n.grad(gamma),
                                                 n.grad(beta));
  fused::bn_relu_pool_backward_apply<<<blocks(pooled_per_channel * C), 256, 0, n.st>>>(dp, p, arg, c, coef, bcoef, dc,
                                                                                      B, C, H, H);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:tc_step]
// Version 4. conv1 (one input channel: a GEMM with K = 9) stays on the CUDA cores, with its batch-norm
// statistics, in a kernel of its own (tc::conv1_forward); conv2 and fc1, forward and backward, are bf16 GEMMs on
// the tensor cores (layers_tc.cuh); fc2, the loss and fc2's backward are one small kernel, with fc1's
// bias and ReLU in front and fc1's ReLU mask and bias gradient behind.
inline void forward_tc(const Net& n, const Source& src, int B, float* loss_out, int cap) {
  gather_batch<<<blocks(B * 784), 256, 0, n.st>>>(src, B, n.x, n.y);
  CUDA_CHECK_LAUNCH();
  double* s = n.stats;
  // Nothing to zero: every sum across blocks (batch-norm statistics, split-K products, gradients) is
  // written, part by part, then added in a fixed order (reduce_parts).
  tc::conv1_forward(n.x, n.param(W1), n.c1, B, n.stat_part, s, n.sms, n.st);
  fused::bn_finalize<<<1, 32, 0, n.st>>>(s, s + 32, n.param(G1), n.param(BE1), 32, B * 784, n.coef1);
  fused::bn_relu_pool_forward<<<blocks(B * 32 * 196), 256, 0, n.st>>>(n.c1, n.coef1, n.p1_bf16, n.arg1, B, 32, 28,
                                                                      28);
  tc::conv_forward<14, 32, 64>(n.param_bf16(W2), n.p1_bf16, n.c2, B, n.stat_part, s + 64, n.sms, n.st);
  fused::bn_finalize<<<1, 64, 0, n.st>>>(s + 64, s + 128, n.param(G2), n.param(BE2), 64, B * 196, n.coef2);
  fused::bn_relu_pool_forward<<<blocks(B * 3136), 256, 0, n.st>>>(n.c2, n.coef2, n.p2_bf16, n.arg2, B, 64, 14, 14);
  tc::linear_forward(n.p2_bf16, n.param_bf16(W3), n.h_pre, n.fc1_part, B, 3136, 128, n.sms, n.st);
  tc::fc2_loss_and_backward<<<tc::fc2_loss_blocks(B), tc::kLossThreads, 0, n.st>>>(
      n.h_pre, n.param(B3), n.param(W4), n.param(B4), n.y, n.h, n.logits, n.dlogits, n.dh_pre, n.fc2_part, B,
      src.step, loss_out, cap, n.loss_part, n.loss_blocks_done);
  CUDA_CHECK_LAUNCH();
  // fc1's bias, fc2's weight and bias: adjacent in the gradient buffer, in the parts' layout.
  static_assert(offset_of(W4) == offset_of(B3) + 128 && offset_of(B4) == offset_of(W4) + 1280, "db3 | dW4 | db4");
  reduce_parts(n.fc2_part, tc::fc2_loss_blocks(B), tc::kFc2Grads, n.grad(B3), n.st);
}

inline void backward_tc(const Net& n, int B) {
  // fc2's backward ran with the loss (forward_tc). The weight gradients of fc1 and conv2 feed nothing but
  // SGD: they run on a second stream beside the chain of input gradients (a fork and a join in the
  // captured graph), so that at small batches, where one kernel leaves most SMs idle, they overlap.
  double* s = n.stats;
  CUDA_CHECK(cudaEventRecord(n.fork_fc1, n.st));
  CUDA_CHECK(cudaStreamWaitEvent(n.side, n.fork_fc1, 0));
  tc::linear_backward_weight(n.dh_pre, n.p2_bf16, n.grad(W3), n.fc1_wgrad_part, B, 3136, 128, n.sms, n.side);
  tc::linear_backward_data(n.dh_pre, n.param_bf16(W3), n.dp2, B, 3136, 128, n.st);
  bn_relu_pool_backward_fused(n, n.dp2, n.p2_bf16, n.arg2, n.c2, n.coef2, n.bcoef2, s + 256, G2, BE2, n.dc2, B, 64,
                              14);
  CUDA_CHECK(cudaEventRecord(n.fork_conv2, n.st));
  CUDA_CHECK(cudaStreamWaitEvent(n.side, n.fork_conv2, 0));
  tc::conv_backward_weight<14, 32, 64>(n.dc2, n.p1_bf16, n.grad(W2), n.wgrad_part, B, n.sms, n.side);
  tc::conv_backward_data<14, 32, 64>(n.param_bf16(W2), n.dc2, n.dp1, B, n.sms, n.st);
  bn_relu_pool_backward_fused(n, n.dp1, n.p1_bf16, n.arg1, n.c1, n.coef1, n.bcoef1, s + 192, G1, BE1, n.dc1, B, 32,
                              28);
  igemm::backward_weight(n.dc1, n.x, n.grad(W1), B, 1, 32, 28, 28, n.st, false, n.c1_wgrad_part);
  CUDA_CHECK(cudaEventRecord(n.join, n.side));  // SGD waits for the side stream
  CUDA_CHECK(cudaStreamWaitEvent(n.st, n.join, 0));
}
// --8<-- [end:tc_step]

// --8<-- [start:forward]
// Gathers the batch and runs the network forward, up to the loss (stored at loss_out[step % cap]).
inline void forward(const Net& n, Version v, const Source& src, int B, float* loss_out, int cap) {
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
inline void backward(const Net& n, Version v, int B) {
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
    bn_relu_pool_backward_fused(n, n.dp2, n.p2, n.arg2, n.c2, n.coef2, n.bcoef2, s + 256, G2, BE2, n.dc2, B, 64, 14);
  } else {
    bn_relu_pool_backward_unfused(n, n.dp2, n.arg2, n.dr2, n.a2, n.da2, n.c2, n.mean2, n.rstd2, G2, BE2, n.dc2, B, 64,
                                  14);
  }
  if (v == kNaive) {
    naive::conv3x3_backward_data<<<blocks(B * 32 * 196), 256, 0, n.st>>>(n.dc2, n.param(W2), n.dp1, B, 32, 64, 14,
                                                                         14);
    naive::conv3x3_backward_weight<<<64 * 32 * 9, 256, 0, n.st>>>(n.dc2, n.p1, n.grad(W2), B, 32, 64, 14, 14);
  } else {
    igemm::backward_data(n.dc2, n.param(W2), n.dp1, B, 32, 64, 14, 14, n.st, v == kTf32);
    igemm::backward_weight(n.dc2, n.p1, n.grad(W2), B, 32, 64, 14, 14, n.st, v == kTf32);
  }
  if (v >= kFused) {
    bn_relu_pool_backward_fused(n, n.dp1, n.p1, n.arg1, n.c1, n.coef1, n.bcoef1, s + 192, G1, BE1, n.dc1, B, 32, 28);
  } else {
    bn_relu_pool_backward_unfused(n, n.dp1, n.arg1, n.dr1, n.a1, n.da1, n.c1, n.mean1, n.rstd1, G1, BE1, n.dc1, B, 32,
                                  28);
  }
  if (v == kNaive) {
    naive::conv3x3_backward_weight<<<32 * 9, 256, 0, n.st>>>(n.dc1, n.x, n.grad(W1), B, 1, 32, 28, 28);
  } else {
    igemm::backward_weight(n.dc1, n.x, n.grad(W1), B, 1, 32, 28, 28, n.st, v == kTf32, n.c1_wgrad_part);
  }
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:backward]

// --8<-- [start:step]
// One training step: gather the batch, forward, backward, SGD (which also advances the step counter).
inline void train_step(const Net& n, Version v, const Source& src, int B, float lr) {
  forward(n, v, src, B, n.loss_hist, n.loss_cap);
  backward(n, v, B);
  if (v == kTc) {  // this step's learning rate (the schedule's, or the constant lr), then the fp32
                   // master weights and, in the same pass, their bf16 copy for the next step
    tc::next_learning_rate<<<1, 1, 0, n.st>>>(tc::LrSchedule{lr, n.lr_warmup_steps, n.lr_total_steps}, n.run_step,
                                              n.lr_now);
    tc::sgd_update_bf16<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, n.params_bf16, n.lr_now,
                                                                kTotalParams, n.step);
  } else {
    naive::sgd_update<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, lr, kTotalParams, n.step);
  }
  CUDA_CHECK_LAUNCH();
}

// Version 4's bf16 copy of weights that were uploaded or restored from fp32.
inline void refresh_bf16(const Net& n) {
  tc::to_bf16<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.params_bf16, kTotalParams);
  CUDA_CHECK_LAUNCH();
}

// The same step recorded once into a CUDA graph: replaying it launches all ~30 kernels, memsets
// and cuBLAS calls with one call, and their launch costs overlap on the GPU.
inline cudaGraphExec_t capture_step(const Net& n, Version v, const Source& src, int B, float lr) {
  // One eager step first, so that every kernel and cuBLAS routine is loaded before the capture;
  // the weights and the step counters are put back afterwards.
  CUDA_CHECK(
      cudaMemcpyAsync(n.params_backup, n.params, kTotalParams * sizeof(float), cudaMemcpyDeviceToDevice, n.st));
  CUDA_CHECK(cudaMemcpyAsync(n.step_backup, n.step, 2 * sizeof(int), cudaMemcpyDeviceToDevice, n.st));
  train_step(n, v, src, B, lr);
  CUDA_CHECK(
      cudaMemcpyAsync(n.params, n.params_backup, kTotalParams * sizeof(float), cudaMemcpyDeviceToDevice, n.st));
  CUDA_CHECK(cudaMemcpyAsync(n.step, n.step_backup, 2 * sizeof(int), cudaMemcpyDeviceToDevice, n.st));
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
