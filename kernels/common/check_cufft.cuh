// check_cufft.cuh: CUFFT_CHECK, for cuFFT calls (cufftResult).
// Taught in docs/libraries/cufft.md. Programs that include it link -lcufft (`course: libs cufft`).
#pragma once

#include <cufft.h>

#include "check.cuh"

// --8<-- [start:check]
// cufftResult has no string function, so the names are spelled out. The ones you will meet:
// CUFFT_INVALID_PLAN (a plan destroyed or never made), CUFFT_ALLOC_FAILED (no memory for the
// plan's work area), CUFFT_INVALID_SIZE (a size below 1), CUFFT_INVALID_VALUE (a bad pointer or
// direction), CUFFT_NOT_SUPPORTED (a layout or type this cuFFT does not handle).
namespace course {
inline const char* cufft_status_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "another cufftResult";
  }
}
inline const char* cufft_status_text(cufftResult) { return "see cufft.h"; }
}  // namespace course

#define CUFFT_CHECK(call)                                                                                       \
  course::library_check((call), CUFFT_SUCCESS, "cuFFT", course::cufft_status_name, course::cufft_status_text, \
                        #call, __FILE__, __LINE__)
// --8<-- [end:check]
