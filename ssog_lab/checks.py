"""The one validation path for config dataclasses (ViTConfig, TrainConfig): every field's type from its
annotation, numbers finite and in their interval, strings from their choices; each message names the field.

A config declares its rules once, next to its fields, and calls `check_fields(self)` in `__post_init__`:
a new field gets its type check without thought, and its range or choices from one line.
"""

from __future__ import annotations

import dataclasses
import math


def check_type(name: str, value: object, annotation: str) -> None:
    """Bools are not ints here, ints are fine as floats, None only where the annotation allows it."""
    if value is None and "None" in annotation:
        return
    kind = annotation.split("|")[0].strip()
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool),
          "bool": isinstance(value, bool), "str": isinstance(value, str)}[kind]
    if not ok:
        raise ValueError(f"{name} must be {annotation}, got {value!r}")


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:
    """value finite and in [low, high] (an open end excludes the bound); the message names the field."""
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if not math.isfinite(value) or below or above:
        interval = (f"{'(' if low_open else '['}{'-inf' if low is None else low}, "
                    f"{'inf' if high is None else high}{')' if high_open or high is None else ']'}")
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")


def check_choice(name: str, value: object, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_fields(config: object, ranges: dict[str, dict], choices: dict[str, tuple]) -> None:
    """Every dataclass field of `config` by its annotation, then `ranges` (field -> check_range keywords;
    a None value is skipped, the annotation already allowed it) and `choices` (field -> allowed values)."""
    for field in dataclasses.fields(config):
        check_type(field.name, getattr(config, field.name), field.type)
    for name, valid in choices.items():
        check_choice(name, getattr(config, name), valid)
    for name, bounds in ranges.items():
        if getattr(config, name) is not None:
            check_range(name, getattr(config, name), **bounds)
