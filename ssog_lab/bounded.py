"""Reading untrusted files within stated bounds: the one place where every data reader reads a file.

A file that a user hands in (a data set, an image folder) may be crafted so that a few bytes on disk describe
gigabytes: a gzip stream of zeros, a pickle of shared nested lists, a PNG header claiming 10⁶×10⁶ pixels. The rule,
kept here so that a new reader gets it by using these helpers:

* read a header first, then at most the bytes it announces (`read_exactly`, `expect_end`), or at most a stated
  limit when nothing announces the length (`read_at_most`, `read_file`);
* refuse a described size before allocating it: a pickle's expanded element count (`check_described_size`), the
  sizes a pickle passes to the constructors it may call (`unpickle_data`), an image's pixel count
  (`check_pixels`) are checked before anything is materialized or decoded.

Every refusal is a ValueError naming the file (`where`) and the bound.
"""

from __future__ import annotations

import io
import math
import pickle
from pathlib import Path
from typing import BinaryIO

import numpy as np

__all__ = ["read_exactly", "read_at_most", "read_file", "expect_end", "check_described_size", "check_pixels",
           "unpickle_data"]

CHUNK = 1 << 20  # bytes per read: a stream that ends early never makes us allocate what it claimed
# What a data pickle may describe beyond its own length: every element it holds costs it at least one byte, so only
# shared references (or a constructor asked for a size) describe more; the slack covers small memoized strings.
PICKLE_SLACK = 1 << 16

_NP_CORE = getattr(np, "_core", None) or np.core  # numpy ≥ 2 renamed numpy.core to numpy._core
# Everything a data pickle may name: numpy's two array reconstructors (protocol ≤ 4 and 5), under both numpy module
# names, ndarray and dtype, and plain containers and scalars. Nothing here runs arbitrary code.
_PICKLE_ALLOWED = {
    **{(f"{core}.{module}", name): getattr(getattr(_NP_CORE, module), name)
       for core in ("numpy.core", "numpy._core")
       for module, name in (("multiarray", "_reconstruct"), ("numeric", "_frombuffer"))},
    ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
    **{("builtins", t.__name__): t for t in (list, dict, tuple, set, frozenset, str, bytes, bytearray, int, float,
                                              bool)},
}


def _read_chunks(stream: BinaryIO, size: int) -> bytearray:
    """Up to `size` bytes (fewer at end of stream), read a chunk at a time."""
    buffer = bytearray()
    while len(buffer) < size:
        chunk = stream.read(min(CHUNK, size - len(buffer)))
        if not chunk:
            break
        buffer += chunk
    return buffer


def read_exactly(stream: BinaryIO, size: int, where: object, limit: int) -> bytearray:
    """Exactly `size` bytes from `stream`, where `size` comes from the file itself (a header): refused above `limit`
    before anything is read, and a ValueError "truncated" when the stream ends first."""
    if size > limit:
        raise ValueError(f"{where}: its header announces {size} bytes, more than the {limit} this reader accepts")
    buffer = _read_chunks(stream, size)
    if len(buffer) < size:
        raise ValueError(f"{where}: truncated ({len(buffer)} bytes where its header announces {size})")
    return buffer


def expect_end(stream: BinaryIO, where: object) -> None:
    """The stream must end here: one more byte is "trailing data" (read without decompressing the rest)."""
    if stream.read(1):
        raise ValueError(f"{where}: trailing data after the bytes its header announces")


def read_at_most(stream: BinaryIO, limit: int, where: object) -> bytearray:
    """The rest of `stream`, refused as soon as it exceeds `limit` bytes (at most limit + 1 bytes are read)."""
    buffer = _read_chunks(stream, limit + 1)
    if len(buffer) > limit:
        raise ValueError(f"{where}: more than {limit} bytes, the most this reader accepts for it")
    return buffer


def read_file(path: str | Path, limit: int) -> bytearray:
    """A whole file of at most `limit` bytes (its size on disk checked first, the read bounded as well)."""
    path = Path(path)
    if path.stat().st_size > limit:
        raise ValueError(f"{path}: {path.stat().st_size} bytes, more than the {limit} this reader accepts")
    with open(path, "rb") as f:
        return read_at_most(f, limit, path)


def check_described_size(obj: object, limit: int, where: object) -> int:
    """The number of elements that materializing `obj` (an unpickled object: containers, scalars, arrays) would
    make, counted without materializing it; a ValueError when it exceeds `limit` or when `obj` contains itself.

    A shared object counts each time it is referenced, as `np.asarray` or a copy would visit it, but is walked
    once: the count costs time linear in the number of distinct objects, however large the described size."""
    sizes: dict[int, int] = {}  # id → described size of an object already counted
    stack: list[tuple[object, bool]] = [(obj, False)]
    open_ids: set[int] = set()
    while stack:
        item, children_done = stack.pop()
        key = id(item)
        if key in sizes and not children_done:
            continue
        children = _children(item)
        if not children_done:
            if key in open_ids:
                raise ValueError(f"{where}: a container that contains itself is not data")
            open_ids.add(key)
            stack.append((item, True))
            stack.extend((child, False) for child in children or () if id(child) not in sizes)
            continue
        open_ids.discard(key)
        sizes[key] = 1 + sum(sizes[id(child)] for child in children) if children is not None else _leaf_size(item)
        if sizes[key] > limit:
            raise ValueError(f"{where}: describes more than {limit} elements, the most this reader accepts "
                             "(shared references expand when materialized)")
    return sizes[id(obj)]


def _children(item: object) -> list | None:
    """The members of a container (dict keys and values, an object array's entries), None for a leaf."""
    if getattr(getattr(item, "dtype", None), "hasobject", False):
        return list(item.flat)
    if isinstance(item, dict):
        return [*item.keys(), *item.values()]
    if isinstance(item, (list, tuple, set, frozenset)):
        return list(item)
    return None


def _leaf_size(item: object) -> int:
    """Elements of a leaf: an array's or a string's length in bytes, 1 for a scalar."""
    nbytes = getattr(item, "nbytes", None)
    if isinstance(nbytes, int):
        return max(1, nbytes)
    return max(1, len(item)) if isinstance(item, (str, bytes, bytearray)) else 1


def check_pixels(width: int, height: int, limit: int, where: object) -> None:
    """An image's declared size (read from its header) must be at most `limit` pixels before it is decoded."""
    if width * height > limit:
        raise ValueError(f"{where}: {width}×{height} pixels, more than the {limit} this reader decodes")


class _Allowed:
    """An allowed global as a pickle sees it: calling it first charges the sizes it is asked for (an int such as
    bytes(n), a shape tuple such as ndarray((n, m))) to the unpickler's budget."""

    def __init__(self, target: object, unpickler: _DataUnpickler):
        self.target, self.unpickler = target, unpickler

    def __call__(self, *args: object, **kwargs: object) -> object:
        args = tuple(a.target if isinstance(a, _Allowed) else a for a in args)  # classes passed as arguments
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, int) and not isinstance(arg, bool):
                self.unpickler.charge(arg)
            elif isinstance(arg, tuple) and arg and all(isinstance(n, int) for n in arg):
                self.unpickler.charge(math.prod(arg))
        return self.target(*args, **kwargs)


class _DataUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays and builtin containers only (any other global raises UnpicklingError); the sizes
    handed to their constructors may add up to `budget` elements."""

    def __init__(self, blob: bytes, budget: int):
        super().__init__(io.BytesIO(blob), encoding="bytes")
        self.budget = budget

    def charge(self, size: int) -> None:
        self.budget -= max(0, size)
        if self.budget < 0:
            raise pickle.UnpicklingError("it asks a constructor for more elements than the file could hold")

    def find_class(self, module: str, name: str) -> object:
        try:
            return _Allowed(_PICKLE_ALLOWED[(module, name)], self)
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only numpy arrays and builtin "
                                         "containers may appear in a data file") from None


def unpickle_data(blob: bytes, where: object) -> object:
    """A pickle of numpy arrays and builtin containers (never code), whose described size, constructor sizes and
    expanded shared references together, is bounded by its own length (+ PICKLE_SLACK). Any failure is a ValueError
    naming `where`."""
    limit = len(blob) + PICKLE_SLACK
    try:
        obj = _DataUnpickler(blob, limit).load()
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, KeyError, IndexError, AttributeError,
            ImportError, MemoryError, RecursionError) as err:
        raise ValueError(f"{where}: not a readable data pickle ({type(err).__name__}: {err})") from err
    if isinstance(obj, _Allowed):  # a bare global: a pickle of a class or function, not data
        raise ValueError(f"{where}: not a readable data pickle (it holds {obj.target!r}, not data)")
    check_described_size(obj, limit, where)
    return obj
