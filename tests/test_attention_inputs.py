"""The attention programs' inputs (attn::fill_uniform_bf16 in kernels/attention/attention_common.cuh)
are made on every CPU core the process may use, each value a hash of (seed, index): the same values
whatever the number of threads, so a result never depends on the machine that made its inputs. Built
for the CPU only (the function is host code) and run with one core and with all of them."""

import hashlib
import os
import subprocess

import pytest

from course import programs, toolchain

PROBE = r"""
#include "attention/attention_common.cuh"
#include <algorithm>
#include <cstdio>
int main() {
  std::vector<float> x;
  std::vector<__nv_bfloat16> xb;
  // more than a few chunks of 2^20, with a ragged end, so that every worker gets some
  attn::fill_uniform_bf16(x, xb, (5u << 20) + 7, 2024, -2.0f, 2.0f);
  double lo = 1e9, hi = -1e9, sum = 0;
  bool same = true;
  for (size_t i = 0; i < x.size(); ++i) {
    lo = std::min<double>(lo, x[i]), hi = std::max<double>(hi, x[i]), sum += x[i];
    same = same && x[i] == __bfloat162float(xb[i]);
  }
  std::fwrite(xb.data(), sizeof(__nv_bfloat16), xb.size(), stdout);
  std::fprintf(stderr, "threads=%d min=%g max=%g mean=%g same=%d\n", course::cpu_threads(), lo, hi,
               sum / x.size(), same ? 1 : 0);
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fill")
    src, exe = folder / "probe.cu", folder / "probe"
    src.write_text(PROBE)
    built = subprocess.run(["nvcc", *toolchain.NVCC_FLAGS, "-arch=sm_90", "-I", str(programs.ROOT / "kernels"),
                            "-o", str(exe), str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return exe


def _run(exe, cores):
    proc = subprocess.run([str(exe)], capture_output=True, timeout=120, preexec_fn=lambda: os.sched_setaffinity(0, cores))
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout, dict(kv.split("=") for kv in proc.stderr.decode().split())


def test_same_inputs_on_one_core_and_on_all(probe):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one CPU core here: nothing to compare")
    one, one_info = _run(probe, {cores[0]})
    many, many_info = _run(probe, set(cores))
    assert one_info["threads"] == "1" and int(many_info["threads"]) == len(cores)
    assert hashlib.sha256(one).digest() == hashlib.sha256(many).digest(), "the values depend on the thread count"


def test_values_are_uniform_in_range_and_match_their_bf16(probe):
    _, info = _run(probe, os.sched_getaffinity(0))
    assert info["same"] == "1", "the float copy is not the bf16 value"
    assert -2.0 <= float(info["min"]) < -1.99 and 1.99 < float(info["max"]) <= 2.0, info
    assert abs(float(info["mean"])) < 0.01, info  # 5M uniform values in [-2, 2]: the mean's spread is ~5e-4
