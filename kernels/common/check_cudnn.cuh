// check_cudnn.cuh: CUDNN_CHECK, for cuDNN's C API (cudnnStatus_t), and the names of cuDNN's forward
// convolution algorithms.
// Taught in docs/libraries/cudnn.md. Programs that include it link -lcudnn (`course: libs cudnn`).
#pragma once

#include <cudnn.h>

#include "check.cuh"

// --8<-- [start:check]
// CUDNN_STATUS_BAD_PARAM (a descriptor that does not match the others, a null pointer),
// CUDNN_STATUS_NOT_SUPPORTED (no engine for this layout, type or configuration),
// CUDNN_STATUS_EXECUTION_FAILED (a kernel failed), and since cuDNN 9 finer codes such as
// CUDNN_STATUS_BAD_PARAM_NULL_POINTER. cudnnGetLastErrorString adds a sentence about the failure.
namespace course {
inline const char* cudnn_last_error(cudnnStatus_t) {  // read only on failure, just before the program stops
  static char detail[512];
  cudnnGetLastErrorString(detail, sizeof(detail));
  return detail;
}
}  // namespace course

#define CUDNN_CHECK(call)                                                                                     \
  course::library_check((call), CUDNN_STATUS_SUCCESS, "cuDNN", cudnnGetErrorString, course::cudnn_last_error, \
                        #call, __FILE__, __LINE__)
// --8<-- [end:check]

namespace course {
// A forward-convolution algorithm's name as cuDNN's enum spells it, without the prefix (for printed
// choices and BENCH rows).
inline const char* conv_fwd_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown";  // CUDNN_CONVOLUTION_FWD_ALGO_COUNT: not an algorithm
  }
}
}  // namespace course
