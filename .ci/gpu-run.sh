#!/usr/bin/env bash
# The course's GPU run: the whole suite on a GPU machine, writing records/gpu-record.json.
# Usage: bash .ci/gpu-run.sh [extra pytest args, e.g. --gpu-stale-only]
# Results and logs go to $OUT (or build/gpu-run when OUT is unset).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu-run}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then  # wheels carried to a machine without network access
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/course-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/course-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv | tee "$out/gpu.txt"
# SIGINT before the device's 10-minute limit lets pytest finish cleanly; the record is written
# after every item anyway, so a stopped run keeps what it verified.
timeout -s INT "${GPU_RUN_LIMIT_S:-540}" python3 -m pytest --gpu-record -q -ra "$@" 2>&1 | tee "$out/pytest-gpu.log"
status=${PIPESTATUS[0]}
cp records/gpu-record.json "$out/" 2>/dev/null
exit "$status"
