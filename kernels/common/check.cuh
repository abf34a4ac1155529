// check.cuh: failing clearly. Taught in docs/conventions.md.
//   CUDA_CHECK(call)       abort with file, line and the failing expression if a CUDA call fails
//   CUDA_CHECK_LAUNCH()    check a kernel launch (configuration errors and, in debug, faults)
//   kExitFail, kExitWaived the exit codes the harness reads besides 0
//   library_fail, library_check  the shared error path of the library check macros (common/check_*.cuh)
//   ceil_div(a, b)         blocks needed to cover a elements with b threads each
//   require_compute_capability  exit with the "waived" code when the GPU lacks a feature
// Like every header in kernels/common/, everything here is inline, a template or a macro, so any number
// of translation units can include it.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace course {

// Exit codes the harness understands: 0 pass, 1 failure, 2 "waived" (the GPU lacks a feature
// this program needs, so it was skipped, not failed).
constexpr int kExitFail = 1;
constexpr int kExitWaived = 2;

[[noreturn]] inline void cuda_fail(cudaError_t err, const char* expr, const char* file, int line) {
  std::fprintf(stderr, "CUDA error %s (%s) at %s:%d\n  in: %s\n", cudaGetErrorName(err),
               cudaGetErrorString(err), file, line, expr);
  // "no CUDA-capable device" deserves a plain-language hint: it is the first error a reader without
  // a working driver sees.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    std::fprintf(stderr, "  hint: is an NVIDIA GPU present and is its driver loaded? Try `nvidia-smi`.\n");
  }
  std::exit(kExitFail);
}

// The error path of the CUDA libraries' check macros (kernels/common/check_cublas.cuh and the
// others): each library has its own status type, but every failure is reported the same way.
[[noreturn]] inline void library_fail(const char* library, const char* status_name, const char* status_text,
                                      const char* expr, const char* file, int line) {
  std::fprintf(stderr, "%s error %s (%s) at %s:%d\n  in: %s\n", library, status_name, status_text, file, line,
               expr);
  std::exit(kExitFail);
}

// One pattern for every library's status codes: each common/check_*.cuh defines its macro as
// library_check((call), the library's success code, its name, a function naming a status, a function
// describing it, #call, __FILE__, __LINE__). The two functions run only on failure.
template <typename Status>
inline void library_check(Status status, Status success, const char* library, const char* (*name)(Status),
                          const char* (*text)(Status), const char* expr, const char* file, int line) {
  if (status != success) library_fail(library, name(status), text(status), expr, file, line);
}

}  // namespace course

// --8<-- [start:check]
// A macro rather than a function so the message names the exact call, file and line.
#define CUDA_CHECK(call)                                                  \
  do {                                                                    \
    cudaError_t course_err_ = (call);                                     \
    if (course_err_ != cudaSuccess) {                                     \
      course::cuda_fail(course_err_, #call, __FILE__, __LINE__);          \
    }                                                                     \
  } while (0)

// Launch errors (bad configuration) are reported by cudaGetLastError; errors while the kernel
// runs surface at the next synchronising call, which CUDA_CHECK also catches. Define
// COURSE_SYNC_LAUNCHES to synchronise after every launch while debugging.
#ifdef COURSE_SYNC_LAUNCHES
#define CUDA_CHECK_LAUNCH()                     \
  do {                                          \
    CUDA_CHECK(cudaGetLastError());             \
    CUDA_CHECK(cudaDeviceSynchronize());        \
  } while (0)
#else
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
#endif
// --8<-- [end:check]

namespace course {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Exit with the "waived" code if the GPU is older than the program needs. The harness reports a
// waived program as skipped, never as passed.
inline void require_compute_capability(int major, int minor, const char* why) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int have_major = 0, have_minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&have_major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&have_minor, cudaDevAttrComputeCapabilityMinor, device));
  if (have_major * 10 + have_minor < major * 10 + minor) {
    std::printf("WAIVED needs compute capability %d.%d or newer (%s); this GPU is %d.%d\n", major, minor,
                why, have_major, have_minor);
    std::exit(kExitWaived);
  }
}

}  // namespace course
