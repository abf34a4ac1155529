// course.cuh: every topic header of kernels/common/ in one include, for the programs that have not
// moved to including only the headers they use (the exercises, through exercise.cuh). A program that
// includes only what it uses is re-checked only when those headers change. Taught in docs/conventions.md.
//   check.cuh        CUDA_CHECK, CUDA_CHECK_LAUNCH, exit codes, ceil_div, require_compute_capability
//   memory.cuh       device_alloc, to_device, to_host, device_free, poison
//   inputs.cuh       fill_uniform, quiet_rows
//   verify.cuh       check_close, check_true, check_close_each, sum_atol, abs_values
//   timing.cuh       time_kernel_ms, print_bench, is_timing_repeat
//   args.cuh         Args, SizeOptions, require_multiple: strict command-line options
//   planted.cuh      planted faults: the --plant vocabulary, RunOptions, plant_zeros_small,
//                    report_planted_zeros_small, check_close_each_planted
//   cpu_threads.cuh  cpu_threads, parallel_for
#pragma once

#include "args.cuh"
#include "check.cuh"
#include "cpu_threads.cuh"
#include "inputs.cuh"
#include "memory.cuh"
#include "planted.cuh"
#include "timing.cuh"
#include "verify.cuh"
