"""Random atom parameters with the shapes `ops.ssog` takes, for notebooks, benchmarks and examples.

One distribution, in token units, independently for every head, atom, axis (and token when steered):

    mu    ~ Normal(0, 1.5²)   offset of the atom's centre from the query token
    sigma ~ Uniform(0.5, 2.5) width
    amp   ~ Normal(0, 1)      amplitude α

so most atoms reach a few tokens and some neighbours get negative weight, as in trained models.
"""

from __future__ import annotations

import torch
from torch import Tensor

MU_STD, SIGMA_RANGE = 1.5, (0.5, 2.5)


def random_atoms(heads: int, atoms: int, grid: tuple[int, int], *, batch: int | None = None, steered: bool = False,
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(mu, sigma, amp) drawn from the distribution above.

    Fixed:   mu, sigma (heads, M, 2); amp (heads, M).
    Steered: mu, sigma (batch, heads, N, M, 2); amp (batch, heads, N, M), N = H·W of `grid`.
    Drawn on the CPU with `generator` (reproducible across devices), then moved to `device`.
    """
    for name, value in (("heads", heads), ("atoms", atoms)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not (isinstance(grid, (tuple, list)) and len(grid) == 2 and all(isinstance(g, int) and g >= 1 for g in grid)):
        raise ValueError(f"grid must be a pair (H, W) of positive integers, got {grid!r}")
    if steered and (not isinstance(batch, int) or batch < 1):
        raise ValueError(f"steered atoms need batch, a positive integer, got {batch!r}")
    lead = (batch, heads, grid[0] * grid[1], atoms) if steered else (heads, atoms)
    low, high = SIGMA_RANGE
    mu = MU_STD * torch.randn(*lead, 2, generator=generator, dtype=dtype)  # (..., M, 2)
    sigma = low + (high - low) * torch.rand(*lead, 2, generator=generator, dtype=dtype)  # (..., M, 2)
    amp = torch.randn(*lead, generator=generator, dtype=dtype)  # (..., M)
    return mu.to(device), sigma.to(device), amp.to(device)
