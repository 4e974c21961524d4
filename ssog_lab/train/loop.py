"""One training loop for every model: AdamW, linear warm-up then cosine decay, exact resume, data parallel.

    python -m ssog_lab train --preset nano --depth discrete --mixer ssog-steered --dataset mnist5k
    torchrun --nproc_per_node=2 -m ssog_lab train ...          (DDP: gloo on CPU, nccl on GPU)

Python API (used by the training notebook):

    history = fit(model, train_set, test_set, TrainConfig(epochs=5), on_log=print, out_dir="runs/x")
    accuracy = evaluate(model, test_set)
    model, config = load_model("data/checkpoints/nano_ssog_steered_mnist5k.pt")

Exact resume. The data order of epoch e is a permutation drawn from a generator seeded with (seed, e),
so it is a pure function of the position; a checkpoint holds the position (epoch, next batch), the
model, optimizer, scheduler and grad-scaler states and every RNG state (torch, CUDA, numpy, python;
per rank), which drive the augmentation. Resuming from a checkpoint written after step k therefore
continues bit for bit as the uninterrupted run would. Checkpoints are written atomically (temp file in
the same folder, fsync, os.replace), at every epoch end, every `save_every` steps and when `max_steps`
stops the run.

Data parallel: each global batch of `batch_size` images is cut into `world_size` equal, disjoint
shards (rank r takes every world_size-th index), DDP averages the gradients, so one step equals a
single-process step on the whole batch. Only rank 0 writes checkpoints and logs.
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import datetime
import json
import math
import os
import random
import shlex
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from .. import data as datasets
from ..models import DEPTHS, MIXERS, PRESETS, ViT, ViTConfig, build_model

__all__ = ["TrainConfig", "fit", "evaluate", "load_model", "save_weights", "read_checkpoint", "atomic_save",
           "CheckpointError", "main", "LOG_COLUMNS"]

CHECKPOINT_FORMAT = "ssog_lab-checkpoint-v1"
CHECKPOINT_NAME = "checkpoint.pt"
LOG_COLUMNS = ("kind", "epoch", "step", "loss", "accuracy", "train_loss", "train_accuracy", "test_loss",
               "test_accuracy", "lr", "images_per_s", "time_s")
# Fields that define the training trajectory: a resumed run must use the same values.
TRAJECTORY_FIELDS = ("epochs", "batch_size", "lr", "weight_decay", "warmup_epochs", "min_lr_ratio",
                     "label_smoothing", "grad_clip", "seed", "amp")
AMP_CHOICES = ("auto", "off", "bf16", "fp16")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""


@dataclass
class TrainConfig:
    """Training recipe. lr is the peak learning rate, reached after `warmup_epochs` of linear warm-up
    and decayed by a cosine to lr·min_lr_ratio at the end of `epochs`. batch_size is global (split
    over data-parallel ranks). max_steps stops early (the schedule still spans `epochs`), save_every
    adds step-interval checkpoints (0 = epoch ends only). amp: "auto" (bf16 on CUDA when supported,
    else fp16; off on CPU), "off", "bf16", "fp16" (the last two need CUDA)."""

    epochs: int = 10
    batch_size: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    min_lr_ratio: float = 0.0
    label_smoothing: float = 0.0
    grad_clip: float | None = 1.0
    seed: int = 0
    amp: str = "auto"
    log_every: int = 10
    save_every: int = 0
    max_steps: int | None = None
    eval_batch_size: int = 500
    device: str = "auto"
    progress: bool = True

    def __post_init__(self):
        if self.amp not in AMP_CHOICES:
            raise ValueError(f"amp must be one of {AMP_CHOICES}, got {self.amp!r}")
        for name in ("epochs", "batch_size", "log_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.save_every < 0 or (self.max_steps is not None and self.max_steps < 1):
            raise ValueError(f"save_every must be ≥ 0 and max_steps ≥ 1 or None, got {self.save_every}, "
                             f"{self.max_steps}")


# ---------------------------------------------------------------------------------------------- checkpoints

def atomic_save(obj: object, path: str | Path) -> None:
    """torch.save to a temp file in path's folder, fsync, then os.replace: a crash at any moment leaves
    either the old file or the new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, garbage bytes, foreign pickle: all mean an unusable file
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated and cannot be read "
                              f"({type(err).__name__}: {str(err).splitlines()[0][:200]})") from err
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


def _rng_state() -> dict:
    np_state = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": {"kind": np_state[0], "keys": torch.from_numpy(np_state[1].astype(np.int64)),
                      "pos": np_state[2], "has_gauss": np_state[3], "gauss": np_state[4]},
            "python": random.getstate()}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


# ---------------------------------------------------------------------------------------------- the loop

def epoch_order(seed: int, epoch: int, n: int) -> Tensor:
    """The data order of `epoch`: a permutation of range(n) from a generator seeded with (seed, epoch)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=generator)


def _batch(dataset: Dataset, indices: Tensor, device: torch.device) -> tuple[Tensor, Tensor]:
    """Fetch and stack items in the calling process (so the augmentation draws from the saved RNG)."""
    items = [dataset[int(i)] for i in indices]
    images = torch.stack([image for image, _ in items])  # (b, C, H, W)
    labels = torch.stack([torch.as_tensor(label) for _, label in items])  # (b,)
    return images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def _autocast(device: torch.device, amp: str) -> tuple[Callable, torch.dtype | None]:
    """The autocast context factory and dtype for the `amp` setting on `device`."""
    if device.type != "cuda":
        if amp in ("bf16", "fp16"):
            raise ValueError(f"amp={amp!r} needs a CUDA device (got {device}); use amp='auto' or 'off'")
        return nullcontext, None
    if amp == "off":
        return nullcontext, None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp) or (
        torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return (lambda: torch.autocast("cuda", dtype=dtype)), dtype


def _world() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() else (0, 1)


def _device(choice: str) -> torch.device:
    if choice != "auto":
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


@torch.no_grad()
def _evaluate_counts(model: nn.Module, dataset: Dataset, indices: Tensor, batch_size: int, device: torch.device,
                     autocast: Callable) -> Tensor:
    """(summed loss, correct, count) over dataset[indices] as a float64 tensor on `device`."""
    was_training = model.training
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    for start in range(0, len(indices), batch_size):
        images, labels = _batch(dataset, indices[start:start + batch_size], device)
        with autocast():
            logits = model(images)  # (b, classes)
        totals[0] += F.cross_entropy(logits.float(), labels, reduction="sum")
        totals[1] += (logits.argmax(-1) == labels).sum()
        totals[2] += labels.numel()
    model.train(was_training)
    return totals


def evaluate(model: nn.Module, dataset: Dataset, batch_size: int = 500, device: str | torch.device | None = None
             ) -> float:
    """Top-1 accuracy (fraction in [0, 1]) of `model` on `dataset`, on the model's device by default."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    counts = _evaluate_counts(model, dataset, torch.arange(len(dataset)), batch_size, device, nullcontext)
    return float(counts[1] / counts[2])


class _MetricsWriter:
    """metrics.jsonl and metrics.csv in the run folder (rank 0 only), rewritten from `history` on resume."""

    def __init__(self, out_dir: Path | None, history: list[dict]):
        self.paths = None if out_dir is None else (out_dir / "metrics.jsonl", out_dir / "metrics.csv")
        if self.paths is None:
            return
        with open(self.paths[0], "w"), open(self.paths[1], "w", newline="") as cf:
            csv.DictWriter(cf, LOG_COLUMNS, extrasaction="ignore").writeheader()
        for record in history:
            self.write(record)

    def write(self, record: dict) -> None:
        if self.paths is None:
            return
        with open(self.paths[0], "a") as jf:
            jf.write(json.dumps(record) + "\n")
        with open(self.paths[1], "a", newline="") as cf:
            csv.DictWriter(cf, LOG_COLUMNS, extrasaction="ignore").writerow(record)


def _progress(total: int, desc: str, enabled: bool, position: int, initial: int = 0, leave: bool = True):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, position=position, initial=initial, leave=leave,
                dynamic_ncols=True)


def fit(model: nn.Module, train_set: Dataset, test_set: Dataset | None, config: TrainConfig,
        on_log: Callable[[dict], None] | None = None, out_dir: str | Path | None = None,
        resume: bool = False) -> list[dict]:
    """Train `model` on `train_set`; return the history (list of records, also passed to on_log).

    Records: {"kind": "step", "epoch" (float, fractional progress), "step", "loss", "accuracy" (the
    batch's), "lr", "images_per_s", "time_s"} every `log_every` steps, and {"kind": "epoch", "epoch"
    (completed epochs), "step", "train_loss", "train_accuracy" (over the epoch), "test_loss",
    "test_accuracy" (None without test_set), "lr", "images_per_s", "time_s"} after each epoch.
    out_dir gets checkpoint.pt, metrics.jsonl and metrics.csv; resume=True continues from
    out_dir/checkpoint.pt. Under torch.distributed (torchrun), wraps the model in DDP itself.
    """
    rank, world = _world()
    device = _device(config.device)
    autocast, amp_dtype = _autocast(device, config.amp)
    out_dir = Path(out_dir) if out_dir is not None else None
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (where checkpoint.pt lives)")
    if config.batch_size % world:
        raise ValueError(f"batch_size={config.batch_size} must be a multiple of the world size {world}")
    steps_per_epoch = len(train_set) // config.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"batch_size={config.batch_size} exceeds the training set ({len(train_set)} images)")
    total_steps = config.epochs * steps_per_epoch
    warmup_steps = round(config.warmup_epochs * steps_per_epoch)

    module = model.to(device)
    decay = [p for n, p in module.named_parameters() if p.dim() >= 2 and n.endswith("weight")]
    no_decay = [p for n, p in module.named_parameters() if not (p.dim() >= 2 and n.endswith("weight"))]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr)

    def lr_factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    epoch, batch_index, step, history = 0, 0, 0, []
    epoch_sums = torch.zeros(3, dtype=torch.float64)  # (summed loss, correct, seen) over the current epoch

    checkpoint_path = out_dir / CHECKPOINT_NAME if out_dir is not None else None
    if resume and checkpoint_path.is_file():
        state = read_checkpoint(checkpoint_path, required=("model", "model_config", "optimizer", "scheduler",
                                                           "rng", "position", "train_config"))
        if state["model_config"] != dataclasses.asdict(module.config):
            raise CheckpointError(f"checkpoint {checkpoint_path} was made for a different model config")
        changed = [f for f in TRAJECTORY_FIELDS if state["train_config"].get(f) != getattr(config, f)]
        if changed:
            raise CheckpointError(f"checkpoint {checkpoint_path} was made with different {changed}; resume needs "
                                  "the same recipe")
        if len(state["rng"]) != world:
            raise CheckpointError(f"checkpoint {checkpoint_path} holds RNG states for {len(state['rng'])} "
                                  f"rank(s), this run has {world}")
        module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        _set_rng_state(state["rng"][rank])
        epoch, batch_index, step = (state["position"][k] for k in ("epoch", "batch", "step"))
        epoch_sums = state["epoch_sums"].clone() if rank == 0 else torch.zeros_like(epoch_sums)
        history = list(state["history"])
    else:
        if resume:
            warnings.warn(f"no checkpoint at {checkpoint_path}: starting from scratch", stacklevel=2)
        torch.manual_seed(config.seed + rank)
        np.random.seed(config.seed + rank)
        random.seed(config.seed + rank)

    net = nn.parallel.DistributedDataParallel(module, device_ids=[device] if device.type == "cuda" else None) \
        if world > 1 else module
    if rank == 0 and out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    writer = _MetricsWriter(out_dir if rank == 0 else None, history)

    def log(record: dict) -> None:
        history.append(record)
        if rank == 0:
            writer.write(record)
            if on_log is not None:
                on_log(record)

    def save() -> None:
        if out_dir is None:
            return
        states = [None] * world
        if world > 1:
            dist.all_gather_object(states, _rng_state())
        else:
            states = [_rng_state()]
        sums = reduced(epoch_sums.clone())  # all ranks' partial epoch sums; rank 0 carries them on resume
        if rank == 0:
            atomic_save({"format": CHECKPOINT_FORMAT, "model": module.state_dict(),
                         "model_config": dataclasses.asdict(module.config), "optimizer": optimizer.state_dict(),
                         "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": states,
                         "position": {"epoch": epoch, "batch": batch_index, "step": step},
                         "epoch_sums": sums, "history": history,
                         "train_config": dataclasses.asdict(config)}, checkpoint_path)

    def reduced(t: Tensor) -> Tensor:
        if world > 1:
            t = t.to(device)
            dist.all_reduce(t)
        return t.cpu()

    show = config.progress and rank == 0
    epochs_bar = _progress(config.epochs, "epochs", show, 0, initial=epoch)
    started, window_start, window_images = time.perf_counter(), time.perf_counter(), 0
    window = torch.zeros(3, dtype=torch.float64)
    stop = config.max_steps is not None and step >= config.max_steps
    net.train()
    while epoch < config.epochs and not stop:
        order = epoch_order(config.seed, epoch, len(train_set))
        batches_bar = _progress(steps_per_epoch, f"epoch {epoch + 1}", show, 1, initial=batch_index, leave=False)
        epoch_start, epoch_images = time.perf_counter(), 0
        while batch_index < steps_per_epoch:
            global_batch = order[batch_index * config.batch_size:(batch_index + 1) * config.batch_size]
            images, labels = _batch(train_set, global_batch[rank::world], device)  # this rank's shard
            with autocast():
                logits = net(images)  # (b, classes)
                loss = F.cross_entropy(logits.float(), labels, label_smoothing=config.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if config.grad_clip is not None:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(module.parameters(), config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            lr = scheduler.get_last_lr()[0]
            scheduler.step()
            batch_index, step = batch_index + 1, step + 1
            sums = torch.tensor([loss.item() * labels.numel(), (logits.argmax(-1) == labels).sum().item(),
                                 labels.numel()], dtype=torch.float64)
            epoch_sums += sums
            window += sums
            window_images += config.batch_size
            epoch_images += config.batch_size
            batches_bar.update()
            if step % config.log_every == 0:
                w = reduced(window.clone())
                rate = window_images / (time.perf_counter() - window_start)
                log({"kind": "step", "epoch": epoch + batch_index / steps_per_epoch, "step": step,
                     "loss": float(w[0] / w[2]), "accuracy": float(w[1] / w[2]), "lr": lr,
                     "images_per_s": rate, "time_s": time.perf_counter() - started})
                batches_bar.set_postfix(loss=f"{w[0] / w[2]:.3f}", acc=f"{w[1] / w[2]:.3f}", img_s=f"{rate:.0f}")
                window.zero_()
                window_start, window_images = time.perf_counter(), 0
            stop = config.max_steps is not None and step >= config.max_steps
            if stop or (config.save_every and step % config.save_every == 0 and batch_index < steps_per_epoch):
                save()
            if stop:
                break
        batches_bar.close()
        if stop and batch_index < steps_per_epoch:
            break
        totals = reduced(epoch_sums.clone())
        test = (reduced(_evaluate_counts(module, test_set, torch.arange(len(test_set))[rank::world],
                                         config.eval_batch_size, device, autocast))
                if test_set is not None else None)
        epoch, batch_index = epoch + 1, 0
        epoch_sums.zero_()
        log({"kind": "epoch", "epoch": epoch, "step": step, "train_loss": float(totals[0] / totals[2]),
             "train_accuracy": float(totals[1] / totals[2]),
             "test_loss": float(test[0] / test[2]) if test is not None else None,
             "test_accuracy": float(test[1] / test[2]) if test is not None else None,
             "lr": scheduler.get_last_lr()[0], "images_per_s": epoch_images / (time.perf_counter() - epoch_start),
             "time_s": time.perf_counter() - started})
        epochs_bar.update()
        epochs_bar.set_postfix(test_acc="-" if test is None else f"{test[1] / test[2]:.4f}")
        save()
    epochs_bar.close()
    return history


# ---------------------------------------------------------------------------------------------- CLI

def _parse_override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set expects KEY=VALUE (a ViTConfig field), got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value  # a bare word such as rk4


def build_parser() -> argparse.ArgumentParser:
    defaults = TrainConfig()
    p = argparse.ArgumentParser(prog="python -m ssog_lab train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("model")
    m.add_argument("--preset", default="nano", help=f"one of {tuple(PRESETS)}")
    m.add_argument("--depth", default="discrete", choices=DEPTHS)
    m.add_argument("--mixer", default="ssog-steered", choices=MIXERS)
    m.add_argument("--set", dest="overrides", type=_parse_override, action="append", default=[], metavar="KEY=VALUE",
                   help="ViTConfig override, repeatable (e.g. --set ssog_heads=16 --set ode_method=euler); in_chans "
                        "and num_classes follow the data set unless set")
    d = p.add_argument_group("data")
    d.add_argument("--dataset", default="mnist5k", choices=datasets.DATASETS)
    d.add_argument("--data-dir", default="data", help="folder holding cifar-100-python.tar.gz or cifar-100-python/")
    d.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                   help="training augmentation (default: cifar100 crop+flip on, mnist5k off)")
    t = p.add_argument_group("training")
    t.add_argument("--epochs", type=int, default=defaults.epochs)
    t.add_argument("--batch-size", type=int, default=defaults.batch_size, help="global batch (all ranks)")
    t.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    t.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    t.add_argument("--warmup-epochs", type=float, default=defaults.warmup_epochs)
    t.add_argument("--label-smoothing", type=float, default=defaults.label_smoothing)
    t.add_argument("--grad-clip", type=float, default=defaults.grad_clip, help="≤ 0 disables")
    t.add_argument("--seed", type=int, default=defaults.seed)
    t.add_argument("--amp", default=defaults.amp, choices=AMP_CHOICES)
    t.add_argument("--device", default=defaults.device, help="auto, cpu, cuda, cuda:1, ...")
    t.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (and checkpoint)")
    t.add_argument("--save-every", type=int, default=0, help="also checkpoint every N steps")
    t.add_argument("--log-every", type=int, default=defaults.log_every)
    t.add_argument("--eval-batch-size", type=int, default=defaults.eval_batch_size)
    o = p.add_argument_group("output")
    o.add_argument("--out", default=None, help="run folder (default runs/<preset>-<depth>-<mixer>-<dataset>-s<seed>)")
    o.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    o.add_argument("--export", default=None, metavar="PATH", help="also write a small weights-only file here "
                   "(float32, model config, test accuracy, command) plus PATH with .json")
    o.add_argument("--no-progress", dest="progress", action="store_false", help="no tqdm bars")
    return p


def main(argv: list[str] | None = None) -> int:
    """`python -m ssog_lab train`: build data and model, fit, report the final test accuracy."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() and args.device != "cpu" else "gloo")
        if torch.cuda.is_available() and args.device != "cpu":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    try:
        return _run(args, argv)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    overrides = dict(args.overrides)
    if args.preset not in PRESETS:
        raise ValueError(f"--preset must be one of {tuple(PRESETS)}, got {args.preset!r}")
    image_size = overrides.get("image_size", PRESETS[args.preset]["image_size"])
    train_set = datasets.load_dataset(args.dataset, "train", args.data_dir, image_size, args.augment)
    test_set = datasets.load_dataset(args.dataset, "test", args.data_dir, image_size)
    overrides.setdefault("in_chans", train_set.image_shape[0])
    overrides.setdefault("num_classes", train_set.num_classes)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay,
                         warmup_epochs=args.warmup_epochs, label_smoothing=args.label_smoothing,
                         grad_clip=args.grad_clip if args.grad_clip > 0 else None, seed=args.seed, amp=args.amp,
                         log_every=args.log_every, save_every=args.save_every, max_steps=args.max_steps,
                         eval_batch_size=args.eval_batch_size, device=args.device, progress=args.progress)
    torch.manual_seed(config.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = build_model(args.preset, depth=args.depth, mixer=args.mixer, **overrides)
    out = Path(args.out or f"runs/{args.preset}-{args.depth}-{args.mixer}-{args.dataset}-s{args.seed}")
    rank, _ = _world()
    if rank == 0:
        parameters = sum(p.numel() for p in model.parameters())
        print(f"{args.preset}/{args.depth}/{args.mixer}: {parameters:,} parameters; {args.dataset}: "
              f"{len(train_set)} train, {len(test_set)} test; run folder {out}", file=sys.stderr)
    history = fit(model, train_set, test_set, config, out_dir=out, resume=args.resume)
    epochs = [r for r in history if r["kind"] == "epoch"]
    accuracy = epochs[-1]["test_accuracy"] if epochs else None
    if rank == 0:
        summary = {"preset": args.preset, "depth": args.depth, "mixer": args.mixer, "dataset": args.dataset,
                   "seed": args.seed, "parameters": sum(p.numel() for p in model.parameters()),
                   "epochs_done": len(epochs), "test_accuracy": accuracy,
                   "train_seconds": epochs[-1]["time_s"] if epochs else None}
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps(summary))
        if args.export:
            command = "python -m ssog_lab train " + shlex.join(argv)
            metadata = {**summary, "command": command, "date": datetime.date.today().isoformat(),
                        "torch": torch.__version__}
            save_weights(model, args.export, test_accuracy=accuracy, command=command, train_config=dataclasses.asdict(
                config))
            Path(args.export).with_suffix(".json").write_text(json.dumps(metadata, indent=1) + "\n")
    return 0
