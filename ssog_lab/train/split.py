"""A validation split held out of the training set: the same images for every run and seed."""

from __future__ import annotations

import copy

import torch
from torch.utils.data import Dataset, Subset

from ..data import ImageDataset, ImageTransform

SPLIT_SEED = 0  # the permutation's seed, fixed so that every run holds out the same images


def validation_indices(n: int, fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(fit indices, held-out indices), each sorted: a fixed permutation's first round(fraction·n)
    (at least one when fraction > 0) are held out."""
    held = max(1, round(fraction * n)) if fraction > 0 else 0
    order = torch.randperm(n, generator=torch.Generator().manual_seed(SPLIT_SEED))
    return order[held:].sort().values, order[:held].sort().values


def hold_out(train_set: Dataset, fraction: float) -> tuple[Dataset, Dataset]:
    """(the training images to fit, the held-out ones with the test-time transform: no augmentation)."""
    fit_indices, held_indices = validation_indices(len(train_set), fraction)
    fit_set = Subset(train_set, fit_indices.tolist())
    if isinstance(train_set, ImageDataset):
        transform = train_set.transform
        if isinstance(transform, ImageTransform):
            transform = copy.copy(transform)
            transform.crop_padding, transform.flip = 0, False
        held = ImageDataset(train_set.images[held_indices], train_set.labels[held_indices], transform,
                            train_set.classes, f"{train_set.name} (validation)")
    else:
        held = Subset(train_set, held_indices.tolist())
    return fit_set, held
