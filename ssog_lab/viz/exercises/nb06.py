"""Exercises of notebook 06 (registered with `@exercise`; see the package docstring)."""

from __future__ import annotations

import functools

from ... import repository
from ._registry import close, exercise

CHECKPOINT = repository.CHECKPOINTS_DIR / "nano_ssog_steered_mnist5k.pt"


@functools.lru_cache(maxsize=1)
def _shipped():
    from ... import train

    model, _ = train.load_model(CHECKPOINT)
    return model


@exercise("06.row_sum", judge=close(1e-3), wrong=1.0,
          hint="sum the amplitudes α of head 0 in layer 0 of the shipped model (the third output of "
               "viz.learned_atoms); training changed them from their initial 1/M each.",
          explain="a fixed kernel row sums to Σ_m α_m for every query, because each atom's weights sum to 1.")
def row_sum() -> float:
    from ..learned import learned_atoms

    return float(learned_atoms(_shipped(), 0)[2][0].sum())


def _steering(names: tuple[str, ...]) -> float:
    """The share of the shipped model's parameters in the named mixer layers (counted on the meta device: the
    count depends on the architecture only)."""
    import torch

    from ... import models

    with torch.device("meta"):
        model = models.build_model("nano", mixer="ssog-steered", ssog_heads=8, in_chans=1, num_classes=10)
    steering = sum(p.numel() for block in model.blocks for name, p in block.mixer.named_parameters()
                   if name.split(".")[0] in names)
    return steering / models.count_parameters(model)


@exercise("06.steering_share", judge=close(0.01), wrong=_steering(("steer",)),
          hint="the steering head has two linear layers in every mixer, steer_down and steer; count both, then "
               "divide by all the model's parameters.",
          explain="the low-rank steering head is a small share of the model.")
def steering_share() -> float:
    return _steering(("steer_down", "steer"))


@exercise("06.moved", judge=close(0.05), wrong=2.0,
          hint="compare the learned offsets with those of the untrained twin (viz.initial_twin) and take the "
               "largest absolute difference; 2 tokens is the range they were drawn from, not how far they moved.",
          explain="with AdamW a parameter moves by about the learning rate per step, so a few hundred steps at "
                  "2e-3 move an offset by a fraction of a token.")
def moved() -> float:
    from ..learned import atom_change, initial_twin

    model = _shipped()
    return max(r["mu_moved_max"] for r in atom_change(model, initial_twin(model)))
