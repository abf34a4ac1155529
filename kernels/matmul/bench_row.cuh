// bench_row.cuh: the matmul chapter's BENCH row through course::print_bench, kept only for gemm_hopper.cu and
// gemm_wgmma.cu. sgemm.cu, hgemm_tc.cu, fft.cu and fft_conv.cu call course::print_bench with the chapter's
// fields themselves (size, workspace_bytes, peak_bytes); once these two do too, delete this file.
//
// course: header
#pragma once

#include "../common/course.cuh"

// --8<-- [start:bench_row]
namespace chapter {
inline void print_bench_row(const char* case_name, const char* impl, double time_ms, double bytes, double flops,
                            bool peer, int size, double workspace_bytes) {
  course::print_bench(case_name, impl, time_ms, bytes, flops, peer,
                      {{"size", size}, {"workspace_bytes", workspace_bytes}, {"peak_bytes", bytes + workspace_bytes}});
}
}  // namespace chapter
// --8<-- [end:bench_row]
