"""Checkpoints: atomic writes, checked reads, and the one training-state object whose schema lives here.

A training checkpoint is a plain dict of tensors and containers (loadable with weights_only=True):
format, model, model_config, optimizer, scheduler, scaler, rng (one entry per rank), train_config and
the TrainState fields (position, epoch_sums, window, history). A weights-only file (save_weights)
has format, model, model_config and free metadata; load_model reads both kinds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ..models import ViT, ViTConfig
from .atomic import atomic_write
from .config import TRAJECTORY_FIELDS, TrainConfig

FORMAT_PREFIX = "ssog_lab-checkpoint-v"
CHECKPOINT_FORMAT = FORMAT_PREFIX + "1"
CHECKPOINT_NAME = "checkpoint.pt"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""


def atomic_save(obj: object, path: str | Path) -> None:
    """torch.save into memory, then the one atomic writer (ssog_lab/train/atomic.py): a crash leaves the old
    file or the new one, and a full disk is an OSError naming `path` (torch.save writing to the file itself
    would wrap ENOSPC in a RuntimeError)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write(path, buffer.getbuffer())


def read_checkpoint(path: str | Path, required: tuple[str, ...] = ("model", "model_config")) -> dict:
    """Load a checkpoint (tensors and plain containers only) and check it has the `required` keys.
    Raises FileNotFoundError when absent and CheckpointError, naming the file, when unreadable."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder, not a file")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated and cannot be read (the file is empty)")
    try:
        file = open(path, "rb")
    except OSError as err:  # the file is there but cannot be opened (permissions)
        raise CheckpointError(f"checkpoint {path} cannot be read: {err.strerror or err}") from err
    try:
        with file:
            state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, garbage bytes, foreign pickle: all mean an unusable file
        detail = (str(err).splitlines() or [""])[0][:200]
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated and cannot be read "
                              f"({type(err).__name__}: {detail})") from err
    _check_format(state, path)
    missing = [key for key in required if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing} (a weights-only file, or a training checkpoint "
                              "of an older ssog_lab, cannot be resumed)")
    _check_weights(state["model"], path)
    return state


def _check_format(state: object, path: Path) -> None:
    """CheckpointError unless `state` is a dict of this format; another version's format is told as such."""
    tag = state.get("format") if isinstance(state, dict) else None
    if tag == CHECKPOINT_FORMAT:
        return
    version = tag[len(FORMAT_PREFIX):] if isinstance(tag, str) and tag.startswith(FORMAT_PREFIX) else ""
    if version.isdigit():
        newer = int(version) > int(CHECKPOINT_FORMAT[len(FORMAT_PREFIX):])
        raise CheckpointError(f"checkpoint {path} has format {tag!r}, written by {'a newer' if newer else 'an older'} "
                              f"ssog_lab; this version reads {CHECKPOINT_FORMAT!r}"
                              + (" (update ssog_lab to read it)" if newer else ""))
    raise CheckpointError(f"checkpoint {path} is not an ssog_lab checkpoint (no format={CHECKPOINT_FORMAT!r})")


def _check_weights(weights: object, path: Path) -> None:
    """CheckpointError unless `weights` maps names to tensors, all finite (NaN weights would load silently)."""
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise CheckpointError(f"checkpoint {path}: its model entry is not a dict of tensors")
    bad = [k for k, v in weights.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f"checkpoint {path} holds non-finite weights (NaN or inf) in {bad[:5]}; it cannot "
                              "be used (training never saves such weights, so the file was changed or damaged)")


def _stored_config(state: dict, path: Path) -> ViTConfig:
    """The checkpoint's model config, checked field by field by ViTConfig (the message names the field)."""
    try:
        return ViTConfig(**state["model_config"])
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint {path} has an invalid model config: {err}") from err


def _check_shapes(weights: dict, model: nn.Module, path: Path) -> None:
    """CheckpointError naming the first entries whose shapes differ from `model`'s (which may live on meta)."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in weights.items()}
    if found != expected:
        wrong = sorted(k for k in expected.keys() | found.keys() if found.get(k) != expected.get(k))
        detail = "; ".join(f"{k}: {found.get(k, 'missing')} (expected {expected.get(k, 'none')})" for k in wrong[:3])
        raise CheckpointError(f"checkpoint {path}: its weights do not fit its model config ({detail})")


def _model_from_state(state: dict, path: Path) -> tuple[ViT, ViTConfig]:
    """The model its config describes, with its weights; the shapes are compared on the meta device first, so a
    config claiming a huge model costs no memory."""
    config = _stored_config(state, path)
    with torch.device("meta"):
        _check_shapes(state["model"], ViT(config), path)
    model = ViT(config)
    model.load_state_dict({k: v.float() for k, v in state["model"].items()})
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
        """ValueError (resume names the file) when the position or a partial sum is of the wrong kind."""
        epoch, batch, step = (state["position"][k] for k in ("epoch", "batch", "step"))
        window = state["window"]
        if not all(isinstance(v, int) and v >= 0 for v in (epoch, batch, step, window["images"])):
            raise ValueError(f"position {state['position']} must hold integers ≥ 0")
        if any(not isinstance(v, Tensor) or v.shape != (3,) or not bool(torch.isfinite(v).all())
               for v in (state["epoch_sums"], window["sums"])):
            raise ValueError("epoch_sums and window sums must be finite tensors of shape (3,)")
        if not isinstance(state["history"], list) or not all(isinstance(r, dict) for r in state["history"]):
            raise ValueError("history must be a list of records (dicts)")
        own = rank == 0  # the all-reduced partial sums live on rank 0 only
        return cls(epoch, batch, step, state["epoch_sums"].clone() if own else torch.zeros(3, dtype=torch.float64),
                   window["sums"].clone() if own else torch.zeros(3, dtype=torch.float64),
                   window["images"], list(state["history"]))


def data_signature(dataset) -> dict:
    """What fixes the training data of a run, stored in its checkpoint for resume to compare: the data set's
    name, size, stored image shape, transform (its repr, which holds the resize and the augmentation; by its
    type where the repr is a memory address) and a SHA-256 of its image and label tensors (where it has them)."""
    images, labels = getattr(dataset, "images", None), getattr(dataset, "labels", None)
    transform = repr(getattr(dataset, "transform", None))
    if " at 0x" in transform:  # a default repr (a function, a plain object) holds an address that changes per run
        transform = type(getattr(dataset, "transform", None)).__qualname__
    signature = {"name": getattr(dataset, "name", type(dataset).__name__), "images": len(dataset),
                 "image_shape": list(images.shape[1:]) if isinstance(images, Tensor) else None,
                 "transform": transform}
    if isinstance(images, Tensor) and isinstance(labels, Tensor):
        digest = hashlib.sha256()
        for tensor in (images, labels):
            digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
        signature["sha256"] = digest.hexdigest()
    return signature


def training_checkpoint(module: nn.Module, optimizer, scheduler, scaler, rngs: list[dict], state: TrainState,
                        sums: Tensor, config: TrainConfig, data: dict) -> dict:
    """Everything resume needs, as one dict of tensors and plain containers; `data` is data_signature's."""
    return {"format": CHECKPOINT_FORMAT, "model": module.state_dict(),
            "model_config": dataclasses.asdict(module.config), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": rngs,
            "train_config": dataclasses.asdict(config), "data": data, **state.to_checkpoint(sums)}


RESUME_KEYS = ("model", "model_config", "optimizer", "scheduler", "rng", "position", "window", "train_config",
               "data")


def _differences(stored: dict, current: dict, names) -> str:
    """ "name stored → current" for each of `names` whose values differ ('' when none)."""
    return ", ".join(f"{k} {stored.get(k, 'absent')!r} → {current.get(k, 'absent')!r}" for k in names
                     if stored.get(k, "absent") != current.get(k, "absent"))


def _check_same_run(state: dict, path: Path, model: dict, config: TrainConfig, world: int, data: dict) -> None:
    """CheckpointError, naming each differing field with its stored and current value, unless the checkpoint
    continues this run: the same model config, trajectory fields of the recipe, training data and world size."""
    if not isinstance(state["train_config"], dict):
        raise CheckpointError(f"checkpoint {path} is damaged: its train_config is not a dict")
    _stored_config(state, path)
    changed = _differences(state["model_config"], model, sorted(model.keys() | state["model_config"].keys()))
    if changed:
        raise CheckpointError(f"checkpoint {path} was made for a different model ({changed}); resume needs the "
                              "same model")
    changed = _differences(state["train_config"], dataclasses.asdict(config), TRAJECTORY_FIELDS)
    if changed:
        raise CheckpointError(f"checkpoint {path} was made with a different recipe ({changed}); resume needs the "
                              "same recipe")
    if not isinstance(state["data"], dict):
        raise CheckpointError(f"checkpoint {path} is damaged: its data is not a dict")
    changed = _differences(state["data"], data, sorted(data.keys() | state["data"].keys()))
    if changed:
        raise CheckpointError(f"checkpoint {path} was made on different training data ({changed}); resume "
                              "needs the same data set, image size and augmentation")
    if len(state["rng"]) != world:
        raise CheckpointError(f"checkpoint {path} holds RNG states for {len(state['rng'])} rank(s), "
                              f"this run has {world}")


def _check_optimizer(optimizer, path: Path) -> None:
    """Each loaded moment has its parameter's shape and is finite (load_state_dict checks neither)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            for name, value in optimizer.state.get(p, {}).items():
                if isinstance(value, Tensor) and value.dim() and (value.shape != p.shape
                                                                  or not bool(torch.isfinite(value).all())):
                    raise CheckpointError(f"checkpoint {path}: an optimizer {name} of shape {tuple(value.shape)} "
                                          f"does not fit its parameter {tuple(p.shape)} or is not finite")


def resume(path: Path, module: nn.Module, optimizer, scheduler, scaler, config: TrainConfig, rank: int,
           world: int, data: dict) -> TrainState | None:
    """Load `path` into the model, optimizer, scheduler, scaler and RNGs after checking it continues this
    run (_check_same_run); None (with a warning) when there is no checkpoint yet. Any entry of the wrong
    kind or shape is a CheckpointError naming the file."""
    if not path.exists():  # a folder in its place is read_checkpoint's error, not a fresh start
        warnings.warn(f"no checkpoint at {path}: starting from scratch", stacklevel=3)
        return None
    state = read_checkpoint(path, required=RESUME_KEYS)
    try:
        _check_same_run(state, path, dataclasses.asdict(module.config), config, world, data)
        resumed = TrainState.from_checkpoint(state, rank)
        _check_shapes(state["model"], module, path)
        module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        _check_optimizer(optimizer, path)
        scheduler.load_state_dict(state["scheduler"])
        if scheduler.last_epoch != resumed.step:  # LambdaLR takes any dict without a check
            raise CheckpointError(f"checkpoint {path}: its scheduler is at step {scheduler.last_epoch}, its position "
                                  f"at step {resumed.step}")
        scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"][rank])
        return resumed
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError, IndexError) as err:
        detail = f"missing entry {err}" if isinstance(err, KeyError) else " ".join(str(err).split())[:300]
        raise CheckpointError(f"checkpoint {path} is damaged and cannot be resumed ({type(err).__name__}: "
                              f"{detail})") from err
