// check_cudnn.cuh: CUDNN_CHECK, for cuDNN's C API (cudnnStatus_t).
// Taught in docs/libraries/cudnn.md. Programs that include it link -lcudnn (`course: libs cudnn`).
#pragma once

#include <cudnn.h>

#include "course.cuh"

// --8<-- [start:check]
// CUDNN_STATUS_BAD_PARAM (a descriptor that does not match the others, a null pointer),
// CUDNN_STATUS_NOT_SUPPORTED (no engine for this layout, type or configuration),
// CUDNN_STATUS_EXECUTION_FAILED (a kernel failed), and since cuDNN 9 finer codes such as
// CUDNN_STATUS_BAD_PARAM_NULL_POINTER. cudnnGetLastErrorString adds a sentence about the failure.
namespace course {
[[noreturn]] inline void cudnn_fail(cudnnStatus_t st, const char* expr, const char* file, int line) {
  char detail[512];
  cudnnGetLastErrorString(detail, sizeof(detail));
  library_fail("cuDNN", cudnnGetErrorString(st), detail, expr, file, line);
}
}  // namespace course

#define CUDNN_CHECK(call)                                                            \
  do {                                                                               \
    const cudnnStatus_t course_st_ = (call);                                         \
    if (course_st_ != CUDNN_STATUS_SUCCESS)                                          \
      course::cudnn_fail(course_st_, #call, __FILE__, __LINE__);                     \
  } while (0)
// --8<-- [end:check]
