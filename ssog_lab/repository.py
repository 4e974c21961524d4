"""Where the repository keeps what the package reads but does not hold: the committed results and the shipped
checkpoints. The package is used from its checkout (`make lab` and `make test` install it in editable mode), so
both sit beside it; this module is the one place that says where."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout: ssog_lab/, docs/, data/, notebooks/
RESULTS_DIR = ROOT / "docs" / "results"  # every committed measurement (docs/results/README.md is the index)
CHECKPOINTS_DIR = ROOT / "data" / "checkpoints"  # the shipped models (`make checkpoints` re-makes them)
