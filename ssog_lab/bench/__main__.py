"""`python -m ssog_lab.bench` (also the child protocol `--one JSON` of `run_in_subprocess`)."""

import sys

from . import main

sys.exit(main())
