"""What one benchmark row measures (`BenchConfig`), the list of configurations of a run, and the CSV schema."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..models import DEPTHS, MIXERS, PRESETS

RESOLUTIONS = (224, 384, 512, 768, 1024)
MODES = ("infer", "train")
ODE_METHODS = ("euler", "midpoint", "rk4")
SDPA_MIXERS = ("sdpa", "sdpa-math")
# Peak memory is reported against both: the math path stores the N×N scores, the fused kernel does not.
MEMORY_BASELINES = ("sdpa-math", "sdpa")
MACHINE_COLUMNS = ("cpu_model", "cpu_vendor", "cpu_flags", "threads", "flush_denormal")
COLUMNS = ("depth", "mixer", "backend", "mode", "resolution", "tokens", "batch", "params", "images_per_s",
           "seconds_per_batch", "best_images_per_s", "peak_mb", "memory_method", "nfe", "repeats", "device",
           *MACHINE_COLUMNS, "torch", "ssog_lab", "python", "status", "error")


@dataclass
class BenchConfig:
    """One measured configuration.

    depth: the depth form ("discrete", "looped", "ode"); the ODE is solved by `ode_method` with the library's
    default step size (`ViTConfig.ode_step_size`), or with `ode_steps` equal steps over [0, T] when given, the
    same for every mixer. Timing repeats a batch at least `repeats`
    times and until `min_seconds` have been timed (fast configurations get more samples), after `warmup`
    untimed batches. threads: torch's intra-op threads (None: torch's default). flush_denormal: call
    torch.set_flush_denormal(True) in the measuring process (a user's choice, recorded per row).
    overrides: ViTConfig fields for `models.build_model` on top of the preset (e.g. image_size, patch_size,
    in_chans, heads), to time a trained configuration; an ode_step_size there wins over ode_steps.
    """

    preset: str = "tiny"
    depth: str = "discrete"
    mixer: str = "sdpa"
    resolution: int = 224
    batch: int = 1
    mode: str = "infer"
    repeats: int = 3
    warmup: int = 1
    min_seconds: float = 1.0
    ode_steps: int | None = None
    ode_method: str = "rk4"
    device: str = "cpu"
    num_classes: int = 100
    threads: int | None = None
    flush_denormal: bool = False
    overrides: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, choices in (("preset", tuple(PRESETS)), ("depth", DEPTHS), ("mixer", MIXERS), ("mode", MODES),
                              ("ode_method", ODE_METHODS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")
        for name, low in (("resolution", 1), ("batch", 1), ("repeats", 1), ("warmup", 0), ("ode_steps", 1),
                          ("num_classes", 1)):
            if name != "ode_steps" or self.ode_steps is not None:
                _check_int(name, getattr(self, name), low)
        if self.threads is not None:
            check_threads(self.threads)
        check_device(self.device)
        if not isinstance(self.overrides, dict):
            raise ValueError(f"overrides must be a dict of ViTConfig fields, got {self.overrides!r}")
        if not (isinstance(self.min_seconds, (int, float)) and math.isfinite(self.min_seconds)
                and self.min_seconds >= 0):
            raise ValueError(f"min_seconds must be a finite number ≥ 0, got {self.min_seconds!r}")

    def payload(self) -> dict:
        return dataclasses.asdict(self)


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")


def check_threads(threads: int) -> None:
    """torch intra-op threads: 1 … this machine's logical CPUs (torch.set_num_threads(100000) segfaults, and more
    threads than CPUs measure the scheduler, not the code)."""
    _check_int("threads", threads, 1)
    if threads > (os.cpu_count() or 1):
        raise ValueError(f"threads must be at most this machine's {os.cpu_count()} logical CPUs, got {threads}")


def check_device(device: str) -> None:
    """A device this machine has ("cpu", "cuda", "cuda:N"); ValueError otherwise (train.runtime's rule)."""
    from ..train.runtime import choose_device

    if device == "auto":
        raise ValueError("device must be 'cpu', 'cuda' or 'cuda:N', got 'auto'")
    choose_device(device)


def check_distinct(name: str, values: Sequence) -> None:
    """Each value of a list argument (`name`: its name in the message, or "") once: a repeated one would measure a
    configuration twice and make the tables ambiguous."""
    repeated = sorted({v for v in values if list(values).count(v) > 1}, key=str)
    if repeated:
        raise ValueError(f"{name}{': ' if name else ''}{', '.join(map(str, repeated))} given more than once")


def configurations(preset: str = "tiny", depths=DEPTHS, mixers=MIXERS, resolutions=RESOLUTIONS, batch: int = 1,
                   train: bool = False, **fields) -> list[BenchConfig]:
    """All configurations, ordered depth → mode → resolution → mixer (mixers of one resolution run back to
    back, so they share the machine's conditions); with train=True each is measured in both modes."""
    for name, values in (("depths", depths), ("mixers", mixers), ("resolutions", resolutions)):
        check_distinct(name, values)
    modes = MODES if train else MODES[:1]
    return [BenchConfig(preset=preset, depth=d, mixer=m, resolution=r, batch=batch, mode=mode, **fields)
            for d in depths for mode in modes for r in resolutions for m in mixers]



