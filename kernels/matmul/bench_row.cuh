// bench_row.cuh: the BENCH line of the matmul and FFT programs, course::print_bench's fields plus the
// device memory each implementation needs.
//
// Taught in docs/fast-matmul-fft/sgemm-warps.md (Results). Included by sgemm.cu, hgemm_tc.cu,
// gemm_wgmma.cu, fft.cu and fft_conv.cu, so that the five print one format:
//   size             the x axis of the chapter's plots (the matrix side, the FFT length, the filter side)
//   workspace_bytes  device memory the implementation needs beyond its inputs and outputs
//   peak_bytes       inputs and outputs (`bytes`) plus the workspace
//
// course: header
#pragma once

#include <cstdio>

// --8<-- [start:bench_row]
namespace chapter {
inline void print_bench_row(const char* case_name, const char* impl, double time_ms, double bytes, double flops,
                            bool peer, int size, double workspace_bytes) {
  std::printf(
      "BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": %s, \"size\": %d, \"workspace_bytes\": %.0f, \"peak_bytes\": %.0f}\n",
      case_name, impl, time_ms, bytes, flops, peer ? "true" : "false", size, workspace_bytes,
      bytes + workspace_bytes);
  std::fflush(stdout);
}
}  // namespace chapter
// --8<-- [end:bench_row]
