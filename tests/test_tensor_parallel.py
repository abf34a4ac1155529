"""The tensor-parallel MLP (kernels/many-gpus/tensor_parallel.py) on the CPU: its logic (the sequence-
parallel shards, the chunk boundaries, the pipelined order of collectives and GEMMs) runs unchanged on
CPU processes with the gloo backend, where streams and events are no-ops. The GPU run times it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
PROGRAM = str(ROOT / "kernels" / "many-gpus" / "tensor_parallel.py")
sys.path.insert(0, str(ROOT / "kernels" / "many-gpus"))
import tensor_parallel as tp  # noqa: E402


def run(*args):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, PROGRAM, *args], capture_output=True, text=True, timeout=120, env=env)


def test_chunk_bounds_cover_every_row_once():
    for rows in (1, 7, 21, 64):
        for chunks in range(1, rows + 1):
            b = tp.chunk_bounds(rows, chunks)
            sizes = [b[k + 1] - b[k] for k in range(chunks)]
            assert b[0] == 0 and b[-1] == rows and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("ranks", [2, 3])
def test_chunked_equals_unchunked_and_the_reference(ranks):
    # 42 tokens: 21 or 14 per rank, not a multiple of the 4 chunks, so the chunks are uneven
    r = run("--cpu", str(ranks), "--tokens", "42", "--d-model", "48", "--chunks", "4", "--seed", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    checks = [line for line in r.stdout.splitlines() if line.startswith("CHECK")]
    size = f"{ranks}ranks_42x48x192"
    knobs = [f"chunked4_{tp.course_tools.slug(knob)}" for knob, _, _ in tp.KNOBS if knob]  # each knob's group
    for way in ("chunked4", *knobs):
        for name in (way, f"{way}_agrees_with_no_overlap"):
            assert any(line.startswith(f"CHECK PASS tp_{name}_{size} ") for line in checks), r.stdout
    for name in ("no_overlap", "one_gpu", "zero_output_rejected"):
        assert any(line.startswith(f"CHECK PASS tp_{name}_{size} ") for line in checks), r.stdout
    assert not any(line.startswith("CHECK FAIL") for line in checks), r.stdout
    agree = [line for line in checks if "agrees" in line]
    assert len(agree) == 1 + len(knobs)
    for line in agree:                                  # on the CPU the chunks compute the same sums
        assert "max |overlapped - unoverlapped| 0 " in line, line
    # the fused ops need GPUs: skipped on one line, never a crash
    assert "PRUNED tensor-parallel, symmetric-memory fused overlap: skipped: symmetric memory needs CUDA GPUs" \
        in r.stdout, r.stdout


@pytest.mark.parametrize("args, says", [
    (["--cpu", "3", "--tokens", "40"], "multiples of every rank count"),
    (["--cpu", "2", "--tokens", "6", "--chunks", "4"], "chunks need at least"),
    (["--cpu", "1"], "--cpu must be"),
    (["--cpu", "2", "--bench"], "neither --bench"),
    (["--chunks", "0"], "--chunks must be"),
])
def test_bad_arguments_exit_1_with_a_reason(args, says):
    r = run(*args)
    assert r.returncode == 1 and says in r.stderr, r.stderr
