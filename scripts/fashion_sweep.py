"""The Fashion-MNIST sweep's command line: `ssog_lab.experiments.fashion.sweep` (its docstring gives the actions).

    python scripts/fashion_sweep.py run | report | nfe | speed
"""

import sys

from ssog_lab.experiments.fashion.sweep import main

if __name__ == "__main__":
    sys.exit(main())
