"""One trained run read from its folder: what was trained (the model config), how (the recipe), what it reached
(the summary), where and at which code (machine, commit); `RunRecord.current` says whether today's code still
builds that model.

A run folder holds the train CLI's summary.json (the result, the recipe as `train_config` and, since #27, the
model as `model_config`) and, for a sweep's runs, the sweep's run.json (command, commit, machine and the labels
the sweep groups by). A folder written before summary.json held the model config gets it from `derive`: the
sweep's own mapping from its labels to a `ViTConfig` (e.g. `experiments.fashion.plan.model_config`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path

import torch

from .. import models

# labels, summary -> the run's ViTConfig, for folders whose summary.json predates `model_config`
Derive = Callable[[dict, dict], models.ViTConfig]


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One finished training run. Accuracies are fractions; `recipe` is the TrainConfig as a dict."""

    folder: Path
    summary: dict
    config: models.ViTConfig | None  # None: the folder does not say, or today's code rejects it
    labels: dict = dataclasses.field(default_factory=dict)
    command: str | None = None
    commit: str | None = None
    machine: dict = dataclasses.field(default_factory=dict)

    @property
    def recipe(self) -> dict:
        return self.summary.get("train_config", {})

    @property
    def test_accuracy(self) -> float | None:
        return self.summary.get("test_accuracy")

    @property
    def current(self) -> bool:
        """Whether today's code builds this run's model with the parameter count it trained."""
        stored = self.summary.get("parameters")
        return self.config is not None and stored is not None and current_parameters(self.config) == int(stored)


@functools.cache
def _count(fields: str) -> int:
    with torch.device("meta"):
        return models.count_parameters(models.ViT(models.ViTConfig(**json.loads(fields))))


def current_parameters(config: models.ViTConfig) -> int:
    """The parameter count of the model `config` describes, built by today's code (on the meta device)."""
    return _count(json.dumps(dataclasses.asdict(config), sort_keys=True))


def read_json(path: Path) -> dict | None:
    """A JSON file's content, None when it does not exist."""
    return json.loads(path.read_text()) if path.is_file() else None


def _config(summary: dict, labels: dict, derive: Derive | None) -> models.ViTConfig | None:
    try:
        if "model_config" in summary:
            return models.ViTConfig(**summary["model_config"])
        return derive(labels, summary) if derive is not None else None
    except (TypeError, ValueError, KeyError):  # a field or value today's code no longer accepts
        return None


def read_run(folder: Path, derive: Derive | None = None) -> RunRecord | None:
    """The record of the run in `folder`; None while it has no summary.json (not finished)."""
    summary = read_json(folder / "summary.json")
    if summary is None:
        return None
    run = read_json(folder / "run.json") or {}
    labels = run.get("labels", {})
    return RunRecord(folder, summary, _config(summary, labels, derive), labels, run.get("command"),
                     run.get("commit"), run.get("machine", {}))


def read_runs(root: Path, derive: Derive | None = None) -> list[RunRecord]:
    """Every finished run under `root` (any depth), in path order."""
    return [record for path in sorted(Path(root).rglob("summary.json"))
            if (record := read_run(path.parent, derive)) is not None]
