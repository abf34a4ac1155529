// check_nccl.cuh: NCCL_CHECK, for NCCL calls (ncclResult_t).
// Taught in docs/libraries/nccl.md. Programs that include it link -lnccl (`course: libs nccl`).
#pragma once

#include <nccl.h>

#include "check.cuh"

// --8<-- [start:check]
// ncclUnhandledCudaError (a CUDA call inside NCCL failed), ncclSystemError (the OS: shared memory,
// sockets), ncclInvalidArgument / ncclInvalidUsage (your call is wrong, for example a count that
// differs between ranks), ncclInternalError. NCCL_DEBUG=WARN makes NCCL explain more.
namespace course {
inline const char* nccl_last_error(ncclResult_t) { return ncclGetLastError(nullptr); }
}  // namespace course

#define NCCL_CHECK(call)                                                                                    \
  course::library_check((call), ncclSuccess, "NCCL", ncclGetErrorString, course::nccl_last_error, #call, \
                        __FILE__, __LINE__)
// --8<-- [end:check]
