// layers_fused.cuh: version 3's fused kernels. Each one does in a single pass over memory what
// version 1 does in several kernels, each writing a full tensor that the next one reads back.
//
// Taught in docs/mnist/fused.md:
//   - the convolution's epilogue adds up batch-norm statistics (conv_igemm.cuh, STATS = true), and
//     bn_finalize turns them into each channel's scale and shift;
//   - bn_relu_pool_forward: normalise, ReLU and 2x2 max-pool in one pass;
//   - bn_relu_pool_backward_{reduce,apply}: the pooling, ReLU and batch-norm backward in two passes;
//   - bias_relu: the first linear layer's bias and ReLU after cuBLAS's matrix product;
//   - softmax_cross_entropy: bias, log-softmax, the loss and its gradient, one thread per row.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include "layers_naive.cuh"

namespace mnist {

// The pooled activations are float in version 3 and bf16 in version 4 (which only multiplies them on
// the tensor cores, in bf16 anyway): the kernels below read and write either through these.
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline void store_value(float* p, float v) { *p = v; }
__device__ inline void store_value(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

namespace fused {

// --8<-- [start:stats]
// Per channel, once per step: the batch-norm coefficients from the sums that the convolution's
// epilogue accumulated. The sums are double: E[x^2] - E[x]^2 in float would lose the variance to
// cancellation. coef[c] = {scale = gamma * rstd, shift = beta - scale * mean, mean, rstd}, so that
// y = scale * x + shift, and every later thread reads four floats instead of redoing this.
__global__ void bn_finalize(const double* __restrict__ sum, const double* __restrict__ sumsq,
                            const float* __restrict__ gamma, const float* __restrict__ beta, int C, int count,
                            float4* __restrict__ coef) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double mean = sum[c] / count;
  const double var = fmax(sumsq[c] / count - mean * mean, 0.0);
  const double rstd = 1.0 / sqrt(var + kBnEps);
  const double scale = gamma[c] * rstd;
  coef[c] = make_float4(static_cast<float>(scale), static_cast<float>(beta[c] - scale * mean),
                        static_cast<float>(mean), static_cast<float>(rstd));
}
// --8<-- [end:stats]

// --8<-- [start:forward]
// One thread per pooled output: normalise the 2x2 window, keep the largest, apply ReLU after the
// max (max and ReLU commute). Writes the pooled value and which of the four won.
template <typename T>
__global__ void bn_relu_pool_forward(const float* __restrict__ conv, const float4* __restrict__ coef,
                                     T* __restrict__ pooled, uint8_t* __restrict__ arg, int N, int C, int H,
                                     int W) {
  const int PH = H / 2, PW = W / 2;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C * PH * PW) return;
  const int px = i % PW, py = (i / PW) % PH, c = (i / (PH * PW)) % C, nc = i / (PH * PW);
  const float4 k = coef[c];
  const float* win = conv + (static_cast<size_t>(nc) * H + 2 * py) * W + 2 * px;
  const float v[4] = {win[0], win[1], win[W], win[W + 1]};
  float best = k.x * v[0] + k.y;
  int which = 0;
  for (int t = 1; t < 4; ++t) {
    const float y = k.x * v[t] + k.y;
    if (y > best) {
      best = y;
      which = t;
    }
  }
  store_value(&pooled[i], fmaxf(best, 0.0f));
  arg[i] = static_cast<uint8_t>(which);
}
// --8<-- [end:forward]

// --8<-- [start:backward]
// Pass 1: per channel, sum(dy) and sum(dy * xhat), where dy, the gradient at the batch norm's
// output, is the pooled gradient at each window's winner (if the ReLU let it through) and 0
// elsewhere: only a quarter of the positions contribute. Grid: (slices, C). Each block writes its
// two sums to part[slice][c] and part[slice][C + c]; reduce_parts adds the slices in a fixed order.
template <typename T>
__global__ void bn_relu_pool_backward_reduce(const float* __restrict__ dpooled, const T* __restrict__ pooled,
                                             const uint8_t* __restrict__ arg, const float* __restrict__ conv,
                                             const float4* __restrict__ coef, double* __restrict__ part, int N,
                                             int C, int H, int W) {
  const int c = blockIdx.y, PW = W / 2, PHW = (H / 2) * PW;
  const float mean = coef[c].z, rstd = coef[c].w;
  float sg = 0.0f, sgx = 0.0f;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < N * PHW; j += gridDim.x * blockDim.x) {
    const int n = j / PHW, pp = j % PHW;
    const size_t at = (static_cast<size_t>(n) * C + c) * PHW + pp;
    if (to_float(pooled[at]) > 0.0f) {
      const int a = arg[at], y = 2 * (pp / PW) + a / 2, x = 2 * (pp % PW) + a % 2;
      const float xhat = (conv[(static_cast<size_t>(n) * C + c) * H * W + y * W + x] - mean) * rstd;
      sg += dpooled[at];
      sgx += dpooled[at] * xhat;
    }
  }
  sg = block_sum(sg);
  sgx = block_sum(sgx);
  if (threadIdx.x == 0) {
    part[static_cast<size_t>(blockIdx.x) * 2 * C + c] = sg;
    part[static_cast<size_t>(blockIdx.x) * 2 * C + C + c] = sgx;
  }
}

// Per channel: dgamma = sum(dy * xhat), dbeta = sum(dy), and the three numbers pass 2 needs:
// bcoef[c] = {gamma * rstd, mean(dy), mean(dy * xhat)}.
__global__ void bn_backward_finalize(const double* __restrict__ dsum, const double* __restrict__ dsumx,
                                     const float4* __restrict__ coef, int C, int count, float4* __restrict__ bcoef,
                                     float* __restrict__ dgamma, float* __restrict__ dbeta) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  dgamma[c] = static_cast<float>(dsumx[c]);
  dbeta[c] = static_cast<float>(dsum[c]);
  bcoef[c] = make_float4(coef[c].x, static_cast<float>(dsum[c] / count), static_cast<float>(dsumx[c] / count), 0.0f);
}

// Pass 2: dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)) for every element. One thread
// per 2x2 window, as in the forward: it reads the window's pooled gradient, winner and ReLU once and
// writes the four elements, two rows of two adjacent floats (dy is the pooled gradient at the winner
// and 0 at the other three). One thread per element would repeat those reads and the index divisions
// four times, which made this pass bound by integer arithmetic rather than by memory.
template <typename T>
__global__ void bn_relu_pool_backward_apply(const float* __restrict__ dpooled, const T* __restrict__ pooled,
                                            const uint8_t* __restrict__ arg, const float* __restrict__ conv,
                                            const float4* __restrict__ coef, const float4* __restrict__ bcoef,
                                            float* __restrict__ dconv, int N, int C, int H, int W) {
  const int PH = H / 2, PW = W / 2;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C * PH * PW) return;
  const int px = i % PW, py = (i / PW) % PH, c = (i / (PH * PW)) % C, nc = i / (PH * PW);
  const float g = to_float(pooled[i]) > 0.0f ? dpooled[i] : 0.0f;
  const int winner = arg[i];
  const float4 k = coef[c], b = bcoef[c];
  const size_t top = (static_cast<size_t>(nc) * H + 2 * py) * W + 2 * px;  // even: W is even
  for (int row = 0; row < 2; ++row) {
    const size_t at = top + row * W;
    const float2 v = *reinterpret_cast<const float2*>(conv + at);
    const float dy0 = winner == 2 * row ? g : 0.0f, dy1 = winner == 2 * row + 1 ? g : 0.0f;
    *reinterpret_cast<float2*>(dconv + at) = make_float2(b.x * (dy0 - b.y - (v.x - k.z) * k.w * b.z),
                                                         b.x * (dy1 - b.y - (v.y - k.z) * k.w * b.z));
  }
}
// --8<-- [end:backward]

// --8<-- [start:linear_loss]
// h = max(h + b, 0) in place, after cuBLAS computed h = x W^T.
__global__ void bias_relu(float* __restrict__ h, const float* __restrict__ b, int N, int O) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N * O) h[i] = fmaxf(h[i] + b[i % O], 0.0f);
}

// One block; one thread per row: logits += bias, loss = logsumexp - logit[label],
// dlogits = (softmax - onehot) / N, and the batch's mean loss at loss_hist[step % cap].
__global__ void softmax_cross_entropy(float* __restrict__ logits, const float* __restrict__ bias,
                                      const int* __restrict__ labels, float* __restrict__ dlogits, int N,
                                      const int* __restrict__ step, float* __restrict__ loss_hist, int cap) {
  float total = 0.0f;
  for (int n = threadIdx.x; n < N; n += blockDim.x) {
    float z[10], m = -INFINITY;
    for (int k = 0; k < 10; ++k) {
      z[k] = logits[n * 10 + k] + bias[k];
      logits[n * 10 + k] = z[k];
      m = fmaxf(m, z[k]);
    }
    float s = 0.0f;
    for (int k = 0; k < 10; ++k) s += expf(z[k] - m);
    const int label = labels[n];
    total += logf(s) + m - z[label];
    for (int k = 0; k < 10; ++k) dlogits[n * 10 + k] = (expf(z[k] - m) / s - (k == label ? 1.0f : 0.0f)) / N;
  }
  total = block_sum(total);
  if (threadIdx.x == 0) loss_hist[*step % cap] = total / N;
}
// --8<-- [end:linear_loss]

}  // namespace fused
}  // namespace mnist
