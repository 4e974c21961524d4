"""Exercises of notebook 06 (registered with `@exercise`; see the package docstring)."""

from __future__ import annotations

import functools

from .. import repository
from ._registry import close, exercise, same_function

CHECKPOINT = repository.CHECKPOINTS_DIR / "nano_ssog_steered_mnist5k.pt"


@functools.lru_cache(maxsize=1)
def _shipped():
    from .. import train

    model, _ = train.load_model(CHECKPOINT)
    return model


@exercise("06.row_sum", judge=close(1e-3), wrong=1.0,
          hint="sum the amplitudes α of head 0 in layer 0 of the shipped model (the third output of "
               "learned.learned_atoms); training changed them from their initial 1/M each.",
          explain="a fixed kernel row sums to Σ_m α_m for every query, because each atom's weights sum to 1.")
def row_sum() -> float:
    from ..learned import learned_atoms

    return float(learned_atoms(_shipped(), 0)[2][0].sum())


def _steering(names: tuple[str, ...]) -> float:
    """The share of the shipped model's parameters in the named mixer layers (counted on the meta device: the
    count depends on the architecture only)."""
    import torch

    from .. import models

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
          hint="compare the learned offsets with those of the untrained twin (learned.initial_twin) and take the "
               "largest absolute difference; 2 tokens is the range they were drawn from, not how far they moved.",
          explain="with AdamW a parameter moves by about the learning rate per step: the shipped run's 868 steps at "
                  "a peak of 2e-3, under warm-up and cosine decay, moved an offset by a fraction of a token.")
def moved() -> float:
    from ..learned import atom_change, initial_twin

    model = _shipped()
    return max(r["mu_moved_max"] for r in atom_change(model, initial_twin(model)))


def _steered_inputs() -> tuple:
    """Two images, two heads, a 3×4 grid, 3 atoms, per-token parameters moved well off any shared value (float64)."""
    import torch

    generator = torch.Generator().manual_seed(3)
    b, heads, grid, atoms, d = 2, 2, (3, 4), 3, 5
    n = grid[0] * grid[1]
    v = torch.randn(b, heads, n, d, generator=generator, dtype=torch.float64)
    mu = 1.5 * torch.randn(b, heads, n, atoms, 2, generator=generator, dtype=torch.float64)
    sigma = 0.5 + 2 * torch.rand(b, heads, n, atoms, 2, generator=generator, dtype=torch.float64)
    amp = torch.randn(b, heads, n, atoms, generator=generator, dtype=torch.float64)
    return v, mu, sigma, amp, grid


def _query_owns_every_atom(v, mu, sigma, amp, grid):
    """The natural slip: every output token uses its own atoms on both axes (a per-query dense kernel), where the
    two-stage operator's column Gaussian belongs to the intermediate token (r', c)."""
    import torch

    height, width = grid
    b, heads, n, d = v.shape
    on_grid = lambda t: t.reshape(b, heads, height, width, mu.shape[-2], *t.shape[4:])  # noqa: E731
    mu, sigma, amp = on_grid(mu), on_grid(sigma), on_grid(amp)
    rows, cols = torch.arange(height, dtype=v.dtype), torch.arange(width, dtype=v.dtype)
    g_row = (-(rows - rows.reshape(height, 1, 1, 1) - mu[..., 0, None]) ** 2
             / (2 * sigma[..., 0, None] ** 2)).softmax(-1)  # (B, heads, H, W, M, H)
    g_col = (-(cols - cols.reshape(width, 1, 1) - mu[..., 1, None]) ** 2
             / (2 * sigma[..., 1, None] ** 2)).softmax(-1)  # (B, heads, H, W, M, W)
    x = v.reshape(b, heads, height, width, d)
    y = torch.einsum("bhrcm,bhrcms,bhrcmq,bhsqd->bhrcd", amp, g_row, g_col, x)
    return y.reshape(b, heads, n, d)


def _steered_operators() -> tuple:
    from .. import ops
    from ..ops import reference

    return (ops.ssog, ops.dense_kernel, reference.ssog_reference, reference._steered_separable,
            reference._steered_axis_weights, reference.dense_kernel_reference)


@exercise("06.steered", judge=same_function(_steered_inputs, rtol=1e-9, atol=1e-12, forbid=_steered_operators()),
          wrong=_query_owns_every_atom,
          hint="keep the two stages of notebook 02, but every token now carries its own (μ, σ) per atom: stage 1 "
               "writes the intermediate token (r', c), stage 2 the output token (r, c) with α. Whose parameters "
               "does each stage's Gaussian use?",
          explain="the column Gaussian of stage 1 belongs to the intermediate token, the row Gaussian and α of stage "
                  "2 to the output token: that ordering is what keeps the cost at O(M·N·(H+W)·d).")
def steered():
    from .. import ops

    return lambda v, mu, sigma, amp, grid: ops.ssog(v, mu, sigma, amp, grid)
