"""Each notebook's running time in full and fast mode: `ssog_lab.bench.notebook_times` (its docstring gives the flags).

    python scripts/notebook_times.py                  # every notebook → docs/results/notebook_times.md
"""

import sys

from ssog_lab.bench.notebook_times import main

if __name__ == "__main__":
    sys.exit(main())
