"""One logger for a run: records into the history, metrics.jsonl/metrics.csv, the on_log callback and
tqdm bars. Every rank calls it (the step record needs an all-reduce); only rank 0 writes or shows."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from pathlib import Path

from torch import Tensor

from .atomic import append, atomic_write
from .checkpoint import TrainState
from .optim import Plan
from .runtime import Runtime

LOG_COLUMNS = ("kind", "epoch", "step", "loss", "accuracy", "train_loss", "train_accuracy", "test_loss",
               "test_accuracy", "lr", "images_per_s", "time_s", "eval_split")


def _progress(total: int, desc: str, enabled: bool, position: int, initial: int = 0, leave: bool = True):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, position=position, initial=initial, leave=leave,
                dynamic_ncols=True)


class Logger:
    """Records for `state.history`; files under `out_dir` (rank 0, None = no files), rewritten from the
    history at the start (atomically), then appended record by record."""

    def __init__(self, out_dir: Path | None, state: TrainState, on_log: Callable[[dict], None] | None,
                 rt: Runtime, plan: Plan, epochs: int, progress: bool):
        self.rt, self.plan, self.on_log = rt, plan, on_log
        self.paths = None if out_dir is None or rt.rank != 0 else (out_dir / "metrics.jsonl", out_dir / "metrics.csv")
        if self.paths is not None:
            atomic_write(self.paths[0], "".join(json.dumps(r) + "\n" for r in state.history))
            atomic_write(self.paths[1], "".join(self._csv_line(r, header=i == 0)
                                            for i, r in enumerate([{}, *state.history])))
        self.show = progress and rt.rank == 0
        self.epochs_bar = _progress(epochs, "epochs", self.show, 0, initial=state.epoch)
        self.batches_bar = None
        self.started = self.window_start = self.epoch_start = time.perf_counter()
        self.epoch_images = 0

    @staticmethod
    def _csv_line(record: dict, header: bool = False) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, LOG_COLUMNS, extrasaction="ignore")
        writer.writeheader() if header else writer.writerow(record)
        return buffer.getvalue()

    def _record(self, state: TrainState, record: dict) -> None:
        state.history.append(record)
        if self.rt.rank != 0:
            return
        if self.paths is not None:
            append(self.paths[0], json.dumps(record) + "\n")
            append(self.paths[1], self._csv_line(record))
        if self.on_log is not None:
            self.on_log(record)

    def start_epoch(self, state: TrainState) -> None:
        self.batches_bar = _progress(self.plan.steps_per_epoch, f"epoch {state.epoch + 1}", self.show, 1,
                                     initial=state.batch, leave=False)
        self.epoch_start, self.epoch_images = time.perf_counter(), 0

    def step(self, state: TrainState, lr: float, log_every: int, batch_size: int) -> None:
        """After each step: every `log_every` steps a record of the window's mean loss and accuracy."""
        self.epoch_images += batch_size
        self.batches_bar.update()
        if state.step % log_every:
            return
        w = self.rt.reduce(state.window.clone())  # (summed loss, correct, seen) over all ranks
        rate = state.window_images / (time.perf_counter() - self.window_start)
        self._record(state, {"kind": "step", "epoch": state.epoch + state.batch / self.plan.steps_per_epoch,
                             "step": state.step, "loss": float(w[0] / w[2]), "accuracy": float(w[1] / w[2]),
                             "lr": lr, "images_per_s": rate, "time_s": time.perf_counter() - self.started})
        self.batches_bar.set_postfix(loss=f"{w[0] / w[2]:.3f}", acc=f"{w[1] / w[2]:.3f}", img_s=f"{rate:.0f}")
        state.window.zero_()
        self.window_start, state.window_images = time.perf_counter(), 0

    def end_batches(self) -> None:
        self.batches_bar.close()

    def epoch(self, state: TrainState, train: Tensor, evaluated: Tensor | None, split: str, lr: float) -> None:
        """The epoch record: `train` and `evaluated` (None: no evaluation set) are (summed loss, correct, seen)."""
        self._record(state, {"kind": "epoch", "epoch": state.epoch, "step": state.step,
                             "train_loss": float(train[0] / train[2]), "train_accuracy": float(train[1] / train[2]),
                             "test_loss": None if evaluated is None else float(evaluated[0] / evaluated[2]),
                             "test_accuracy": None if evaluated is None else float(evaluated[1] / evaluated[2]),
                             "lr": lr, "images_per_s": self.epoch_images / (time.perf_counter() - self.epoch_start),
                             "time_s": time.perf_counter() - self.started,
                             "eval_split": None if evaluated is None else split})
        self.epochs_bar.update()
        self.epochs_bar.set_postfix(test_acc="-" if evaluated is None else f"{evaluated[1] / evaluated[2]:.4f}")

    def close(self) -> None:
        if self.batches_bar is not None:
            self.batches_bar.close()
        self.epochs_bar.close()
