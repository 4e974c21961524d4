"""One training loop for every model: AdamW, linear warm-up then cosine decay, exact resume, data parallel.

    python -m ssog_lab train --preset nano --depth discrete --mixer ssog-steered --dataset mnist5k
    torchrun --nproc_per_node=2 -m ssog_lab train ...          (DDP: gloo on CPU, nccl on GPU)

Python API (used by the training notebook):

    history = fit(model, train_set, test_set, TrainConfig(epochs=5), on_log=print, out_dir="runs/x")
    accuracy = evaluate(model, test_set)
    model, config = load_model("data/checkpoints/nano_ssog_steered_mnist5k.pt")

Exact resume. The data order of epoch e is a permutation drawn from a generator seeded with (seed, e),
and each sample's augmentation from one seeded with (seed, e, position), so both are pure functions of
the position; a checkpoint holds the position (epoch, next batch), the model, optimizer, scheduler and
grad-scaler states, the partial sums of the epoch and of the log window, and every RNG state (per
rank). Resuming from a checkpoint written after step k therefore continues bit for bit as the
uninterrupted run would, logged records included. Checkpoints are written atomically (temp file in the
same folder, fsync, os.replace), at every epoch end, every `save_every` steps and when `max_steps` stops
the run; never after a non-finite loss, so the last checkpoint of a diverging run stays a good one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from ..ode import SolverDivergedError
from . import checkpoint, folder
from .checkpoint import CHECKPOINT_NAME, TrainState
from .config import TrainConfig
from .metrics import Logger
from .optim import Plan, build_optimizer
from .runtime import Runtime, epoch_order, evaluate_counts
from .split import hold_out


class DivergedError(FloatingPointError):
    """Training produced a non-finite loss or weights; the message names the step and the last checkpoint."""


def train_step(net: nn.Module, module: nn.Module, optimizer, scaler, images: Tensor, labels: Tensor,
               config: TrainConfig, rt: Runtime, step: int) -> Tensor:
    """One optimizer step on this rank's shard; returns (summed loss, correct, seen) as float64.
    Raises DivergedError (on every rank) before touching the weights when any rank's loss is not finite,
    or an adaptive ODE solver gave up on a non-finite state (ode.SolverDivergedError)."""
    try:
        with rt.autocast():
            logits = net(images)  # (b, classes)
            loss = F.cross_entropy(logits.float(), labels, label_smoothing=config.label_smoothing)
        value = loss.item()
    except SolverDivergedError:
        value = math.nan  # every rank still joins the check below
    if rt.any(not math.isfinite(value)):
        raise DivergedError(f"training diverged at step {step + 1}: the loss is not finite (here {value}); "
                            "lower the learning rate")
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    if config.grad_clip is not None:
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(module.parameters(), config.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    return torch.tensor([value * labels.numel(), (logits.argmax(-1) == labels).sum().item(), labels.numel()],
                        dtype=torch.float64)


def save(path: Path | None, state: TrainState, module: nn.Module, optimizer, scheduler, scaler,
         config: TrainConfig, rt: Runtime, data: dict) -> None:
    """Checkpoint (rank 0 writes; every rank joins the collectives), with `data` (checkpoint.data_signature).
    Non-finite weights are never saved."""
    if path is None:
        return
    if not all(bool(torch.isfinite(p).all()) for p in module.parameters()):  # equal on every rank under DDP
        raise DivergedError(f"training diverged at step {state.step}: the weights are not finite, so they are "
                            f"not saved (an earlier {path.name} in {path.parent} is kept); lower the learning rate")
    rngs = rt.gather_rng()
    sums = rt.reduce(torch.cat([state.epoch_sums, state.window]))  # (6,) all ranks' partial sums
    if rt.rank == 0:
        checkpoint.atomic_save(checkpoint.training_checkpoint(module, optimizer, scheduler, scaler, rngs, state,
                                                              sums, config, data), path)


def check_sets(model: nn.Module, train_set: Dataset, test_set: Dataset | None) -> dict:
    """ValueError, before any folder is made, for a set with no images, labels (a `labels` tensor) outside
    [0, num_classes) of the model's config, or images (an `images` tensor) with other than its in_chans
    channels (cross_entropy would stop with an IndexError or report NaN, the model at its first step);
    otherwise the training data's signature (checkpoint.data_signature)."""
    classes = getattr(getattr(model, "config", None), "num_classes", None)
    channels = getattr(getattr(model, "config", None), "in_chans", None)
    for name, dataset in (("training set", train_set), ("evaluation set", test_set)):
        if dataset is None:
            continue
        if len(dataset) == 0:
            raise ValueError(f"the {name} has 0 images")
        images, labels = getattr(dataset, "images", None), getattr(dataset, "labels", None)
        if channels is not None and isinstance(images, Tensor) and images.dim() == 4 and images.shape[1] != channels:
            raise ValueError(f"the {name} has {images.shape[1]}-channel images, but the model has in_chans={channels}")
        if classes is not None and isinstance(labels, Tensor) and (labels.min() < 0 or labels.max() >= classes):
            raise ValueError(f"the {name} has labels from {int(labels.min())} to {int(labels.max())}, but the model "
                             f"has num_classes={classes}: labels must lie in [0, {classes})")
    return checkpoint.data_signature(train_set)


def start(out_dir: Path | None, resume: bool, overwrite: bool, rt: Runtime) -> folder.RunLock | None:
    """Rank 0 prepares the run folder; every rank learns whether that worked, so all stop together."""
    if out_dir is None:
        if resume:
            raise ValueError("resume=True needs out_dir (where checkpoint.pt lives)")
        return None
    lock, error = None, None
    if rt.rank == 0:
        try:
            lock = folder.prepare(out_dir, resume, overwrite)
        except (ValueError, OSError) as err:
            error = err
    if rt.any(error is not None):
        raise error if error is not None else RuntimeError(f"rank 0 could not prepare the run folder {out_dir}")
    return lock


def initial_state(path: Path | None, resume: bool, module: nn.Module, optimizer, scheduler, scaler,
                  config: TrainConfig, rt: Runtime, data: dict) -> TrainState:
    """The state resumed from `path`, or (nothing to resume) a fresh one with every RNG seeded (seed + rank)."""
    state = checkpoint.resume(path, module, optimizer, scheduler, scaler, config, rt.rank, rt.world, data) \
        if resume else None
    if state is None:
        checkpoint.seed_everything(config.seed + rt.rank)
        state = TrainState()
    return state


def fit(model: nn.Module, train_set: Dataset, test_set: Dataset | None, config: TrainConfig,
        on_log: Callable[[dict], None] | None = None, out_dir: str | Path | None = None,
        resume: bool = False, overwrite: bool = False) -> list[dict]:
    """Train `model` on `train_set`; return the history (list of records, also passed to on_log).

    Records: {"kind": "step", "epoch" (float, fractional progress), "step", "loss", "accuracy" (over
    the last `log_every` steps), "lr", "images_per_s", "time_s"} every `log_every` steps, and {"kind":
    "epoch", "epoch" (completed epochs), "step", "train_loss", "train_accuracy" (over the epoch),
    "test_loss", "test_accuracy" (on the evaluated split; None without one), "eval_split" ("test", or
    "val" with config.validation_fraction > 0), "lr", "images_per_s", "time_s"} after each epoch.
    out_dir gets checkpoint.pt, metrics.jsonl and metrics.csv; a folder that already holds a run needs
    resume=True (continue from its checkpoint) or overwrite=True. Under torch.distributed (torchrun),
    wraps the model in DDP itself. Raises DivergedError on a non-finite loss, saving nothing more.
    """
    rt = Runtime.current(config)
    out_dir = Path(out_dir) if out_dir is not None else None
    data = check_sets(model, train_set, test_set)
    split = "val" if config.validation_fraction > 0 else "test"
    if split == "val":
        train_set, test_set = hold_out(train_set, config.validation_fraction)
    plan = Plan.of(config, len(train_set), rt.world)
    module = model.to(rt.device)
    optimizer, scheduler, scaler = build_optimizer(module, config, plan, rt.amp_dtype)
    lock = start(out_dir, resume, overwrite, rt)
    try:
        path = out_dir / CHECKPOINT_NAME if out_dir is not None else None
        state = initial_state(path, resume, module, optimizer, scheduler, scaler, config, rt, data)
        net = rt.wrap(module)
        log = Logger(out_dir, state, on_log, rt, plan, config.epochs, config.progress)
        net.train()
        while state.epoch < config.epochs and not state.stopped(config):
            order = epoch_order(config.seed, state.epoch, len(train_set))
            log.start_epoch(state)
            while state.batch < plan.steps_per_epoch:
                images, labels = rt.shard(train_set, order, state.batch, config.batch_size, config.seed, state.epoch)
                sums = train_step(net, module, optimizer, scaler, images, labels, config, rt, state.step)
                lr = scheduler.get_last_lr()[0]
                scheduler.step()
                state.advance(sums, config.batch_size)
                log.step(state, lr, config.log_every, config.batch_size)
                periodic = config.save_every and state.step % config.save_every == 0
                if state.stopped(config) or (periodic and state.batch < plan.steps_per_epoch):
                    save(path, state, module, optimizer, scheduler, scaler, config, rt, data)
                if state.stopped(config):
                    break
            log.end_batches()
            if state.batch < plan.steps_per_epoch:  # max_steps hit mid-epoch
                break
            train_totals = rt.reduce(state.epoch_sums.clone())
            evaluated = None if test_set is None else rt.reduce(evaluate_counts(
                module, test_set, torch.arange(len(test_set))[rt.rank::rt.world], config.eval_batch_size,
                rt.device, rt.autocast))
            state.next_epoch()
            log.epoch(state, train_totals, evaluated, split, scheduler.get_last_lr()[0])
            save(path, state, module, optimizer, scheduler, scaler, config, rt, data)
        log.close()
    finally:
        if lock is not None:
            lock.release()
    return state.history
