#!/usr/bin/env bash
# The course's GPU run: the GPU items on a GPU machine, writing the GPU record.
# Usage: bash .ci/gpu-run.sh [--shards N] [--part shards|alone|all] [extra pytest args, e.g. --gpu-stale-only]
#   --shards N   run the GPU items that may share the GPU in N copies of the tree side by side (each
#                with its own build folder and record file, merged at the end), then the benchmarks
#                and profiler runs alone on the GPU, one after another. Without it: one pytest over
#                everything, as before.
#   --part P     with --shards: only the shared part (shards), only the alone part (alone, or alone:K/N
#                for part K of N of it), or both (all, the default), so that a run longer than one
#                command's limit can be split across commands.
# Results and logs go to $OUT (or build/gpu-run when OUT is unset); copy $OUT/gpu-record.json over
# records/gpu-record.json afterwards and commit it.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shards=0 part=all
while [ $# -gt 0 ]; do
  case "$1" in
    --shards) shards=${2:?--shards needs a number}; shift 2 ;;
    --part) part=${2:?--part needs shards, alone or all}; shift 2 ;;
    *) break ;;
  esac
done
case "$part" in shards|alone|alone:[0-9]*/[0-9]*|all) ;; *) echo "error: --part takes shards, alone, alone:K/N or all" >&2; exit 1 ;; esac
[[ "$shards" =~ ^[0-9]+$ ]] || { echo "error: --shards takes a whole number" >&2; exit 1; }

out=${OUT:-build/gpu-run}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if ls .whl/*.whl >/dev/null 2>&1; then  # wheels carried to a machine without network access
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/course-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/course-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
# Record straight into the output folder, so that a run stopped at a time limit keeps what it verified.
[ -f "$out/gpu-record.json" ] || cp records/gpu-record.json "$out/gpu-record.json"
export COURSE_GPU_RECORD=$out/gpu-record.json
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv | tee "$out/gpu.txt"
limit=${GPU_RUN_LIMIT_S:-540}  # SIGINT before the device's 10-minute limit lets pytest finish cleanly
started=$(date +%s)
left() { echo $(( limit - ($(date +%s) - started) )); }

if [ "$shards" -eq 0 ]; then
  timeout -s INT "$limit" python3 -m pytest --gpu-record -q -ra "$@" 2>&1 | tee -a "$out/pytest-gpu.log"
  status=${PIPESTATUS[0]}
else
  status=0
  if [ "$part" = shards ] || [ "$part" = all ]; then
    # Compile every program once, all cores at a time, before the tree is copied: the shards then find
    # their programs built (build stamps name paths relative to the tree) instead of each compiling them.
    python3 -m course.programs build-all "$(nproc)" 2>&1 | tee -a "$out/pytest-gpu.log"
    pids=()
    work=/tmp/course-shards && rm -rf "$work" && mkdir -p "$work"  # kept out of $OUT: few files come back
    for k in $(seq 1 "$shards"); do
      copy=/tmp/course-shard-$k
      rm -rf "$copy" && mkdir -p "$copy"
      # The tree with the programs built above: each shard then builds only what a page's own commands
      # build, into its own build/.
      tar -C "$root" --exclude=./.git --exclude=./site --exclude=./.venv -cf - . | tar -C "$copy" -xf -
      cp "$out/gpu-record.json" "$work/shard-$k.json"
      (cd "$copy" && COURSE_GPU_RECORD="$work/shard-$k.json" timeout -s INT "$(left)" \
         python3 -m pytest --gpu-record -q -ra -p no:cacheprovider --gpu-shard "$k/$shards" "$@" \
         > "$work/shard-$k.log" 2>&1) &
      pids+=($!)
    done
    for k in "${!pids[@]}"; do
      wait "${pids[$k]}" || status=1
      { echo "===== shard $((k + 1))/$shards"; cat "$work/shard-$((k + 1)).log"; } >> "$out/pytest-gpu.log"
      tail -n 1 "$work/shard-$((k + 1)).log"
    done
    python3 -m course.record merge "$out/gpu-record.json" "$work"/shard-*.json
    grep -h -E "^(FAILED|ERROR)" "$work"/shard-*.log
  fi
  if [ "$part" != shards ] && [ "$(left)" -lt 60 ]; then
    echo "no time left for the benchmarks and profiler runs: run them with --part alone" | tee -a "$out/pytest-gpu.log"
    status=1
  elif [ "$part" != shards ]; then
    alone=$([ "$part" = all ] && echo alone || echo "$part")
    timeout -s INT "$(left)" python3 -m pytest --gpu-record -q -ra -p no:cacheprovider --gpu-shard "$alone" "$@" 2>&1 \
      | tee -a "$out/pytest-gpu.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
if [ -f records/awaiting-gpu.json ]; then
  echo "records/awaiting-gpu.json declares items as awaiting a GPU run: after copying the record back," \
       "re-run 'python -m pytest --co -q --gpu-await \"<reason>\"' there to drop those this run covered." | tee -a "$out/pytest-gpu.log"
fi
exit "$status"
