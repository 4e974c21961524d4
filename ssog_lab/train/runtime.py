"""Where training runs: rank and world size, the device, autocast, collectives, and which samples a rank
fetches (the data order of an epoch, this rank's shard, each sample's augmentation seed).

Data parallel: each global batch of `batch_size` images is cut into `world_size` equal, disjoint
shards (rank r takes every world_size-th index); DDP averages the gradients, so one step equals a
single-process step on the whole batch. Each sample's random augmentation draws from a generator
seeded with (seed, epoch, position in the epoch), so it does not depend on which rank fetches it:
results are the same for every world size, with or without augmentation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from .checkpoint import rng_state
from .config import TrainConfig


def epoch_order(seed: int, epoch: int, n: int) -> Tensor:
    """The data order of `epoch`: a permutation of range(n) from a generator seeded with (seed, epoch)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=generator)


def sample_seed(seed: int, epoch: int, position: int) -> int:
    """The augmentation seed of the sample at `position` of epoch `epoch`'s order (a 64-bit integer)."""
    return ((seed * 1_000_003 + epoch) * 2_147_483_647 + position) % 2**64


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside torch.distributed."""
    return (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() else (0, 1)


def choose_device(choice: str) -> torch.device:
    """The torch device for `choice` ("auto", "cpu", "cuda", "cuda:N"); ValueError for one this machine lacks."""
    if choice == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        return torch.device("cpu")
    try:
        device = torch.device(choice)
    except RuntimeError:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {choice!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {choice!r} needs a CUDA GPU, but torch sees none here; use 'cpu' or 'auto'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {choice!r}: there are only {torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {choice!r}")
    return device


def autocast_for(device: torch.device, precision: str) -> tuple[Callable, torch.dtype | None]:
    """The autocast context factory and dtype for the `precision` setting on `device`."""
    if device.type != "cuda":
        if precision in ("bf16", "fp16"):
            raise ValueError(f"precision={precision!r} needs a CUDA device (got {device}); use 'auto' or 'off'")
        return nullcontext, None
    if precision == "off":
        return nullcontext, None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision) or (
        torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return (lambda: torch.autocast("cuda", dtype=dtype)), dtype


def fetch(dataset: Dataset, indices: Tensor, device: torch.device, seeds: list[int] | None = None
          ) -> tuple[Tensor, Tensor]:
    """Stack dataset[indices]; with `seeds`, item k's augmentation draws from torch's CPU generator
    seeded with seeds[k] (the caller's generator state is left as it was)."""
    if seeds is None:
        items = [dataset[int(i)] for i in indices]
    else:
        with torch.random.fork_rng(devices=[]):
            items = []
            for i, s in zip(indices, seeds, strict=True):
                torch.default_generator.manual_seed(s)
                items.append(dataset[int(i)])
    images = torch.stack([image for image, _ in items])  # (b, C, H, W)
    labels = torch.stack([torch.as_tensor(label) for _, label in items])  # (b,)
    return images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


@dataclass
class Runtime:
    """This process's place in the run: rank, world size, device and its autocast."""

    rank: int
    world: int
    device: torch.device
    autocast: Callable
    amp_dtype: torch.dtype | None

    @classmethod
    def current(cls, config: TrainConfig) -> Runtime:
        rank, size = world()
        device = choose_device(config.device)
        return cls(rank, size, device, *autocast_for(device, config.precision))

    def reduce(self, t: Tensor) -> Tensor:
        """The sum of `t` over ranks (a copy on the CPU)."""
        if self.world > 1:
            t = t.to(self.device)
            dist.all_reduce(t)
        return t.cpu()

    def gather_rng(self) -> list[dict]:
        """Every rank's RNG states, in rank order (a collective under DDP)."""
        if self.world == 1:
            return [rng_state()]
        states = [None] * self.world
        dist.all_gather_object(states, rng_state())
        return states

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on any rank (a collective under DDP)."""
        return bool(self.reduce(torch.tensor([float(flag)], dtype=torch.float64))[0] > 0)

    def wrap(self, module: nn.Module) -> nn.Module:
        """DDP around `module` when there is more than one rank."""
        if self.world == 1:
            return module
        return nn.parallel.DistributedDataParallel(module, device_ids=[self.device]
                                                   if self.device.type == "cuda" else None)

    def shard(self, dataset: Dataset, order: Tensor, batch: int, batch_size: int, seed: int, epoch: int
              ) -> tuple[Tensor, Tensor]:
        """This rank's share of global batch `batch` of the epoch's `order`."""
        positions = torch.arange(batch * batch_size, (batch + 1) * batch_size)[self.rank::self.world]  # (b,)
        seeds = [sample_seed(seed, epoch, int(p)) for p in positions]
        return fetch(dataset, order[positions], self.device, seeds)


@torch.no_grad()
def evaluate_counts(model: nn.Module, dataset: Dataset, indices: Tensor, batch_size: int, device: torch.device,
                    autocast: Callable = nullcontext) -> Tensor:
    """(summed loss, correct, count) over dataset[indices] as a float64 tensor on `device`."""
    was_training = model.training
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    for start in range(0, len(indices), batch_size):
        images, labels = fetch(dataset, indices[start:start + batch_size], device)
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
    counts = evaluate_counts(model, dataset, torch.arange(len(dataset)), batch_size, device)
    return float(counts[1] / counts[2])
