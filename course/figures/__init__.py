"""The course's figures, drawn as SVG by code: `python -m course.figures` writes docs/assets/figures/*.svg.

tests/test_figures.py checks that the committed files are exactly what this script produces, so a
figure is changed here, never by hand. Each figure is a light card (its own opaque background) with
dark text and mid-tone fills: it reads the same in the light and dark palettes and in print, whatever
the page around it. Hardware figures are the H200 SXM's, the course's reference GPU: its SM from NVIDIA's
Hopper architecture whitepaper (the H100's, the same GH100 SM), its memory from the H200 datasheet, and
say so; no measured number is drawn (those come from the GPU record).
course/svg.py writes the SVG (Svg, its drawing methods and the palette), for these figures and for the
site's charts. Each module here draws the figures of one chapter (or two short ones), each figure a function
under card.py's `@figure(height, heading)`: the docstring is its description, the body draws on the card.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..svg import CARD  # noqa: F401  (tests/test_figures.py checks each figure's card against it)
from .hardware import h100_sm, memory_hierarchy, host_device_copies, fat_binary, hello_launch, device_query
from .first_kernels import (thread_hierarchy, grid_over_matrix, matmul_naive, grid_stride,
                            histogram_atomics, timing_ways, unified_memory, profiling_tools, sanitizer_bugs,
                            three_launches)
from .memory_model import (coalescing, bank_conflicts, online_softmax, reduction_tree, transpose_tile,
                           occupancy, async_copies, cluster_softmax, grid_sync, l2_persistence, kernels_from_python)
from .matmul import (matmul_tiling, sgemm_register_blocking, sgemm_warp_tiling,
                     hopper_pipeline, row_column_major, loop_order, scan_and_cub)
from .attention import (flash_tile_loop, attention_three_kernels, flash_backward, attention_shapes, number_formats,
                        triton_key_tiles, llmc_step)
from .chapters import chapter_map
from .ecosystem import kernel_provenance, utilisation, when_work_runs, onnx_hub
from .cpp import storage_lifetimes, struct_padding, preprocessor_passes, raii_ownership
from .extensions import (torch_library_dispatch, operator_checks, torch_compile_path, two_custom_ops, package_build,
                         triton_programs, triton_softmax_row, triton_grouped_order)
from .libraries import (cublaslt_epilogue, cutlass_tiles, curand_apis, cublasxt_tiles, ring_allreduce,
                        fft_convolution)
from .mnist import idx_file, mnist_network, implicit_gemm, fused_passes, tensor_core_conv
from .many_gpus import tensor_parallel

OUT = Path(__file__).resolve().parent.parent.parent / "docs" / "assets" / "figures"


FIGURES = {
    "h100-sm.svg": h100_sm,
    "memory-hierarchy.svg": memory_hierarchy,
    "thread-hierarchy.svg": thread_hierarchy,
    "grid-over-matrix.svg": grid_over_matrix,
    "coalescing.svg": coalescing,
    "bank-conflicts.svg": bank_conflicts,
    "matmul-tiling.svg": matmul_tiling,
    "online-softmax.svg": online_softmax,
    "sgemm-register-blocking.svg": sgemm_register_blocking,
    "sgemm-warp-tiling.svg": sgemm_warp_tiling,
    "flash-tile-loop.svg": flash_tile_loop,
    "hopper-pipeline.svg": hopper_pipeline,
    "reduction-tree.svg": reduction_tree,
    "chapter-map.svg": chapter_map,
    "matmul-naive.svg": matmul_naive,
    "transpose-tile.svg": transpose_tile,
    "attention-three-kernels.svg": attention_three_kernels,
    "occupancy.svg": occupancy,
    "row-column-major.svg": row_column_major,
    "grid-stride.svg": grid_stride,
    "histogram-atomics.svg": histogram_atomics,
    "async-copies.svg": async_copies,
    "cluster-softmax.svg": cluster_softmax,
    "grid-sync.svg": grid_sync,
    "timing-ways.svg": timing_ways,
    "unified-memory.svg": unified_memory,
    "loop-order.svg": loop_order,
    "l2-persistence.svg": l2_persistence,
    "flash-backward.svg": flash_backward,
    "attention-shapes.svg": attention_shapes,
    "profiling-tools.svg": profiling_tools,
    "host-device-copies.svg": host_device_copies,
    "fat-binary.svg": fat_binary,
    "kernels-from-python.svg": kernels_from_python,
    "scan-and-cub.svg": scan_and_cub,
    "number-formats.svg": number_formats,
    "idx-file.svg": idx_file,
    "fused-passes.svg": fused_passes,
    "tensor-core-conv.svg": tensor_core_conv,
    "cublaslt-epilogue.svg": cublaslt_epilogue,
    "cutlass-tiles.svg": cutlass_tiles,
    "triton-key-tiles.svg": triton_key_tiles,
    "storage-lifetimes.svg": storage_lifetimes,
    "torch-library-dispatch.svg": torch_library_dispatch,
    "sanitizer-bugs.svg": sanitizer_bugs,
    "mnist-network.svg": mnist_network,
    "implicit-gemm.svg": implicit_gemm,
    "curand-apis.svg": curand_apis,
    "cublasxt-tiles.svg": cublasxt_tiles,
    "operator-checks.svg": operator_checks,
    "torch-compile-path.svg": torch_compile_path,
    "hello-launch.svg": hello_launch,
    "three-launches.svg": three_launches,
    "llmc-step.svg": llmc_step,
    "struct-padding.svg": struct_padding,
    "preprocessor-passes.svg": preprocessor_passes,
    "raii-ownership.svg": raii_ownership,
    "device-query.svg": device_query,
    "two-custom-ops.svg": two_custom_ops,
    "package-build.svg": package_build,
    "kernel-provenance.svg": kernel_provenance,
    "utilisation.svg": utilisation,
    "when-work-runs.svg": when_work_runs,
    "onnx-hub.svg": onnx_hub,
    "triton-programs.svg": triton_programs,
    "ring-allreduce.svg": ring_allreduce,
    "triton-softmax-row.svg": triton_softmax_row,
    "triton-grouped-order.svg": triton_grouped_order,
    "fft-convolution.svg": fft_convolution,
    "tensor-parallel.svg": tensor_parallel,
}


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        (OUT / name).write_text(draw())
    print(f"wrote {len(FIGURES)} figures to {OUT}")
    return 0
