// Solution to the add + RMSNorm exercise (docs/serving/exercises.md).
// Check it: python -m course.exercise add_rmsnorm --solution
//
// course: gpu
// course: run --seed 71
// course: run --seed 72
#include "../add_rmsnorm_check.cuh"

// --8<-- [start:solution]
__global__ void add_rmsnorm(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ residual,
                            const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out, int hidden,
                            float eps) {
  const size_t row = blockIdx.x;
  const __nv_bfloat16* x_row = x + row * hidden;
  __nv_bfloat16* res_row = residual + row * hidden;
  float squares = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const __nv_bfloat16 stored = __float2bfloat16(__bfloat162float(x_row[c]) + __bfloat162float(res_row[c]));
    res_row[c] = stored;
    const float r = __bfloat162float(stored);  // the norm sees the stored bf16 value
    squares = fmaf(r, r, squares);
  }
  __shared__ float warp_squares[32];
  for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  if (threadIdx.x % 32 == 0) warp_squares[threadIdx.x / 32] = squares;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += warp_squares[w];
  const float inv_rms = rsqrtf(total / hidden + eps);
  __nv_bfloat16* out_row = out + row * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)  // each thread reads back only what it wrote
    out_row[c] = __float2bfloat16(__bfloat162float(res_row[c]) * inv_rms * __bfloat162float(weight[c]));
}
// --8<-- [end:solution]
