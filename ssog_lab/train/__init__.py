"""Training: one loop for every model (loop.py), its recipe (config.py), checkpoints (checkpoint.py),
where it runs (runtime.py), what it logs (metrics.py) and the command line (cli.py)."""

from .checkpoint import CHECKPOINT_NAME, CheckpointError, atomic_save, load_model, read_checkpoint, save_weights
from .cli import build_parser, main
from .config import PRECISION_CHOICES, TRAJECTORY_FIELDS, TrainConfig
from .loop import DivergedError, fit
from .metrics import LOG_COLUMNS
from .optim import ATOM_PARAMETERS, atom_parameter_names
from .runtime import epoch_order, evaluate
from .split import hold_out

__all__ = ["TrainConfig", "fit", "evaluate", "load_model", "save_weights", "read_checkpoint", "atomic_save",
           "CheckpointError", "DivergedError", "main", "build_parser", "LOG_COLUMNS", "CHECKPOINT_NAME",
           "TRAJECTORY_FIELDS", "PRECISION_CHOICES", "ATOM_PARAMETERS", "atom_parameter_names",
           "epoch_order", "hold_out"]
