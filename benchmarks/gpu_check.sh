#!/usr/bin/env bash
# One call on a GPU machine: the GPU tests, the benchmarks, and a short summary table last.
#
#   bash benchmarks/gpu_check.sh [--quick] [--no-tests | --no-bench] [OUT_DIR]
#
# --quick: dense LAP at n = 1000, 4096; sparse gated at 10k, 100k nodes; a 20-frame 32×256×256
# pipeline. Without it: the issues' full sizes (takes longer than one 10-minute device call; run the
# pieces separately there, e.g. --no-tests and --no-bench in two calls). Markdown reports and logs go to OUT_DIR (default: $OUT, else
# benchmarks/results/latest). Runs from a checkout without installing (PYTHONPATH).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/plugins${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

quick="" tests=1 bench=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick="--quick" ;;
        --no-tests) tests=0 ;;
        --no-bench) bench=0 ;;
        *) break ;;
    esac
    shift
done
out_dir="${1:-${OUT:-benchmarks/results/latest}}"
mkdir -p "$out_dir"

if [ "$tests" = 1 ]; then
    echo "== GPU tests"
    python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$out_dir/gpu_tests.log" | tail -n 30
fi
if [ "$bench" = 0 ]; then
    python3 benchmarks/gpu_summary.py "$out_dir"
    exit 0
fi

echo "== dense and sparse LAP benchmark"
python3 benchmarks/lap_bench.py $quick --markdown "$out_dir/lap_bench.md" > "$out_dir/lap_bench.log" 2>&1 \
    || echo "lap_bench failed (see $out_dir/lap_bench.log)"

echo "== generous gates and full sparse matchings (issue 27's families)"
if [ -n "$quick" ]; then generous_sizes=10000,100000; else generous_sizes=10000,100000,1000000; fi
PYTHONPATH="$PYTHONPATH:$PWD/tests" python3 benchmarks/lap_generous.py --sizes "$generous_sizes" --limit 10 \
    --out "$out_dir/lap_generous.md" > "$out_dir/lap_generous.log" 2>&1 \
    || echo "lap_generous failed (see $out_dir/lap_generous.log)"

echo "== detection per frame, GPU vs CPU (issue 24's speed target)"
python3 benchmarks/detect_gpu_speed.py --frames 5 --cpu-frames 2 --out "$out_dir/detect_gpu.md" \
    > "$out_dir/detect_gpu.log" 2>&1 || echo "detect_gpu_speed failed (see $out_dir/detect_gpu.log)"

echo "== cold start: the sample's first track run with an empty CuPy cache, then warm"
bash benchmarks/cold_start_check.sh "$out_dir/cold_start" > "$out_dir/cold_start.log" 2>&1 \
    || echo "cold_start_check failed (see $out_dir/cold_start.log)"
grep -E "^== |^wall" "$out_dir/cold_start.log"

echo "== end-to-end pipeline benchmark"
if [ -n "$quick" ]; then
    pipeline_args=(--frames 20 --shape 32,256,256 --particles 1000 --cpu-frames 3)
else
    pipeline_args=(--frames 100 --shape 64,512,512 --particles 5000 --cpu-frames 3)
fi
python3 benchmarks/pipeline_bench.py "${pipeline_args[@]}" --markdown "$out_dir/pipeline.md" \
    > "$out_dir/pipeline.log" 2>&1 || echo "pipeline_bench failed (see $out_dir/pipeline.log)"

python3 benchmarks/gpu_summary.py "$out_dir"
