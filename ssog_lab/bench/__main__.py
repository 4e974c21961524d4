"""`python -m ssog_lab.bench` (the same command as `python -m ssog_lab bench`, and the child protocol
`--one JSON` of `runner.run_in_subprocess`)."""

import sys

from .cli import main

sys.exit(main())
