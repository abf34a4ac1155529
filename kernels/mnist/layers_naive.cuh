// layers_naive.cuh: version 1 of the MNIST CNN: one plain kernel per layer and direction, one
// thread per output value (or one block per reduced value). Correct first, fast later.
//
// Taught in docs/mnist/naive.md. Layouts are PyTorch's: activations NCHW, conv weights
// [out][in][3][3], linear weights [out][in]. Included by mnist_model.cuh.
//
// course: header
#pragma once

#include <cstdint>

#include "../common/check.cuh"

namespace mnist {

constexpr float kPixelMean = 0.1307f, kPixelStd = 0.3081f, kBnEps = 1e-5f;

// Where a batch comes from: the uint8 images and labels in device memory, a permutation of their
// indices, and a device-side step counter (so a captured CUDA graph takes a new batch each replay).
struct Source {
  const uint8_t* images;
  const uint8_t* labels;
  const int* perm;
  const int* step;
  int steps_per_epoch;
};

// --8<-- [start:gather]
// x[b][p] = (pixel / 255 - mean) / std of image perm[s * batch + b], s = the step within the epoch.
__global__ void gather_batch(Source src, int batch, float* __restrict__ x, int* __restrict__ y) {
  const int* rows = src.perm + static_cast<size_t>(*src.step % src.steps_per_epoch) * batch;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < batch * 784) {
    const int b = i / 784, p = i % 784;
    x[i] = (static_cast<float>(src.images[static_cast<size_t>(rows[b]) * 784 + p]) / 255.0f - kPixelMean) / kPixelStd;
  }
  if (i < batch) y[i] = src.labels[rows[i]];
}
// --8<-- [end:gather]

// Sum of v over the block; every thread gets the total. blockDim.x must be a multiple of 32.
__device__ inline float block_sum(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // a previous call may still be reading part[]
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? part[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncwarp();
    if (lane == 0) part[0] = v;
  }
  __syncthreads();
  return part[0];
}

// --8<-- [start:sum_parts]
// A deterministic reduction across blocks: each block writes its partial sums to part[block][count]
// (plain stores), and out[i] = part[0][i] + part[1][i] + ... + part[parts - 1][i], always grouped
// the same way, so a run gives the same bits every time (float atomics add in whatever order the
// blocks finish, and float addition is not associative). A block is 32 outputs x 8 groups of parts:
// group g adds parts g, g + 8, g + 16, ... in order, then group 0 adds the 8 group sums in order.
constexpr int kPartsThreads = 256;
template <typename T>
__global__ void __launch_bounds__(kPartsThreads)
    sum_parts(const T* __restrict__ part, T* __restrict__ out, int count, int parts) {
  __shared__ T group_sum[kPartsThreads / 32][32];
  const int lane = threadIdx.x & 31, group = threadIdx.x >> 5, i = blockIdx.x * 32 + lane;
  T s = 0;
  if (i < count)
    for (int p = group; p < parts; p += kPartsThreads / 32) s += part[static_cast<size_t>(p) * count + i];
  group_sum[group][lane] = s;
  __syncthreads();
  if (group == 0 && i < count) {
    T t = group_sum[0][lane];
    for (int g = 1; g < kPartsThreads / 32; ++g) t += group_sum[g][lane];
    out[i] = t;
  }
}

// out (count values, written, not added to) from parts x count partial sums.
template <typename T>
inline void reduce_parts(const T* part, int parts, int count, T* out, cudaStream_t st) {
  sum_parts<T><<<course::ceil_div(count, 32), kPartsThreads, 0, st>>>(part, out, count, parts);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:sum_parts]

namespace naive {

// --8<-- [start:conv_forward]
// out[n][k][y][x] = sum over c, r, s of in[n][c][y+r-1][x+s-1] * w[k][c][r][s] (zero padding 1).
__global__ void conv3x3_forward(const float* __restrict__ in, const float* __restrict__ w, float* __restrict__ out,
                                int N, int C, int K, int H, int W) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * K * H * W) return;
  const int x = i % W, y = (i / W) % H, k = (i / (H * W)) % K, n = i / (H * W * K);
  float acc = 0.0f;
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s) {
        const int iy = y + r - 1, ix = x + s - 1;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W)
          acc += in[((n * C + c) * H + iy) * W + ix] * w[((k * C + c) * 3 + r) * 3 + s];
      }
  out[i] = acc;
}
// --8<-- [end:conv_forward]

// --8<-- [start:conv_backward]
// Input gradient: din[n][c][y][x] = sum over k, r, s of dout[n][k][y-r+1][x-s+1] * w[k][c][r][s].
__global__ void conv3x3_backward_data(const float* __restrict__ dout, const float* __restrict__ w,
                                      float* __restrict__ din, int N, int C, int K, int H, int W) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C * H * W) return;
  const int x = i % W, y = (i / W) % H, c = (i / (H * W)) % C, n = i / (H * W * C);
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s) {
        const int oy = y - r + 1, ox = x - s + 1;
        if (oy >= 0 && oy < H && ox >= 0 && ox < W)
          acc += dout[((n * K + k) * H + oy) * W + ox] * w[((k * C + c) * 3 + r) * 3 + s];
      }
  din[i] = acc;
}

// Weight gradient: dw[k][c][r][s] = sum over n, y, x of dout[n][k][y][x] * in[n][c][y+r-1][x+s-1].
// One block per weight: its threads split the N*H*W products and add them up.
__global__ void conv3x3_backward_weight(const float* __restrict__ dout, const float* __restrict__ in,
                                        float* __restrict__ dw, int N, int C, int K, int H, int W) {
  const int wi = blockIdx.x;  // = ((k * C + c) * 3 + r) * 3 + s
  const int s = wi % 3, r = (wi / 3) % 3, c = (wi / 9) % C, k = wi / (9 * C);
  float acc = 0.0f;
  for (int j = threadIdx.x; j < N * H * W; j += blockDim.x) {
    const int x = j % W, y = (j / W) % H, n = j / (H * W);
    const int iy = y + r - 1, ix = x + s - 1;
    if (iy >= 0 && iy < H && ix >= 0 && ix < W)
      acc += dout[((n * K + k) * H + y) * W + x] * in[((n * C + c) * H + iy) * W + ix];
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) dw[wi] = acc;
}
// --8<-- [end:conv_backward]

// --8<-- [start:batchnorm]
// Batch statistics of channel c over N, H, W (one block per channel, two passes for accuracy):
// mean, and rstd = 1 / sqrt(biased variance + eps), as PyTorch normalises in training.
__global__ void batchnorm_stats(const float* __restrict__ in, float* __restrict__ mean, float* __restrict__ rstd,
                                int N, int C, int HW) {
  const int c = blockIdx.x, count = N * HW;
  float s = 0.0f;
  for (int j = threadIdx.x; j < count; j += blockDim.x) s += in[(j / HW * C + c) * HW + j % HW];
  const float m = block_sum(s) / count;
  float v = 0.0f;
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const float d = in[(j / HW * C + c) * HW + j % HW] - m;
    v += d * d;
  }
  const float var = block_sum(v) / count;
  if (threadIdx.x == 0) {
    mean[c] = m;
    rstd[c] = 1.0f / sqrtf(var + kBnEps);
  }
}

// y = gamma * (x - mean) * rstd + beta
__global__ void batchnorm_apply(const float* __restrict__ in, const float* __restrict__ mean,
                                const float* __restrict__ rstd, const float* __restrict__ gamma,
                                const float* __restrict__ beta, float* __restrict__ out, int N, int C, int HW) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C * HW) return;
  const int c = (i / HW) % C;
  out[i] = gamma[c] * (in[i] - mean[c]) * rstd[c] + beta[c];
}

// dgamma[c] = sum dy * xhat, dbeta[c] = sum dy (one block per channel).
__global__ void batchnorm_backward_reduce(const float* __restrict__ dy, const float* __restrict__ in,
                                          const float* __restrict__ mean, const float* __restrict__ rstd,
                                          float* __restrict__ dgamma, float* __restrict__ dbeta, int N, int C,
                                          int HW) {
  const int c = blockIdx.x, count = N * HW;
  float sg = 0.0f, sgx = 0.0f;
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const int i = (j / HW * C + c) * HW + j % HW;
    sg += dy[i];
    sgx += dy[i] * (in[i] - mean[c]) * rstd[c];
  }
  sg = block_sum(sg);
  sgx = block_sum(sgx);
  if (threadIdx.x == 0) {
    dgamma[c] = sgx;
    dbeta[c] = sg;
  }
}

// dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)), the means over the channel's N*H*W.
__global__ void batchnorm_backward_apply(const float* __restrict__ dy, const float* __restrict__ in,
                                         const float* __restrict__ mean, const float* __restrict__ rstd,
                                         const float* __restrict__ gamma, const float* __restrict__ dgamma,
                                         const float* __restrict__ dbeta, float* __restrict__ dx, int N, int C,
                                         int HW) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C * HW) return;
  const int c = (i / HW) % C;
  const float count = static_cast<float>(N * HW);
  const float xhat = (in[i] - mean[c]) * rstd[c];
  dx[i] = gamma[c] * rstd[c] * (dy[i] - dbeta[c] / count - xhat * dgamma[c] / count);
}
// --8<-- [end:batchnorm]

// --8<-- [start:relu_pool]
__global__ void relu_forward(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(in[i], 0.0f);
}

// The gradient passes where the ReLU's input was positive (PyTorch's convention at exactly 0: 0).
__global__ void relu_backward(const float* __restrict__ dy, const float* __restrict__ in, float* __restrict__ dx,
                              int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = in[i] > 0.0f ? dy[i] : 0.0f;
}

// 2x2 max pooling, stride 2 (H and W even). Remembers which of the four won (0..3, first on ties).
__global__ void maxpool_forward(const float* __restrict__ in, float* __restrict__ out, uint8_t* __restrict__ arg,
                                int NC, int H, int W) {
  const int PH = H / 2, PW = W / 2;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= NC * PH * PW) return;
  const int px = i % PW, py = (i / PW) % PH, nc = i / (PH * PW);
  const float* win = in + (static_cast<size_t>(nc) * H + 2 * py) * W + 2 * px;
  float best = win[0];
  int which = 0;
  const float v[3] = {win[1], win[W], win[W + 1]};
  for (int t = 0; t < 3; ++t)
    if (v[t] > best) {
      best = v[t];
      which = t + 1;
    }
  out[i] = best;
  arg[i] = static_cast<uint8_t>(which);
}

// Each input element takes its window's gradient if it was the winner, else 0.
__global__ void maxpool_backward(const float* __restrict__ dout, const uint8_t* __restrict__ arg,
                                 float* __restrict__ din, int NC, int H, int W) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= NC * H * W) return;
  const int x = i % W, y = (i / W) % H, nc = i / (H * W);
  const int pooled = (nc * (H / 2) + y / 2) * (W / 2) + x / 2;
  din[i] = arg[pooled] == (y & 1) * 2 + (x & 1) ? dout[pooled] : 0.0f;
}
// --8<-- [end:relu_pool]

// --8<-- [start:linear]
// y[n][o] = b[o] + sum_i x[n][i] * w[o][i]
__global__ void linear_forward(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, int N, int I, int O) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N * O) return;
  const int o = t % O, n = t / O;
  float acc = b[o];
  for (int i = 0; i < I; ++i) acc += x[n * I + i] * w[o * I + i];
  y[t] = acc;
}

// dx[n][i] = sum_o dy[n][o] * w[o][i]
__global__ void linear_backward_data(const float* __restrict__ dy, const float* __restrict__ w,
                                     float* __restrict__ dx, int N, int I, int O) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N * I) return;
  const int i = t % I, n = t / I;
  float acc = 0.0f;
  for (int o = 0; o < O; ++o) acc += dy[n * O + o] * w[o * I + i];
  dx[t] = acc;
}

// dw[o][i] = sum_n dy[n][o] * x[n][i]; db[o] = sum_n dy[n][o]
__global__ void linear_backward_weight(const float* __restrict__ dy, const float* __restrict__ x,
                                       float* __restrict__ dw, float* __restrict__ db, int N, int I, int O) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= O * I) return;
  const int i = t % I, o = t / I;
  float acc = 0.0f;
  for (int n = 0; n < N; ++n) acc += dy[n * O + o] * x[n * I + i];
  dw[t] = acc;
  if (i == 0) {
    float sb = 0.0f;
    for (int n = 0; n < N; ++n) sb += dy[n * O + o];
    db[o] = sb;
  }
}
// --8<-- [end:linear]

// --8<-- [start:loss]
// Softmax of each row of 10 logits.
__global__ void softmax_rows(const float* __restrict__ logits, float* __restrict__ probs, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float* z = logits + n * 10;
  float m = z[0];
  for (int k = 1; k < 10; ++k) m = fmaxf(m, z[k]);
  float sum = 0.0f;
  for (int k = 0; k < 10; ++k) sum += expf(z[k] - m);
  for (int k = 0; k < 10; ++k) probs[n * 10 + k] = expf(z[k] - m) / sum;
}

// Mean cross-entropy -log p[label] over the batch (one block), stored at loss_hist[step % cap].
__global__ void cross_entropy_loss(const float* __restrict__ probs, const int* __restrict__ labels, int N,
                                   const int* __restrict__ step, float* __restrict__ loss_hist, int cap) {
  float s = 0.0f;
  for (int n = threadIdx.x; n < N; n += blockDim.x) s -= logf(probs[n * 10 + labels[n]]);
  s = block_sum(s);
  if (threadIdx.x == 0) loss_hist[*step % cap] = s / N;
}

// d(mean loss)/d logits = (p - onehot(label)) / N
__global__ void cross_entropy_backward(const float* __restrict__ probs, const int* __restrict__ labels,
                                       float* __restrict__ dlogits, int N) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N * 10) return;
  const int n = t / 10, k = t % 10;
  dlogits[t] = (probs[t] - (k == labels[n] ? 1.0f : 0.0f)) / N;
}
// --8<-- [end:loss]

// --8<-- [start:sgd]
// Plain SGD over all parameters at once (they live in one buffer, their gradients in another).
// The first thread also advances the step counter that the next step's gather reads.
__global__ void sgd_update(float* __restrict__ params, const float* __restrict__ grads, float lr, int n,
                           int* __restrict__ step) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) params[i] -= lr * grads[i];
  if (i == 0) *step += 1;
}
// --8<-- [end:sgd]

}  // namespace naive
}  // namespace mnist
