// Exercise (docs/serving/exercises.md): the residual add and the RMSNorm that follows it, fused into one
// kernel of one block per row, as docs/serving/fused-small.md teaches.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise add_rmsnorm
//
// course: compile-only
#include "add_rmsnorm_check.cuh"

// --8<-- [start:stub]
__global__ void add_rmsnorm(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ residual,
                            const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out, int hidden,
                            float eps) {
  const size_t row = blockIdx.x;  // one block per row; blockDim.x a multiple of 32, at most 1024
  // TODO (about 25 lines):
  //  1. each thread takes c = threadIdx.x, threadIdx.x + blockDim.x, ... below hidden: adds x and residual
  //     of row `row` in fp32 (__bfloat162float), stores the sum rounded to bf16 (__float2bfloat16) into
  //     residual, and adds the square of the STORED value to its own fp32 sum of squares;
  //  2. the block's sum of squares: each warp's by __shfl_xor_sync, then the warps' sums through
  //     __shared__ memory (__syncthreads() between), so that every thread has the total;
  //  3. inv_rms = rsqrtf(total / hidden + eps); every thread writes out = residual * inv_rms * weight
  //     (rounded to bf16) for its own columns.
  (void)row;
  (void)x;
  (void)residual;
  (void)weight;
  (void)out;
  (void)hidden;
  (void)eps;
}
// --8<-- [end:stub]
