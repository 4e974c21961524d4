#!/usr/bin/env bash
# GPU check in one command, at most 5 minutes on one H200 including Triton compilation: the Triton SSoG kernels
# against the torch reference, each kernel timed beside its roofline prediction, SDPA flash, and a ViT-Tiny
# training step and inference at 224² and 1024². Results: docs/results/gpu/ (each row written as it is measured).
#   bash scripts/gpu_check.sh        (from anywhere; PY=/path/to/python overrides python3)
# The package is imported from this checkout (PYTHONPATH), so nothing needs installing; the interpreter's own
# torch (a CUDA build) and triton are used.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PY:-$(command -v python3 || command -v python)}
OUT=docs/results/gpu
LIMIT_S=${LIMIT_S:-290}  # hard stop; gpu_check.py itself starts no new case after BUDGET_S
BUDGET_S=${BUDGET_S:-240}

# Preflight, before anything is written: a CUDA torch that sees a GPU, and triton.
if ! "$PY" -c 'import sys, torch, triton
print("torch", torch.__version__, "CUDA", torch.version.cuda, "triton", triton.__version__)
sys.exit(0 if torch.cuda.is_available() else 3)'; then
  echo "gpu_check: no CUDA GPU visible to $PY (a CUDA build of torch and triton are needed); nothing written" >&2
  exit 3
fi
mkdir -p "$OUT"
timeout "$LIMIT_S" "$PY" scripts/gpu_check.py --out "$OUT" --budget-s "$BUDGET_S" 2>&1 | tee "$OUT/gpu_check.log"
status=${PIPESTATUS[0]}
[ "$status" -eq 124 ] && echo "gpu_check: stopped after ${LIMIT_S}s; the rows written so far are in $OUT" >&2
exit "$status"
