"""Training: one loop for every model (see loop.py)."""

from .loop import (CHECKPOINT_NAME, LOG_COLUMNS, CheckpointError, TrainConfig, atomic_save, epoch_order, evaluate,
                   fit, load_model, main, read_checkpoint, save_weights)

__all__ = ["TrainConfig", "fit", "evaluate", "load_model", "save_weights", "read_checkpoint", "atomic_save",
           "CheckpointError", "main", "LOG_COLUMNS", "CHECKPOINT_NAME", "epoch_order"]
