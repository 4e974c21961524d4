"""The training recipe: one dataclass, every field checked (type, finiteness, range) before anything runs."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

PRECISION_CHOICES = ("auto", "off", "bf16", "fp16")
# Fields that define the training trajectory: a resumed run must use the same values.
TRAJECTORY_FIELDS = ("epochs", "batch_size", "lr", "weight_decay", "warmup_epochs", "min_lr_ratio",
                     "label_smoothing", "grad_clip", "seed", "precision", "atom_lr_scale", "validation_fraction")
# Older spellings of fields, still read from stored configs (`amp` meant mixed precision here; in the
# operator `amp` is the amplitude α, hence the rename).
LEGACY_NAMES = {"amp": "precision"}
# Defaults that a stored config from before a field existed implicitly used.
_ABSENT_MEANS = {"atom_lr_scale": 1.0, "validation_fraction": 0.0}


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
    lr: float = 2e-3
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    min_lr_ratio: float = 0.0
    label_smoothing: float = 0.0
    grad_clip: float | None = 1.0
    seed: int = 0
    precision: str = "auto"
    # 1: the atoms train like every other no-decay parameter. A separate rate did not clearly help on Fashion-MNIST
    # at 7×7 tokens, each pair differing in the scale alone (docs/results/accuracy_fashion.md, validation %, one
    # seed, noise about 0.5): fixed SSoG ×1 88.2, ×10 88.9, ×30 87.7; steered with 4 heads ×1 88.0, ×10 87.5, with
    # 1 head ×1 86.1, ×10 86.6. So the group is an option the tuning may pick, not the default.
    atom_lr_scale: float = 1.0
    validation_fraction: float = 0.0
    log_every: int = 10
    save_every: int = 0
    max_steps: int | None = None
    eval_batch_size: int = 500
    device: str = "auto"
    progress: bool = True

    def __post_init__(self):
        for field in dataclasses.fields(self):
            _check_type(field.name, getattr(self, field.name), field.type)
        if self.precision not in PRECISION_CHOICES:
            raise ValueError(f"precision must be one of {PRECISION_CHOICES}, got {self.precision!r}")
        for name in ("epochs", "batch_size", "log_every", "eval_batch_size"):
            _check_range(name, getattr(self, name), low=1)
        _check_range("save_every", self.save_every, low=0)
        if self.max_steps is not None:
            _check_range("max_steps", self.max_steps, low=1)
        _check_range("lr", self.lr, low=0, low_open=True)
        _check_range("weight_decay", self.weight_decay, low=0)
        _check_range("warmup_epochs", self.warmup_epochs, low=0)
        _check_range("min_lr_ratio", self.min_lr_ratio, low=0, high=1)
        _check_range("label_smoothing", self.label_smoothing, low=0, high=1, high_open=True)
        if self.grad_clip is not None:
            _check_range("grad_clip", self.grad_clip, low=0, low_open=True)
        _check_range("atom_lr_scale", self.atom_lr_scale, low=0, low_open=True)
        _check_range("validation_fraction", self.validation_fraction, low=0, high=0.5, high_open=True)
        if not self.device:
            raise ValueError("device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got ''")

    @classmethod
    def from_dict(cls, stored: dict) -> TrainConfig:
        """A config from a stored dict (a checkpoint's or summary's), reading older field names too."""
        return cls(**upgrade(stored))


def upgrade(stored: dict) -> dict:
    """A stored config dict with older field names renamed and later-added fields at their old meaning."""
    fields = {LEGACY_NAMES.get(key, key): value for key, value in stored.items()}
    return {**_ABSENT_MEANS, **fields}


def _check_type(name: str, value: object, annotation: str) -> None:
    """Bools are not ints here, ints are fine as floats, None only where the annotation allows it."""
    if value is None and "None" in annotation:
        return
    kind = annotation.split("|")[0].strip()
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool),
          "bool": isinstance(value, bool), "str": isinstance(value, str)}[kind]
    if not ok:
        raise ValueError(f"{name} must be {annotation}, got {value!r}")


def _check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> None:
    """value finite and in [low, high] (an open end excludes the bound); the message names the field."""
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if not math.isfinite(value) or below or above:
        interval = (f"{'(' if low_open else '['}{'-inf' if low is None else low}, "
                    f"{'inf' if high is None else high}{')' if high_open or high is None else ']'}")
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")
