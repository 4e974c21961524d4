"""Your own images (`--dataset folder`): small trees of real PNG and JPEG files written by the tests, read through
the bounded reader, split, and trained on through the CLI; every file it cannot use is named."""

import json
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from ssog_lab import data, image_folder, train

LEVELS = (30, 130, 230)  # class k's images are a flat grey (or colour) at LEVELS[k], plus a little noise


def write_tree(root, n_per_class=5, colour=False, suffixes=(".png", ".jpg"), classes=("circle", "square", "star")):
    """root/<class>/<i><suffix>: images of varied sizes (grey mode L, or RGB when colour), class k around
    LEVELS[k]."""
    rng = np.random.default_rng(0)
    for k, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(n_per_class):
            shape = (20 + 3 * i, 24 + 5 * k) + ((3,) if colour else ())
            pixels = np.clip(LEVELS[k] + rng.integers(-10, 11, shape), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}{suffixes[i % len(suffixes)]}")


def test_a_grey_tree_is_one_channel_split_stratified_and_labelled_by_folder(tmp_path):
    write_tree(tmp_path)
    train_set = data.load_dataset("folder", "train", tmp_path, image_size=12)
    test_set = data.load_dataset("folder", "test", tmp_path, image_size=12)
    assert train_set.classes == test_set.classes == ["circle", "square", "star"]
    assert train_set.images.shape == (12, 1, 12, 12) and test_set.images.shape == (3, 1, 12, 12)  # 1 of 5 per class
    assert test_set.labels.tolist() == [0, 1, 2] and train_set.labels.bincount().tolist() == [4, 4, 4]
    for ds in (train_set, test_set):  # each image is its folder's level: labels follow the folder names
        levels = ds.images.float().mean(dim=(1, 2, 3))
        assert all(abs(float(level) - LEVELS[int(label)]) < 4 for level, label in zip(levels, ds.labels, strict=True))
    image, _ = train_set[0]
    assert image.shape == (1, 12, 12)
    normalized = torch.stack([train_set[i][0] for i in range(len(train_set))])
    assert abs(float(normalized.mean())) < 1e-4 and abs(float(normalized.std()) - 1) < 0.05  # train statistics
    again = data.load_dataset("folder", "test", tmp_path, image_size=12)
    assert torch.equal(again.images, test_set.images)  # the split is fixed
    augmented = data.load_dataset("folder", "train", tmp_path, image_size=16, augment=True)
    assert augmented.transform.crop_padding == 2 and augmented.transform.flip
    assert not data.load_dataset("folder", "test", tmp_path, image_size=16, augment=True).transform.flip


def test_colour_anywhere_makes_three_channels_and_a_train_test_pair_is_used_as_given(tmp_path):
    write_tree(tmp_path / "train", n_per_class=2)
    write_tree(tmp_path / "test", n_per_class=1, colour=True, classes=("circle", "star"))
    train_set, test_set = (image_folder.image_folder(tmp_path, split, 8) for split in ("train", "test"))
    assert train_set.images.shape == (6, 3, 8, 8) and test_set.images.shape == (2, 3, 8, 8)
    assert test_set.labels.tolist() == [0, 2]  # by name: star is train's class 2
    grey = train_set.images[0]
    assert torch.equal(grey[0], grey[1]) and torch.equal(grey[0], grey[2])  # a grey image repeated
    (tmp_path / "test" / "hexagon").mkdir()
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "test" / "hexagon" / "a.png")
    with pytest.raises(ValueError, match="hexagon: a test class that train/ does not have"):
        image_folder.image_folder(tmp_path, "test", 8)


def _huge_png(path, side=100_000):
    """A 1×1 grey PNG whose header then claims side × side pixels (about 70 bytes on disk)."""
    Image.fromarray(np.zeros((1, 1), np.uint8)).save(path)
    blob = bytearray(path.read_bytes())
    blob[16:24] = struct.pack(">2I", side, side)  # IHDR: width, height right after the chunk type
    blob[29:33] = struct.pack(">I", zlib.crc32(bytes(blob[12:29])))  # the chunk's CRC over type + data
    path.write_bytes(bytes(blob))


@pytest.mark.parametrize("case", ["text file", "random bytes", "truncated png", "huge dimensions",
                                  "decompression-bomb dimensions", "empty class",
                                  "one class", "no class folders", "too few for a test split"])
def test_every_file_or_folder_it_cannot_use_is_named(tmp_path, case):
    write_tree(tmp_path)
    culprit = tmp_path / "square" / "bad.png"
    if case == "text file":
        culprit = tmp_path / "square" / "notes.txt"
        culprit.write_text("labels were checked by hand")
        match = "not an image file"
    elif case == "random bytes":
        culprit.write_bytes(np.random.default_rng(0).integers(0, 256, 500, dtype=np.uint8).tobytes())
        match = "not a readable image"
    elif case == "truncated png":
        Image.fromarray(np.full((64, 64), 7, np.uint8)).save(culprit)
        culprit.write_bytes(culprit.read_bytes()[:60])
        match = "not a readable image"
    elif case == "huge dimensions":  # over IMAGE_MAX_PIXELS, under Pillow's own limits
        _huge_png(culprit, 9000)
        match = "9000×9000 pixels, more than"
    elif case == "decompression-bomb dimensions":  # Pillow refuses these itself, in Image.open
        _huge_png(culprit, 100_000)
        match = "DecompressionBombError"
    elif case == "empty class":
        culprit = tmp_path / "triangle"
        culprit.mkdir()
        match = "a class folder without images"
    elif case in ("one class", "no class folders", "too few for a test split"):
        for path in sorted(tmp_path.rglob("*"), reverse=True):
            if case != "one class" or path.parent.name != "circle" and path.name != "circle":
                path.unlink() if path.is_file() else path.rmdir()
        if case == "too few for a test split":
            for name in ("a", "b"):
                (tmp_path / name).mkdir()
                Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / name / "1.png")
        culprit = tmp_path
        match = {"one class": "a classifier needs at least 2", "no class folders": "no class subfolders",
                 "too few for a test split": "too few images for a test split"}[case]
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match) as info:
            data.load_dataset("folder", "train", tmp_path, image_size=8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(culprit) in str(info.value)
    assert peak < 8 << 20, f"{peak} bytes allocated before the refusal"  # nothing is decoded at its claimed size


def test_the_cli_trains_on_a_folder_and_refuses_a_missing_one(tmp_path):
    write_tree(tmp_path / "images", n_per_class=6)
    out = tmp_path / "run"
    argv = ["--dataset", "folder", "--data-dir", str(tmp_path / "images"), "--preset", "nano", "--mixer", "ssog",
            "--set", "image_size=16", "--epochs", "1", "--batch-size", "4", "--no-progress", "--out", str(out)]
    assert train.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"] == "folder" and summary["test_accuracy"] is not None
    assert train.main(["--dataset", "folder", "--out", str(tmp_path / "run3")]) == 2  # no --data-dir
    assert train.main(["--dataset", "folder", "--data-dir", str(tmp_path / "absent"), "--out",
                       str(tmp_path / "run4")]) == 2
