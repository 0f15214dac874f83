#!/usr/bin/env bash
# Issue 4's "whole track run at 1M particles per frame", on a GPU machine (not yet run: no device was
# lent in the session that wrote it). Needs ~45 GB of GPU memory for rendering, ~7 GB of disk.
#   1. a cProfile of link_detections at 1M particles x 3 frames (where the host time per pair goes);
#   2. track_stack (read TIFF + GPU detection + linking) on 3 frames of 256x2048x2048 voxels holding
#      1M particles each (voxel 0.25/0.15/0.15 µm, PSF sigma 0.3/0.18/0.18 µm: NN ~1 µm).
# Usage: bash benchmarks/pipeline_1m.sh [OUTDIR]
set -euo pipefail
out=${1:-${OUT:-benchmarks/results}}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 benchmarks/link_scale_bench.py --sizes 1000000 --frames 3 --no-search --profile \
    > "$out/link_profile_1m.txt" 2>&1
tail -45 "$out/link_profile_1m.txt"
python3 benchmarks/pipeline_bench.py --frames 3 --shape 256,2048,2048 --particles 1000000 \
    --voxel 0.25,0.15,0.15 --psf 0.3,0.18,0.18 --cpu-frames 0 --workdir "${TMPDIR:-/tmp}/pipeline_1m" \
    --markdown "$out/pipeline_1m_h100.md" 2>&1 | tail -25
