"""GPU check of the Triton SSoG kernels: correctness, per-kernel timings beside the roofline, SDPA flash, ViT-Tiny.

    python3 scripts/gpu_check.py --out docs/results/gpu       (scripts/gpu_check.sh runs this under `timeout`,
                                                              with this checkout on PYTHONPATH)

The cases, timings, files and this command line are `ssog_lab.bench.gpu` (`main`). Exits 3 without writing
anything when torch has no CUDA; 1 when a correctness check failed; 0 otherwise.
"""

import sys

from ssog_lab.bench.gpu import main

if __name__ == "__main__":
    sys.exit(main())
