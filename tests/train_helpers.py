"""What the training tests share: a tiny steered model, a few embedded digits, a short recipe, the CLI flags of a
small run and its logged losses (tests/test_train.py, tests/test_train_reliability.py, and the gradient worker
that test_train.py starts in its own processes)."""

import json
from pathlib import Path

import torch

from ssog_lab import data, train
from ssog_lab.models import build_model

TINY = dict(in_chans=1, num_classes=10, dim=16, layers=2, ssog_heads=2)


def small_digits(n: int, augment: bool) -> data.ImageDataset:
    """n training digits spread over all classes (the split is sorted by class)."""
    full = data.mnist5k("train", augment=augment)
    pick = torch.arange(0, len(full), len(full) // n)[:n]
    return data.ImageDataset(full.images[pick], full.labels[pick], full.transform)


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    return build_model("nano", depth="discrete", mixer="ssog-steered", **TINY)


def recipe(**changes) -> train.TrainConfig:
    # 24 images, batch 8: 3 steps per epoch, so 4 steps cross an epoch end (test evaluation, checkpoint).
    return train.TrainConfig(**{**dict(epochs=2, batch_size=8, warmup_epochs=0.5, log_every=1, progress=False),
                                **changes})


DDP_ARGV = ["--preset", "nano", "--mixer", "ssog-steered", "--set", "dim=16", "--set", "layers=2", "--set",
            "ssog_heads=2", "--batch-size", "16", "--max-steps", "20", "--warmup-epochs", "0", "--log-every", "1",
            "--no-progress"]


def step_losses(run: Path) -> list[float]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if r["kind"] == "step"]
