#!/usr/bin/env bash
# GPU check in one command (under 8 minutes on an H200): Triton SSoG kernels against the torch reference,
# operator timing table with the roofline comparison, then the model-level benchmark. Results: docs/results/gpu/.
#   scripts/gpu_check.sh            (from the repository root or anywhere; PY=python overrides the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python
OUT=docs/results/gpu
BUDGET_S=${BUDGET_S:-460}  # the whole script's wall-clock budget; the model bench gets what the operator part left
start=$SECONDS
mkdir -p "$OUT"

"$PY" scripts/gpu_check.py --out "$OUT"
status=$?

# Model-level runs, guarded: a failure or an overrun here never loses the operator table written above.
# bench rewrites $OUT/bench/bench.csv after every configuration, so a run cut short keeps its rows.
left=$((BUDGET_S - (SECONDS - start)))
if [ "$left" -gt 30 ]; then
  timeout "${left}s" "$PY" -m ssog_lab bench --preset tiny --depth discrete looped ode \
    --mixer sdpa sdpa-math axial ssog ssog-steered --resolution 224 384 512 768 1024 --batch 8 \
    --out "$OUT/bench" --timeout 60 --repeats 3 --warmup 1 --min-seconds 0.3 --no-progress \
    >"$OUT/bench.log" 2>&1
  bench_status=$?
  [ "$bench_status" -eq 0 ] || echo "model bench exited with $bench_status (124: out of time); see $OUT/bench.log"
else
  echo "model bench skipped: only ${left}s left of ${BUDGET_S}s"
fi
echo "done in $((SECONDS - start))s; operator check status $status"
exit $status
