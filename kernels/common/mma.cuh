// mma.cuh: the warp-level bf16 tensor-core product mma.sync m16n8k16 (compute capability 8.0 and newer),
// used by the MNIST CNN's tensor-core layers, FlashAttention v2 and the W4A16 GEMV's tensor-core variant.
// Taught in docs/mnist/tensor-cores.md.
#pragma once

#include <cstdint>

namespace course {

// --8<-- [start:mma_bf16]
// d (16 x 8, fp32) += a (16 x 16, bf16, row-major) * b (16 x 8, bf16, column-major), one warp.
// Fragment layout (PTX ISA, "mma.m16n8k16"): with g = lane / 4 and t = lane % 4, a[0] holds
// A[g][2t..2t+1], a[1] A[g+8][2t..], a[2] A[g][2t+8..], a[3] A[g+8][2t+8..]; b0 holds
// B[2t..2t+1][g], b1 B[2t+8..][g]; d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1].
// Device code compiled for an older GPU gets a stub that traps: programs waive (or skip) their
// tensor-core kernels on such a GPU before launching them.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;
  __trap();
#endif
}
// --8<-- [end:mma_bf16]

}  // namespace course
