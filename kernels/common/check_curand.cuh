// check_curand.cuh: CURAND_CHECK, for cuRAND's host API (curandStatus_t).
// Taught in docs/libraries/curand.md. Programs that include it link -lcurand (`course: libs curand`).
#pragma once

#include <curand.h>

#include "check.cuh"

// --8<-- [start:check]
// curandStatus_t, like cufftResult, has no string function. The ones you will meet:
// CURAND_STATUS_LENGTH_NOT_MULTIPLE (normal generators produce pairs: ask for an even count),
// CURAND_STATUS_OUT_OF_RANGE, CURAND_STATUS_TYPE_ERROR (an option this generator type lacks, such
// as an offset on MT19937), CURAND_STATUS_VERSION_MISMATCH (header and library differ).
namespace course {
inline const char* curand_status_name(curandStatus_t s) {
  switch (s) {
    case CURAND_STATUS_SUCCESS: return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_VERSION_MISMATCH: return "CURAND_STATUS_VERSION_MISMATCH";
    case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_TYPE_ERROR: return "CURAND_STATUS_TYPE_ERROR";
    case CURAND_STATUS_OUT_OF_RANGE: return "CURAND_STATUS_OUT_OF_RANGE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED";
    case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_PREEXISTING_FAILURE: return "CURAND_STATUS_PREEXISTING_FAILURE";
    case CURAND_STATUS_INITIALIZATION_FAILED: return "CURAND_STATUS_INITIALIZATION_FAILED";
    case CURAND_STATUS_ARCH_MISMATCH: return "CURAND_STATUS_ARCH_MISMATCH";
    case CURAND_STATUS_INTERNAL_ERROR: return "CURAND_STATUS_INTERNAL_ERROR";
    default: return "another curandStatus_t";
  }
}
inline const char* curand_status_text(curandStatus_t) { return "see curand.h"; }
}  // namespace course

#define CURAND_CHECK(call)                                                                   \
  course::library_check((call), CURAND_STATUS_SUCCESS, "cuRAND", course::curand_status_name, \
                        course::curand_status_text, #call, __FILE__, __LINE__)
// --8<-- [end:check]
