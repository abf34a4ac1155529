// check_nccl.cuh: NCCL_CHECK, for NCCL calls (ncclResult_t).
// Taught in docs/libraries/nccl.md. Programs that include it link -lnccl (`course: libs nccl`).
#pragma once

#include <nccl.h>

#include "course.cuh"

// --8<-- [start:check]
// ncclUnhandledCudaError (a CUDA call inside NCCL failed), ncclSystemError (the OS: shared memory,
// sockets), ncclInvalidArgument / ncclInvalidUsage (your call is wrong, for example a count that
// differs between ranks), ncclInternalError. NCCL_DEBUG=WARN makes NCCL explain more.
#define NCCL_CHECK(call)                                                                        \
  do {                                                                                          \
    const ncclResult_t course_r_ = (call);                                                      \
    if (course_r_ != ncclSuccess)                                                               \
      course::library_fail("NCCL", ncclGetErrorString(course_r_), ncclGetLastError(nullptr),    \
                           #call, __FILE__, __LINE__);                                          \
  } while (0)
// --8<-- [end:check]
