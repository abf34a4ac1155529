// layers_tc_around.cuh: version 4's fp32 kernels around the tensor-core products (layers_tc.cuh):
// fc2 with the loss and fc2's backward in one kernel, SGD that also writes the bf16 weight copy, and
// the bf16 copy of uploaded weights.
//
// Taught in docs/mnist/tensor-cores.md. Included by layers_tc.cuh, so that whoever includes that file
// has the whole of version 4.
//
// course: header
#pragma once

#include <cuda_bf16.h>

#include <algorithm>

#include "layers_fused.cuh"

namespace mnist {
namespace tc {
// --8<-- [start:around]
// fc2 forward and backward, with fc1's bias and ReLU in front and fc1's ReLU mask behind, one warp
// per row: h = relu(h_pre + b3), logits = h W4^T + b4, dlogits = (softmax - onehot) / N, the batch's
// mean loss at loss_hist[step % cap]; then, while the row is still in registers, fc2's backward:
// dh_pre = (dlogits W4) where h > 0, else 0, and the block's share of the gradients db3 = sum dh_pre,
// dW4 = dlogits^T h, db4 = sum dlogits: its warps add theirs in shared memory one warp after the
// other, and the block writes them to grad_part[block] = {db3 128 | dW4 1280 | db4 10}, the layout
// of those gradients in the parameter buffer; reduce_parts adds the blocks in a fixed order.
// Tiny (10 x 128 per row), so on the CUDA cores, W4 in shared memory. Several blocks share the rows;
// each writes its partial loss, and the last block to finish (a counter in global memory, reset by
// that block) adds them up in a fixed order: the loss is the same from run to run.
// Grid: fc2_loss_blocks(N) blocks of kLossThreads threads.
constexpr int kLossBlocks = 128, kLossThreads = 256;
constexpr int kFc2Grads = 128 + 1280 + 10;  // db3, dW4, db4: one part per block
inline int fc2_loss_blocks(int N) { return std::min(kLossBlocks, (N + kLossThreads / 32 - 1) / (kLossThreads / 32)); }

__global__ void __launch_bounds__(kLossThreads)
    fc2_loss_and_backward(const float* __restrict__ h_pre, const float* __restrict__ b3, const float* __restrict__ w4,
                          const float* __restrict__ b4, const int* __restrict__ labels, float* __restrict__ h,
                          float* __restrict__ logits, float* __restrict__ dlogits, float* __restrict__ dh_pre,
                          float* __restrict__ grad_part, int N,
                          const int* __restrict__ step, float* __restrict__ loss_hist, int cap,
                          float* __restrict__ loss_part, unsigned* __restrict__ blocks_done) {
  __shared__ float w[10][128];
  __shared__ float bias3[128];
  __shared__ float sum_dw4[10][128], sum_db3[128], sum_db4[10];  // this block's share of the gradients
  __shared__ bool last;
  for (int i = threadIdx.x; i < 1280; i += blockDim.x) {
    w[i / 128][i % 128] = w4[i];
    sum_dw4[i / 128][i % 128] = 0.0f;
  }
  for (int i = threadIdx.x; i < 128; i += blockDim.x) {
    bias3[i] = b3[i];
    sum_db3[i] = 0.0f;
    if (i < 10) sum_db4[i] = 0.0f;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  float total = 0.0f, gw[10][4] = {}, gb3[4] = {}, gb4 = 0.0f;
  for (int n = blockIdx.x * warps + threadIdx.x / 32; n < N; n += gridDim.x * warps) {
    float hv[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = lane + 32 * u;
      hv[u] = fmaxf(h_pre[n * 128 + i] + bias3[i], 0.0f);
      h[n * 128 + i] = hv[u];
    }
    float z[10], m = -INFINITY, mine = 0.0f;
#pragma unroll
    for (int k = 0; k < 10; ++k) {
      float p = 0.0f;
#pragma unroll
      for (int u = 0; u < 4; ++u) p += hv[u] * w[k][lane + 32 * u];
      for (int o = 16; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
      z[k] = p + b4[k];
      m = fmaxf(m, z[k]);
      if (k == lane) mine = z[k];
    }
    float s = 0.0f, zl = 0.0f;
    const int label = labels[n];
#pragma unroll
    for (int k = 0; k < 10; ++k) {
      s += expf(z[k] - m);
      zl = k == label ? z[k] : zl;
    }
    if (lane == 0) total += logf(s) + m - zl;
    const float dl_mine = lane < 10 ? (expf(mine - m) / s - (lane == label ? 1.0f : 0.0f)) / N : 0.0f;
    if (lane < 10) {
      logits[n * 10 + lane] = mine;
      dlogits[n * 10 + lane] = dl_mine;
      gb4 += dl_mine;
    }
    float dl[10];
#pragma unroll
    for (int k = 0; k < 10; ++k) dl[k] = __shfl_sync(0xffffffffu, dl_mine, k);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float d = 0.0f;
#pragma unroll
      for (int k = 0; k < 10; ++k) {
        d += dl[k] * w[k][lane + 32 * u];
        gw[k][u] += dl[k] * hv[u];
      }
      d = hv[u] > 0.0f ? d : 0.0f;  // fc1's ReLU: the gradient passes where its output was positive
      dh_pre[n * 128 + lane + 32 * u] = d;
      gb3[u] += d;
    }
  }
  // The block's gradient sums: warp 0 adds its sums in shared memory, then warp 1, ... (a fixed
  // order, no atomics: within a warp every lane owns different elements).
  for (int turn = 0; turn < warps; ++turn) {
    if (threadIdx.x / 32 == turn) {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
#pragma unroll
        for (int k = 0; k < 10; ++k) sum_dw4[k][lane + 32 * u] += gw[k][u];
        sum_db3[lane + 32 * u] += gb3[u];
      }
      if (lane < 10) sum_db4[lane] += gb4;
    }
    __syncthreads();
  }
  total = block_sum(total);
  float* part = grad_part + static_cast<size_t>(blockIdx.x) * kFc2Grads;
  for (int i = threadIdx.x; i < kFc2Grads; i += blockDim.x)
    part[i] = i < 128 ? sum_db3[i] : i < 1408 ? sum_dw4[(i - 128) / 128][(i - 128) % 128] : sum_db4[i - 1408];
  if (threadIdx.x == 0) {
    loss_part[blockIdx.x] = total;
    __threadfence();  // the partial is visible to every block before the counter says so
    last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {  // block-uniform
    float t = 0.0f;
    for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) t += __ldcg(&loss_part[b]);
    t = block_sum(t);
    if (threadIdx.x == 0) {
      loss_hist[*step % cap] = t / N;
      *blocks_done = 0;  // ready for the next launch (the next graph replay)
    }
  }
}

// --8<-- [start:schedule]
// The learning rate of step t (from 0) of a run of total_steps: a linear warm-up over warmup_steps,
// then half a cosine from peak down to 0 at the run's end; total_steps = 0 means the constant peak.
// mnist_torch.py's lr_at is the same function, so both sides train with the same recipe.
struct LrSchedule {
  float peak;
  int warmup_steps, total_steps;
  __host__ __device__ float at(int t) const {
    if (total_steps <= 0) return peak;
    if (t < warmup_steps) return peak * static_cast<float>(t + 1) / static_cast<float>(warmup_steps);
    const int decay = total_steps - warmup_steps;
    const float progress = decay > 0 ? fminf(1.0f, static_cast<float>(t - warmup_steps) / decay) : 1.0f;
    return 0.5f * peak * (1.0f + cosf(3.14159265f * progress));
  }
};

// One thread, before SGD: this step's learning rate into *lr, and the run's step counter on by one
// (a kernel of its own, so that no thread of the SGD kernel reads the counter while another moves it).
__global__ void next_learning_rate(LrSchedule schedule, int* __restrict__ run_step, float* __restrict__ lr) {
  *lr = schedule.at(*run_step);
  *run_step += 1;
}
// --8<-- [end:schedule]

// SGD on the fp32 master weights, and their bf16 copy for the next step's tensor-core products, in
// one pass, with the learning rate that next_learning_rate wrote. The first thread also advances the
// step counter (as naive::sgd_update does).
__global__ void sgd_update_bf16(float* __restrict__ params, const float* __restrict__ grads,
                                __nv_bfloat16* __restrict__ params_bf16, const float* __restrict__ lr, int n,
                                int* __restrict__ step) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float p = params[i] - *lr * grads[i];
    params[i] = p;
    params_bf16[i] = __float2bfloat16_rn(p);
  }
  if (i == 0) *step += 1;
}

// The bf16 copy of weights that were uploaded or restored (the first step of a run needs it too).
__global__ void to_bf16(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}
// --8<-- [end:around]

}  // namespace tc
}  // namespace mnist
