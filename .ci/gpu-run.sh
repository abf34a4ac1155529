#!/usr/bin/env bash
# The course's GPU run: the whole suite on a GPU machine, writing records/gpu-record.json.
# Usage: bash .ci/gpu-run.sh [extra pytest args, e.g. --gpu-stale-only]
# Results and logs go to $OUT (or build/gpu-run when OUT is unset); copy $OUT/gpu-record.json over
# records/gpu-record.json afterwards and commit it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu-run}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then  # wheels carried to a machine without network access
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/course-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/course-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
# Record straight into the output folder, so that a run stopped at a time limit keeps what it verified.
# Several calls in one session build on one another's results.
out=$(cd "$out" && pwd)
[ -f "$out/gpu-record.json" ] || cp records/gpu-record.json "$out/gpu-record.json"
export COURSE_GPU_RECORD=$out/gpu-record.json
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv | tee "$out/gpu.txt"
# SIGINT before the device's 10-minute limit lets pytest finish cleanly; the record is written
# after every item anyway, so a stopped run keeps what it verified.
timeout -s INT "${GPU_RUN_LIMIT_S:-540}" python3 -m pytest --gpu-record -q -ra "$@" 2>&1 | tee -a "$out/pytest-gpu.log"
status=${PIPESTATUS[0]}
if [ -f records/awaiting-gpu.json ]; then
  echo "records/awaiting-gpu.json declares items as awaiting a GPU run: after copying the record back," \
       "re-run 'python -m pytest --co -q --gpu-await \"<reason>\"' there to drop those this run covered." | tee -a "$out/pytest-gpu.log"
fi
exit "$status"
