"""The type every data reader returns: images and labels held as tensors (`ImageDataset`), with a per-image
pipeline (`ImageTransform`). Public as `ssog_lab.data.ImageDataset` and `ssog_lab.data.ImageTransform`; a module
of its own so that `data` and `image_folder` both build on it without importing each other."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import Dataset


class ImageTransform:
    """Per-image pipeline: to float (uint8 → [0, 1]), random crop with zero padding, horizontal flip,
    resize to `size`×`size` (bilinear, antialiased), normalize per channel.

    Random choices draw from torch's global generator, so seeding torch (and saving its state in a
    checkpoint) makes the augmentation reproducible. crop_padding=0 and flip=False give the
    deterministic test-time pipeline.
    """

    def __init__(self, size: int | None = None, mean: tuple[float, ...] | None = None,
                 std: tuple[float, ...] | None = None, crop_padding: int = 0, flip: bool = False):
        if size is not None and size < 1:
            raise ValueError(f"size must be a positive integer or None, got {size}")
        if crop_padding < 0:
            raise ValueError(f"crop_padding must be ≥ 0, got {crop_padding}")
        self.size, self.crop_padding, self.flip = size, crop_padding, flip
        self.mean = None if mean is None else torch.tensor(mean).view(-1, 1, 1)  # (C, 1, 1)
        self.std = None if std is None else torch.tensor(std).view(-1, 1, 1)

    def __call__(self, image: Tensor) -> Tensor:
        x = image.float() / 255 if image.dtype == torch.uint8 else image.float()  # (C, H, W)
        if self.crop_padding:
            p = self.crop_padding
            _, h, w = x.shape
            top, left = (int(t) for t in torch.randint(0, 2 * p + 1, (2,)))
            x = F.pad(x, (p, p, p, p))[:, top:top + h, left:left + w]  # (C, H, W)
        if self.flip and bool(torch.rand(()) < 0.5):
            x = x.flip(-1)
        if self.size is not None and x.shape[-2:] != (self.size, self.size):
            x = F.interpolate(x[None], size=(self.size, self.size), mode="bilinear", align_corners=False,
                              antialias=True)[0]  # (C, size, size)
        if self.mean is not None:
            x = (x - self.mean) / self.std
        return x

    def __repr__(self) -> str:
        return (f"ImageTransform(size={self.size}, crop_padding={self.crop_padding}, flip={self.flip}, "
                f"normalize={self.mean is not None})")


class ImageDataset(Dataset):
    """Images (N, C, H, W) and integer labels (N,) held as tensors; `transform(image) -> image` per item.

    dataset[i] -> (image (C, H', W') float32, label int64 scalar).
    """

    def __init__(self, images: Tensor, labels: Tensor, transform: Callable[[Tensor], Tensor] | None = None,
                 classes: list[str] | None = None, name: str = "images"):
        if images.dim() != 4:
            raise ValueError(f"images must have shape (N, C, H, W), got {tuple(images.shape)}")
        if labels.shape != images.shape[:1]:
            raise ValueError(f"labels must have shape ({images.shape[0]},), got {tuple(labels.shape)}")
        self.images, self.labels, self.transform = images, labels.long(), transform
        self.classes, self.name = classes, name

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        image = self.images[index]
        image = self.transform(image) if self.transform is not None else image.float()
        return image, self.labels[index]

    @property
    def num_classes(self) -> int:
        return len(self.classes) if self.classes is not None else int(self.labels.max()) + 1

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of a transformed item."""
        return tuple(self[0][0].shape)

    def __repr__(self) -> str:
        return f"ImageDataset({self.name}, n={len(self)}, image_shape={self.image_shape}, transform={self.transform})"
