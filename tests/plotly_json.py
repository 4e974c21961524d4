"""Reading plotly's JSON in tests."""

from __future__ import annotations

import base64

import numpy as np


def typed_array(value: dict | list) -> np.ndarray:
    """An array as plotly's JSON holds it: a list, or {"dtype", "bdata" (base64), "shape"} (a typed array)."""
    if isinstance(value, list):
        return np.asarray(value)
    shape = tuple(int(n) for n in str(value.get("shape", "-1")).split(","))
    return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
