#!/usr/bin/env bash
# The course's GPU run: every GPU item on every GPU of this machine, writing the GPU record.
# Usage: bash .ci/gpu-run.sh [--stale-only [--since ISO]] [--phase all|shared|alone] [--per-gpu N] [--limit-s S] [--fill] [--plan]
#                            [pytest selection, e.g. -k flash]
# What it does is course/gpu_run.py's docstring: the items that may share a GPU run side by side, pinned
# to GPUs; then benchmarks and profiler runs, one process per GPU, compared programs on one GPU back to
# back. Work that does not fit in the time limit is left for the next command:
#   bash .ci/gpu-run.sh --phase alone --stale-only
# Results and the log go to $OUT (or build/gpu-run when OUT is unset); copy $OUT/gpu-record.json over
# records/gpu-record.json afterwards and commit it.
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then  # wheels carried to a machine without network access
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/course-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/course-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on shared multi-GPU hosts (a program that uses it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-build/gpu-run}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv | tee "$out/gpu.txt"
# In the background, so that a TERM sent to this script (a wrapper's timeout) reaches the run, which then
# interrupts its processes, keeps what they finished and notes the command as stopped.
python3 -m course.gpu_run --out "$out" "$@" &
run=$!
trap 'kill -TERM "$run" 2>/dev/null' TERM INT
wait "$run"
status=$?
if kill -0 "$run" 2>/dev/null; then  # wait was cut short by the trap: wait for the run to finish stopping
  wait "$run"
  status=$?
fi
if [ -f records/awaiting-gpu.json ]; then
  echo "records/awaiting-gpu.json declares items as awaiting a GPU run: after copying the record back," \
       "re-run 'python -m pytest --co -q --gpu-await \"<reason>\"' there to drop those this run covered."
fi
exit "$status"
