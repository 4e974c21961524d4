"""GPU check of the Triton SSoG kernels: correctness, per-kernel timings beside the roofline, SDPA flash, ViT-Tiny.

    python3 scripts/gpu_check.py --out docs/results/gpu       (scripts/gpu_check.sh runs this under `timeout`,
                                                              with this checkout on PYTHONPATH)

The cases, timings and files are `ssog_lab.bench.gpu` (its docstring lists the sections and columns); this script
is its command line. Exits 3 without writing anything when torch has no CUDA; 1 when a correctness check failed;
0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ssog_lab.bench.gpu import COMPILE_BOUND, MODEL_RUNS, operator_cases, run_gpu_check

__all__ = ["COMPILE_BOUND", "MODEL_RUNS", "main", "operator_cases"]  # what tests/test_triton.py reads from here


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, refuse without CUDA (exit 3, nothing written), run every section into --out."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs/results/gpu")
    parser.add_argument("--budget-s", type=float, default=270.0,
                        help="start no new case after this many seconds (the shell script's timeout is above it)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA GPU; nothing measured, nothing written",
              file=sys.stderr)
        return 3
    return run_gpu_check(Path(args.out), args.budget_s)


if __name__ == "__main__":
    sys.exit(main())
