"""Your own images: a class-per-subfolder tree of ordinary image files (torchvision's ImageFolder layout).

    DIR/<class>/<image>                                  one tree: a fixed, seeded, stratified split holds out
                                                         TEST_FRACTION of each class as the test split
    DIR/train/<class>/<image> and DIR/test/<class>/<image>   a given pair (test classes: a subset of train's)

Classes are the subfolder names in sorted order (images may sit in nested folders below them). Every other file
in a class folder must be an image (IMAGE_SUFFIXES: PNG, JPEG, BMP, GIF, WebP, PPM/PGM, TIFF); hidden files
(.DS_Store) are skipped. Each file is read through the bounded reader (at most IMAGE_MAX_BYTES), its declared
size checked (at most IMAGE_MAX_PIXELS) before it is decoded with Pillow, and any file that cannot be decoded is
a ValueError naming it.

Channels follow the data: when every image is grey (Pillow modes 1, L, LA, I, I;16…, F) the data set has 1
channel, otherwise 3 (grey images are repeated to 3 channels, alpha is dropped, palette images count as colour).
Each image is resized to image_size × image_size when read (bilinear, antialiased; the aspect ratio is not kept)
and held as uint8; items are normalized per channel with the training split's mean and std.
"""

from __future__ import annotations

import functools
import io
import struct
import warnings
from pathlib import Path

import numpy as np
import torch

from . import bounded
from .image_dataset import ImageDataset, ImageTransform

__all__ = ["image_folder", "IMAGE_SUFFIXES", "IMAGE_MAX_BYTES", "IMAGE_MAX_PIXELS", "TEST_FRACTION"]

IMAGE_SUFFIXES = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".bmp": "BMP", ".gif": "GIF", ".webp": "WEBP",
                  ".ppm": "PPM", ".pgm": "PPM", ".pbm": "PPM", ".tif": "TIFF", ".tiff": "TIFF"}
IMAGE_MAX_BYTES = 1 << 26  # per file on disk
IMAGE_MAX_PIXELS = 1 << 26  # per image, declared in its header (8192 × 8192); below Pillow's own bomb limit
FOLDER_MAX_BYTES = 1 << 32  # all decoded images together, uint8 at image_size² (checked before decoding)
TEST_FRACTION, SPLIT_SEED = 0.2, 0  # one tree: the share of each class held out as the test split, and its seed
GREY_MODES = ("1", "L", "LA", "La", "I", "F")  # and every "I;16…" mode


def _classes_and_files(root: Path) -> tuple[list[str], list[list[Path]]]:
    """(sorted class names, each class's image files sorted); a non-image file is a ValueError naming it."""
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ValueError(f"{root}: no class subfolders (expected {root}/<class>/<image>, or train/ and test/ "
                         "folders of class subfolders)")
    files = []
    for name in classes:
        found = sorted(p for p in (root / name).rglob("*") if p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(root).parts))
        for path in found:
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                raise ValueError(f"{path}: not an image file (expected one of {', '.join(sorted(IMAGE_SUFFIXES))}); "
                                 "move it out of the class folders")
        if not found:
            raise ValueError(f"{root / name}: a class folder without images")
        files.append(found)
    return classes, files


def _decode(path: Path, size: int) -> np.ndarray:
    """One image file as uint8 (size, size) if grey or (size, size, 3) if colour, through the bounded reader."""
    from PIL import Image

    blob = bounded.read_file(path, IMAGE_MAX_BYTES)
    unreadable = (OSError, SyntaxError, ValueError, EOFError, struct.error, Image.DecompressionBombError,
                  Image.DecompressionBombWarning)  # what Pillow raises on a corrupt or foreign file
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(blob), formats=[IMAGE_SUFFIXES[path.suffix.lower()]])
        except unreadable as err:
            raise ValueError(f"{path}: not a readable image ({type(err).__name__}: {err})") from None
        bounded.check_pixels(*image.size, IMAGE_MAX_PIXELS, path)  # from the header, before decoding
        try:
            image.load()
            if image.mode.startswith("I;16") or image.mode == "I":  # 16-bit grey: keep the top 8 bits
                image = Image.fromarray((np.asarray(image, dtype=np.float64) / 257).clip(0, 255).astype(np.uint8))
            elif image.mode == "F":
                image = Image.fromarray(np.asarray(image).clip(0, 255).astype(np.uint8))
            image = image.convert("L" if image.mode in GREY_MODES else "RGB")
            image = image.resize((size, size), Image.Resampling.BILINEAR)  # antialiased when shrinking
        except unreadable as err:
            raise ValueError(f"{path}: not a readable image ({type(err).__name__}: {err})") from None
    return np.asarray(image, dtype=np.uint8)


def _decode_all(paths: list[Path], size: int) -> list[np.ndarray]:
    if len(paths) * 3 * size * size > FOLDER_MAX_BYTES:
        raise ValueError(f"{len(paths)} images at {size}×{size} would take more than {FOLDER_MAX_BYTES} bytes; "
                         "use fewer images or a smaller image_size")
    return [_decode(path, size) for path in paths]


def _stack(arrays: list[np.ndarray], channels: int) -> torch.Tensor:
    """uint8 (N, channels, size, size) from grey (size, size) and colour (size, size, 3) arrays."""
    out = [a[None].repeat(channels, 0) if a.ndim == 2 else a.transpose(2, 0, 1) for a in arrays]
    return torch.from_numpy(np.stack(out))


def _held_out(labels: list[int], fraction: float) -> np.ndarray:
    """A boolean mask: a seeded permutation's first round(fraction·n) images of each class (none of a class of
    one image) are held out."""
    labels_array = np.asarray(labels)
    mask = np.zeros(len(labels), dtype=bool)
    rng = np.random.default_rng(SPLIT_SEED)
    for label in np.unique(labels_array):
        members = rng.permutation(np.flatnonzero(labels_array == label))
        mask[members[:round(fraction * len(members))]] = True
    return mask


@functools.lru_cache(maxsize=1)
def _read(root: str, size: int, listing: tuple) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                          list[str]]:
    """(train images uint8 (N, C, size, size), train labels, test images, test labels, classes); cached on the
    folder's listing (names, sizes, times), so the train and test splits decode the tree once."""
    root_path = Path(root)
    pair = (root_path / "train").is_dir() and (root_path / "test").is_dir()
    classes, files = _classes_and_files(root_path / "train" if pair else root_path)
    paths = [p for class_files in files for p in class_files]
    labels = [label for label, class_files in enumerate(files) for _ in class_files]
    if pair:
        test_classes, test_files = _classes_and_files(root_path / "test")
        foreign = sorted(set(test_classes) - set(classes))
        if foreign:
            raise ValueError(f"{root_path / 'test' / foreign[0]}: a test class that train/ does not have")
        test_from = len(paths)
        paths += [p for class_files in test_files for p in class_files]
        labels += [classes.index(name) for name, class_files in zip(test_classes, test_files, strict=True)
                   for _ in class_files]
        is_test = np.arange(len(paths)) >= test_from
    else:
        is_test = _held_out(labels, TEST_FRACTION)
        if not is_test.any():
            raise ValueError(f"{root}: too few images for a test split (each class needs at least 3 to hold one "
                             "out); add images or give train/ and test/ folders")
    if len(classes) < 2:
        raise ValueError(f"{root}: one class ({classes[0]}); a classifier needs at least 2 class subfolders")
    arrays = _decode_all(paths, size)
    channels = 1 if all(a.ndim == 2 for a in arrays) else 3
    images, labels_tensor = _stack(arrays, channels), torch.tensor(labels)
    test = torch.from_numpy(is_test)
    return images[~test], labels_tensor[~test], images[test], labels_tensor[test], classes


def image_folder(root: str | Path, split: str = "train", image_size: int = 32, augment: bool = False) -> ImageDataset:
    """The images under `root` (see the module docstring for the layouts) as an ImageDataset: split "train" or
    "test", items (C, image_size, image_size) with C = 1 when every image is grey, else 3, normalized with the
    training split's per-channel mean and std. augment=True (train only) adds a random crop with image_size // 8
    pixels of zero padding and a horizontal flip. Raises FileNotFoundError when `root` is not a folder, ValueError
    naming the file or folder for anything it cannot use."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be one of ('train', 'test'), got {split!r}")
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder (--dataset folder reads DIR/<class>/<image>)")
    listing = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")))
    train_images, train_labels, test_images, test_labels, classes = _read(str(root.resolve()), image_size, listing)
    statistics = train_images.float() / 255  # (N, C, S, S)
    mean = statistics.mean(dim=(0, 2, 3))
    std = statistics.std(dim=(0, 2, 3)).clamp_min(1e-3)  # a constant channel stays finite
    transform = ImageTransform(None, tuple(mean.tolist()), tuple(std.tolist()),
                               crop_padding=max(1, image_size // 8) if augment else 0, flip=augment)
    images, labels = (train_images, train_labels) if split == "train" else (test_images, test_labels)
    return ImageDataset(images, labels, transform, list(classes), name=f"folder-{split}")
