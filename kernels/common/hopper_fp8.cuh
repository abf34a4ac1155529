// hopper_fp8.cuh: the FP8 (e4m3) pieces of a Hopper GEMM, beside hopper.cuh's bf16 ones (which it reuses
// unchanged: mbarriers, TMA, setmaxnreg, the wgmma fences and the 128-byte-swizzle descriptor).
//
// Taught in docs/serving/fp8-gemm.md; included by kernels/serving/fp8_gemm.cu.
//   device (namespace course::hopper, compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined):
//     smem_desc_fp8               wgmma descriptor of a K-major, 128-byte-swizzled e4m3 tile
//     wgmma_64x128x32_e4m3        D (64 x 128, fp32) (+)= A (64 x 32, e4m3) * B (128 x 32, e4m3)^T
//   host:
//     make_kmajor_map_fp8         the e4m3 K-major operand map (boxes of rows x 128 bytes)
//
// course: header
#pragma once

#include <cstdint>

#include "hopper.cuh"

namespace course::hopper {

// 128 e4m3 values = 128 bytes: one row of a 128-byte-swizzled tile, so a k-tile is 128 deep (bf16: 64).
constexpr int kSwizzleElemsFp8 = 128;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// --8<-- [start:descriptor]
// The descriptor depends only on bytes: a row of the swizzled tile is 128 bytes whatever it holds, 8 rows
// make a 1 KiB swizzle atom, so hopper.cuh's bf16 descriptor describes an e4m3 tile as it is. Stepping 32
// e4m3 values along K (one k32 instruction) adds 32 bytes to the start address, as 16 bf16 values did.
__device__ __forceinline__ uint64_t smem_desc_fp8(const uint8_t* tile) {
  return smem_desc(reinterpret_cast<const __nv_bfloat16*>(tile));
}
// --8<-- [end:descriptor]

// --8<-- [start:wgmma]
// D (64 x 128, fp32: 64 registers per thread, the same fragment layout as the bf16 instruction's) = A (64 x
// 32) * B (128 x 32)^T, + D when `accumulate` (scale-d). Both operands e4m3 from shared memory, K-major: an
// 8-bit wgmma has no transpose immediates (the operands after scale-d are imm-scale-a and imm-scale-b, 1 =
// not negated), so both tiles must be stored with K contiguous.
__device__ __forceinline__ void wgmma_64x128x32_e4m3(float* d, uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      HOPPER_REGS_0_63
      "}, %64, %65, p, 1, 1;\n"
      "}\n"
      : HOPPER_ACC64(d, 0)
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}
// --8<-- [end:wgmma]
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// A GEMM operand: a row-major rows x K matrix of e4m3 bytes, copied in boxes of box_rows x 128 (TMA knows
// no fp8 type: it moves bytes, UINT8). K must be a multiple of 16: TMA's row stride is a multiple of 16 bytes.
inline CUtensorMap make_kmajor_map_fp8(const uint8_t* ptr, int rows, int K, int box_rows) {
  return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, ptr, rows, K, box_rows, kSwizzleElemsFp8,
                            CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace course::hopper
