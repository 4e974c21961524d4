"""The training recipe: one dataclass, every field checked (type, finiteness, range) before anything runs."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import check_fields

PRECISION_CHOICES = ("auto", "off", "bf16", "fp16")
# Fields that define the training trajectory: a resumed run must use the same values.
TRAJECTORY_FIELDS = ("epochs", "batch_size", "lr", "weight_decay", "warmup_epochs", "min_lr_ratio",
                     "label_smoothing", "grad_clip", "seed", "precision", "atom_lr_scale", "validation_fraction")
# Each numeric field's interval (ssog_lab.checks.check_range keywords); a None value means "off" and is not checked.
RANGES = {**{name: dict(low=1) for name in ("epochs", "batch_size", "log_every", "eval_batch_size", "max_steps")},
          "save_every": dict(low=0), "seed": dict(low=0, high=2**32 - 1),  # numpy's seeds are 32-bit
          "lr": dict(low=0, low_open=True), "weight_decay": dict(low=0), "warmup_epochs": dict(low=0),
          "min_lr_ratio": dict(low=0, high=1), "label_smoothing": dict(low=0, high=1, high_open=True),
          "grad_clip": dict(low=0, low_open=True), "atom_lr_scale": dict(low=0, low_open=True),
          "validation_fraction": dict(low=0, high=0.5, high_open=True)}


@dataclass
class TrainConfig:
    """Training recipe. lr is the peak learning rate, reached after `warmup_epochs` of linear warm-up
    and decayed by a cosine to lr·min_lr_ratio at the end of `epochs`. batch_size is global (split
    over data-parallel ranks). max_steps stops early (the schedule still spans `epochs`), save_every
    adds step-interval checkpoints (0 = epoch ends only). grad_clip None disables clipping.
    precision (mixed precision): "auto" (bf16 on CUDA when supported, else fp16; off on CPU), "off",
    "bf16", "fp16" (the last two need CUDA). atom_lr_scale multiplies the learning rate of the SSoG
    atom parameters (offsets, log-widths, amplitudes; never weight-decayed). validation_fraction
    holds out that fraction of the training set (a fixed split, the same for every seed) and
    evaluates on it instead of the test set."""

    epochs: int = 10
    batch_size: int = 128
    lr: float = 4e-3
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    min_lr_ratio: float = 0.0
    label_smoothing: float = 0.0
    grad_clip: float | None = 1.0
    seed: int = 0
    precision: str = "auto"
    # The atoms live in token units (offsets ~1–3 tokens, log-widths ~1) while a weight is ~1/√dim, and AdamW
    # moves every parameter by about lr per step whatever its size: at one rate the atoms barely move in a short
    # run. Ten times the rate lets them travel as far, relative to their size, as the weights (docs/DESIGN.md §3).
    atom_lr_scale: float = 10.0
    validation_fraction: float = 0.0
    log_every: int = 10
    save_every: int = 0
    max_steps: int | None = None
    eval_batch_size: int = 500
    device: str = "auto"
    progress: bool = True

    def __post_init__(self):
        check_fields(self, RANGES, {"precision": PRECISION_CHOICES})
        if not self.device:
            raise ValueError("device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got ''")
