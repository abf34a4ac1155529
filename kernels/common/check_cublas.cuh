// check_cublas.cuh: CUBLAS_CHECK, for cuBLAS and cuBLASLt calls (both return cublasStatus_t).
// Taught in docs/libraries/cublas.md. Programs that include it link -lcublas (`course: libs cublas`).
#pragma once

#include <cublas_v2.h>

#include "check.cuh"

// --8<-- [start:check]
// The status name says what went wrong: CUBLAS_STATUS_NOT_INITIALIZED (no handle),
// CUBLAS_STATUS_INVALID_VALUE (a bad size, leading dimension or enum), CUBLAS_STATUS_NOT_SUPPORTED
// (this type combination has no kernel), CUBLAS_STATUS_EXECUTION_FAILED (a kernel failed to run).
#define CUBLAS_CHECK(call)                                                                            \
  course::library_check((call), CUBLAS_STATUS_SUCCESS, "cuBLAS", cublasGetStatusName, cublasGetStatusString, \
                        #call, __FILE__, __LINE__)
// --8<-- [end:check]
