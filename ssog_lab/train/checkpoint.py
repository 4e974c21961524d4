"""Checkpoints: atomic writes, checked reads, and the one training-state object whose schema lives here.

A training checkpoint is a plain dict of tensors and containers (loadable with weights_only=True):
format, model, model_config, optimizer, scheduler, scaler, rng (one entry per rank), train_config and
the TrainState fields (position, epoch_sums, window, history). A weights-only file (save_weights)
has format, model, model_config and free metadata; load_model reads both kinds.
"""

from __future__ import annotations

import dataclasses
import os
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ..models import ViT, ViTConfig
from .config import TRAJECTORY_FIELDS, TrainConfig, upgrade

CHECKPOINT_FORMAT = "ssog_lab-checkpoint-v1"
CHECKPOINT_NAME = "checkpoint.pt"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""


def _temp_name(path: Path) -> Path:
    """The one temp file per target (only rank 0 writes), so a killed save leaves at most one leftover."""
    return path.with_name(f".{path.name}.tmp")


def remove_leftover_temps(path: Path) -> list[Path]:
    """Delete temp files that killed saves of `path` left behind (today's name and the older per-pid ones)."""
    leftovers = [p for p in path.parent.glob(f".{path.name}.*tmp") if p.is_file()]
    for p in leftovers:
        p.unlink(missing_ok=True)
    return leftovers


def atomic_save(obj: object, path: str | Path) -> None:
    """torch.save to a temp file in path's folder, fsync, then os.replace: a crash at any moment leaves
    either the old file or the new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _temp_name(path)
    try:
        with open(temp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # make the rename itself durable
    finally:
        os.close(folder)


def read_checkpoint(path: str | Path, required: tuple[str, ...] = ("model", "model_config")) -> dict:
    """Load a checkpoint (tensors and plain containers only) and check it has the `required` keys.
    Raises FileNotFoundError when absent and CheckpointError, naming the file, when unreadable."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated and cannot be read (the file is empty)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, garbage bytes, foreign pickle: all mean an unusable file
        detail = (str(err).splitlines() or [""])[0][:200]
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated and cannot be read "
                              f"({type(err).__name__}: {detail})") from err
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} is not an ssog_lab checkpoint (no format={CHECKPOINT_FORMAT!r})")
    missing = [key for key in required if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing} (a weights-only file cannot be resumed)")
    return state


def _model_from_state(state: dict, path: Path) -> tuple[ViT, ViTConfig]:
    try:
        config = ViTConfig(**state["model_config"])
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint {path} has an invalid model config: {err}") from err
    model = ViT(config)
    try:
        model.load_state_dict({k: v.float() for k, v in state["model"].items()})
    except (RuntimeError, AttributeError) as err:
        raise CheckpointError(f"checkpoint {path}: its weights do not fit its model config "
                              f"({' '.join(str(err).split())[:400]})") from err
    return model, config


def load_model(path: str | Path) -> tuple[ViT, ViTConfig]:
    """(model in eval mode, float32 on CPU, and its ViTConfig) from a training checkpoint or a weights file."""
    state = read_checkpoint(path)
    model, config = _model_from_state(state, Path(path))
    return model.eval(), config


def save_weights(model: nn.Module, path: str | Path, dtype: torch.dtype = torch.float32, **metadata) -> None:
    """A small weights-only file that load_model reads: state dict in `dtype`, model config, metadata
    (e.g. test_accuracy, command), written atomically."""
    module = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    weights = {k: v.detach().to("cpu", dtype if v.is_floating_point() else v.dtype).clone()
               for k, v in module.state_dict().items()}
    atomic_save({"format": CHECKPOINT_FORMAT, "model": weights,
                 "model_config": dataclasses.asdict(module.config), **metadata}, path)


def rng_state() -> dict:
    """This process's torch, CUDA, numpy and python RNG states as tensors and plain containers."""
    np_state = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": {"kind": np_state[0], "keys": torch.from_numpy(np_state[1].astype(np.int64)),
                      "pos": np_state[2], "has_gauss": np_state[3], "gauss": np_state[4]},
            "python": random.getstate()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


@dataclass
class TrainState:
    """Where training stands: the next (epoch, batch), the global step, the partial sums
    (summed loss, correct, seen) of the current epoch and of the current log window (this rank's
    share; rank 0 carries the all-reduced ones after a resume), the window's image count, the records."""

    epoch: int = 0
    batch: int = 0
    step: int = 0
    epoch_sums: Tensor = field(default_factory=lambda: torch.zeros(3, dtype=torch.float64))
    window: Tensor = field(default_factory=lambda: torch.zeros(3, dtype=torch.float64))
    window_images: int = 0
    history: list[dict] = field(default_factory=list)

    def advance(self, sums: Tensor, images: int) -> None:
        self.batch, self.step = self.batch + 1, self.step + 1
        self.epoch_sums += sums
        self.window += sums
        self.window_images += images

    def next_epoch(self) -> None:
        self.epoch, self.batch = self.epoch + 1, 0
        self.epoch_sums.zero_()

    def stopped(self, config: TrainConfig) -> bool:
        return config.max_steps is not None and self.step >= config.max_steps

    def to_checkpoint(self, sums: Tensor) -> dict:
        """The state's entries of a checkpoint; `sums` (6,) = all-reduced epoch_sums then window."""
        return {"position": {"epoch": self.epoch, "batch": self.batch, "step": self.step},
                "epoch_sums": sums[:3], "window": {"sums": sums[3:], "images": self.window_images},
                "history": self.history}

    @classmethod
    def from_checkpoint(cls, state: dict, rank: int) -> TrainState:
        epoch, batch, step = (state["position"][k] for k in ("epoch", "batch", "step"))
        window = state.get("window", {"sums": torch.zeros(3, dtype=torch.float64), "images": 0})  # older files
        own = rank == 0  # the all-reduced partial sums live on rank 0 only
        return cls(epoch, batch, step, state["epoch_sums"].clone() if own else torch.zeros(3, dtype=torch.float64),
                   window["sums"].clone() if own else torch.zeros(3, dtype=torch.float64),
                   window["images"], list(state["history"]))


def training_checkpoint(module: nn.Module, optimizer, scheduler, scaler, rngs: list[dict], state: TrainState,
                        sums: Tensor, config: TrainConfig) -> dict:
    """Everything resume needs, as one dict of tensors and plain containers."""
    return {"format": CHECKPOINT_FORMAT, "model": module.state_dict(),
            "model_config": dataclasses.asdict(module.config), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": rngs,
            "train_config": dataclasses.asdict(config), **state.to_checkpoint(sums)}


RESUME_KEYS = ("model", "model_config", "optimizer", "scheduler", "rng", "position", "train_config")


def resume(path: Path, module: nn.Module, optimizer, scheduler, scaler, config: TrainConfig, rank: int,
           world: int) -> TrainState | None:
    """Load `path` into the model, optimizer, scheduler, scaler and RNGs after checking it belongs to
    this model, recipe and world size; None (with a warning) when there is no checkpoint yet."""
    if not path.is_file():
        warnings.warn(f"no checkpoint at {path}: starting from scratch", stacklevel=3)
        return None
    state = read_checkpoint(path, required=RESUME_KEYS)
    if state["model_config"] != dataclasses.asdict(module.config):
        raise CheckpointError(f"checkpoint {path} was made for a different model config")
    stored = upgrade(state["train_config"])
    changed = [f for f in TRAJECTORY_FIELDS if stored.get(f) != getattr(config, f)]
    if changed:
        raise CheckpointError(f"checkpoint {path} was made with different {changed}; resume needs the same recipe")
    if len(state["rng"]) != world:
        raise CheckpointError(f"checkpoint {path} holds RNG states for {len(state['rng'])} rank(s), "
                              f"this run has {world}")
    module.load_state_dict(state["model"])
    try:
        optimizer.load_state_dict(state["optimizer"])
    except ValueError as err:  # e.g. a different parameter grouping
        raise CheckpointError(f"checkpoint {path}: its optimizer state does not fit ({err})") from err
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][rank])
    return TrainState.from_checkpoint(state, rank)
