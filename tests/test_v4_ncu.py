"""CPU checks of kernels/mnist/v4_ncu.py's bookkeeping: finding the training step in a sequence of
launched kernels, and naming and grouping kernels. (Its ncu CSV parsing has no test here: the course has
no recorded raw ncu CSV to test it on, and an invented one would test nothing; the GPU run checks it.)"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kernels" / "mnist"))
import v4_ncu  # noqa: E402


def test_the_step_is_the_smallest_period_over_the_whole_window():
    step = ["gather_batch", "tc::zero_accumulators", "tc::gemm_bf16<1>", "fused::bn_finalize",
            "tc::gemm_bf16<2>", "fused::bn_finalize", "tc::sgd_update_bf16"]
    window = step[3:] + step * 3 + step[:2]  # a window that starts and ends inside a step
    assert v4_ncu.find_period(window) == len(step)
    # the same kernel twice in a step (bn_finalize) is not a period; a window without two whole
    # periods, or one where a launch differs, gives none
    assert v4_ncu.find_period(step + step[:3]) == 0
    assert v4_ncu.find_period(step * 2 + ["other"] + step) == 0


def test_kernel_names_are_shortened_and_grouped_by_prefix():
    # A demangled name of the form ncu prints (return type, template arguments with casts, parameters);
    # this one is an example written for the test, not ncu output.
    name = v4_ncu.short_name("void tc::gemm_bf16<(int)14, true>(const __nv_bfloat16 *, float *, int)")
    assert name == "tc::gemm_bf16<14, true>"
    assert v4_ncu.group_of(name) == "tensor-core products"
    assert v4_ncu.group_of("fused::bn_relu_pool_forward") == "batch norm, ReLU, pool"
    assert v4_ncu.group_of("gather_batch") == "gather, zeroing"
    assert v4_ncu.group_of("some_new_kernel") == "other"
