"""A passing speed exercise says how far the reader's kernel is from the GPU's limit, beside the course
solution's share from the GPU record (course/exercise_limits.py)."""

import json

from course import exercise, exercise_limits

H200 = "NVIDIA H200"


def _bench(case, impl, time_ms, bytes_=0, flops=0, peer=False):
    return "BENCH " + json.dumps({"case": case, "impl": impl, "time_ms": time_ms, "bytes": bytes_, "flops": flops,
                                  "peer": peer})


def _record(rows, gpu=H200, name="transpose"):
    return {"schema": 1, "runs": {"r": {"gpu": gpu, "date": "2026-12-02", "started": "2026-12-02T18:00:00+00:00"}},
            "items": {"h": {"id": exercise_limits.SOLUTION_ID.format(name=name), "outcome": "passed", "run": "r",
                            "benchmarks": rows}}}


def test_a_memory_bound_kernel_is_judged_by_bandwidth_beside_the_solution():
    # 536,870,912 bytes in 0.1398 ms is 3.84 TB/s: 80% of the H200 SXM's 4.8 TB/s
    out = "\n".join([_bench("8192x8192", "cudaMemcpy", 0.12, 536870912, peer=True),
                     _bench("8192x8192", "transpose (exercise)", 0.1398, 536870912)])
    solution = [{"case": "8192x8192", "impl": "transpose (exercise)", "time_ms": 0.1232, "bytes": 536870912}]
    lines = exercise_limits.limit_lines(out, H200, _record(solution), "transpose")
    assert len(lines) == 1, lines  # the peer's row is not the reader's
    assert "your kernel reaches 80% of the H200 SXM datasheet's memory bandwidth (4.8 TB/s)" in lines[0]
    assert "the course's solution 91% (GPU record: NVIDIA H200, 2026-12-02)" in lines[0]


def test_a_compute_bound_kernel_is_judged_by_the_peak_of_its_arithmetic():
    # 2 x 4096^3 FLOPs in 4.1 ms is 33.5 TFLOP/s: 50% of the FP32 peak, and far less of the bandwidth
    out = _bench("4096^3", "sgemm tiled fp32", 4.1, 3 * 4 * 4096 * 4096, 2 * 4096 ** 3)
    lines = exercise_limits.limit_lines(out, H200, _record([], name="other"), "sgemm_tiled")
    assert "your kernel reaches 50% of the H200 SXM datasheet's FP32 peak (67 TFLOP/s)" in lines[0]
    assert "the course's solution has no recorded run of this case yet" in lines[0]


def test_an_unknown_gpu_says_so_rather_than_guessing():
    lines = exercise_limits.limit_lines(_bench("n", "k", 1.0, 1e9), "NVIDIA GeForce RTX 4090", _record([]), "x")
    assert lines == ["  n: no datasheet figures for NVIDIA GeForce RTX 4090 in course/headline.py, so no share of "
                     "its limit is shown"]
    assert exercise_limits.limit_lines(_bench("n", "k", 0.0, 1e9), H200, _record([]), "x")[0].startswith("  n: no")


def test_the_runner_hashes_the_limits_module_into_every_exercise_item():
    names = [n for n, _ in exercise.EXERCISES[0].hash_inputs()]
    assert "course/exercise_limits.py" in names
