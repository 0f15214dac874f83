#!/usr/bin/env bash
# A fresh machine's first `track run` against a warm one, on a GPU machine, in one call:
#   cold       empty CuPy cache (CUPY_CACHE_DIR), this package's shipped fatbins (the default); with --replay it
#              also records every compilation CuPy asked for (record.json)
#   warm       the same cache again (a second run on that machine)
#   replayed   (with --replay) another empty cache, the recorded compilations compiled first on 16 threads, then
#              the run (H100: no gain, 66 compilations took 8.7 s on 16 threads against 9.4 s one at a time)
#   cold_nvrtc (with --nvrtc) another empty cache, TRACKER_CUDA_SHIPPED=0: this package's modules through NVRTC
# Each prints benchmarks/cold_run.py's report (wall time; NVRTC compilations by the tracker line that caused
# them); JSON and logs go to OUT_DIR.
#
#   bash benchmarks/cold_start_check.sh [--nvrtc] [--replay] [OUT_DIR] [extra track run options...]
# (STACK=path for another stack than the sample; LABEL=prefix for the files' names)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/plugins${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvrtc=0 replay=0
while [ $# -gt 0 ]; do
    case "$1" in
        --nvrtc) nvrtc=1 ;;
        --replay) replay=1 ;;
        *) break ;;
    esac
    shift
done
label_prefix="${LABEL:-}"
out="${1:-${OUT:-/tmp/cold_start}}"
shift || true
mkdir -p "$out"
stack="${STACK:-sample_data/sample.tif}"
tracks="$(mktemp -d)/tracks.csv"

one() {
    local label=$label_prefix$1 flags=$2
    shift 2
    echo "== $label"
    env "$@" python3 benchmarks/cold_run.py --json "$out/$label.json" $flags -- "$stack" -o "$tracks" --overwrite \
        --device gpu --quiet "${extra[@]}" > "$out/$label.log" 2>&1
    echo "exit $?"
    head -n 12 "$out/$label.log"
}

extra=("$@")
cache=$(mktemp -d)
record=""
if [ "$replay" = 1 ]; then record="--record $out/${label_prefix}record.json"; fi
one cold "$record" CUPY_CACHE_DIR="$cache"
one warm "" CUPY_CACHE_DIR="$cache"
if [ "$replay" = 1 ]; then
    one replayed "--precompile $out/${label_prefix}record.json --threads 16" CUPY_CACHE_DIR="$(mktemp -d)"
fi
if [ "$nvrtc" = 1 ]; then
    one cold_nvrtc "" CUPY_CACHE_DIR="$(mktemp -d)" TRACKER_CUDA_SHIPPED=0
fi
