"""The optimizer and its schedule: AdamW with parameter groups, linear warm-up then cosine decay."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..layers import SSoGMixer
from .config import TrainConfig

# The atom parameters of an SSoGMixer: offsets μ, log-widths log σ, amplitudes α (the steering head,
# which predicts per-token changes of them, is an ordinary linear layer).
ATOM_PARAMETERS = ("mu", "log_sigma", "amp")


@dataclass(frozen=True)
class Plan:
    """The step budget: optimizer steps per epoch and in all, and the warm-up length in steps."""

    steps_per_epoch: int
    total_steps: int
    warmup_steps: int

    @classmethod
    def of(cls, config: TrainConfig, train_images: int, world: int) -> Plan:
        """ValueError when the batch does not split over the ranks or exceeds the training set."""
        if config.batch_size % world:
            raise ValueError(f"batch_size={config.batch_size} must be a multiple of the world size {world}")
        steps_per_epoch = train_images // config.batch_size
        if steps_per_epoch == 0:
            raise ValueError(f"batch_size={config.batch_size} exceeds the training set ({train_images} images)")
        return cls(steps_per_epoch, config.epochs * steps_per_epoch, round(config.warmup_epochs * steps_per_epoch))

    def lr_factor(self, step: int, min_lr_ratio: float) -> float:
        """The learning rate of `step` (0-based) as a fraction of the peak."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def atom_parameter_names(module: nn.Module) -> set[str]:
    """Full names of the SSoG atom parameters (ATOM_PARAMETERS of every SSoGMixer) in `module`."""
    return {f"{prefix}.{name}" if prefix else name for prefix, m in module.named_modules()
            if isinstance(m, SSoGMixer) for name in ATOM_PARAMETERS}


def parameter_groups(module: nn.Module, config: TrainConfig) -> list[dict]:
    """Weight matrices decay; biases, norms, embeddings' extras and atoms do not. With atom_lr_scale ≠ 1
    the atoms get a third group at lr·atom_lr_scale (with 1 they stay in the no-decay group, so older
    checkpoints' optimizer states still fit)."""
    atoms = atom_parameter_names(module) if config.atom_lr_scale != 1.0 else set()
    groups = {"decay": [], "no_decay": [], "atoms": []}
    for name, p in module.named_parameters():
        kind = "atoms" if name in atoms else "decay" if p.dim() >= 2 and name.endswith("weight") else "no_decay"
        groups[kind].append(p)
    result = [{"params": groups["decay"], "weight_decay": config.weight_decay},
              {"params": groups["no_decay"], "weight_decay": 0.0}]
    if atoms:
        result.append({"params": groups["atoms"], "weight_decay": 0.0, "lr": config.lr * config.atom_lr_scale})
    return result


def build_optimizer(module: nn.Module, config: TrainConfig, plan: Plan, amp_dtype: torch.dtype | None):
    """(AdamW, its LambdaLR schedule, the GradScaler: active for float16 autocast only)."""
    optimizer = torch.optim.AdamW(parameter_groups(module, config), lr=config.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: plan.lr_factor(step, config.min_lr_ratio))
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    return optimizer, scheduler, scaler
