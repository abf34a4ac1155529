// check_cublas.cuh: CUBLAS_CHECK, for cuBLAS and cuBLASLt calls (both return cublasStatus_t).
// Taught in docs/libraries/cublas.md. Programs that include it link -lcublas (`course: libs cublas`).
#pragma once

#include <cublas_v2.h>

#include "course.cuh"

// --8<-- [start:check]
// The status name says what went wrong: CUBLAS_STATUS_NOT_INITIALIZED (no handle),
// CUBLAS_STATUS_INVALID_VALUE (a bad size, leading dimension or enum), CUBLAS_STATUS_NOT_SUPPORTED
// (this type combination has no kernel), CUBLAS_STATUS_EXECUTION_FAILED (a kernel failed to run).
#define CUBLAS_CHECK(call)                                                                       \
  do {                                                                                           \
    const cublasStatus_t course_st_ = (call);                                                    \
    if (course_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      course::library_fail("cuBLAS", cublasGetStatusName(course_st_), cublasGetStatusString(course_st_), \
                           #call, __FILE__, __LINE__);                                           \
  } while (0)
// --8<-- [end:check]
