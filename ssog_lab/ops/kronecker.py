"""The SSoG kernel's Kronecker structure (docs/DESIGN.md §1, notebook 02): one head's N×N kernel written as the sum
of M Kronecker products of its atoms' small matrices,

    K = Σ_m α_m G_row,m ⊗ G_col,m      (G_row,m (H, H), G_col,m (W, W) from `reference.axis_matrices`),

and the check that this sum, the dense kernel and the separable path are one map. For teaching and tests: the
operator never builds K this way (`reference.py` applies the two factors one after the other).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .atoms import random_atoms
from .reference import axis_matrices, dense_kernel_reference, ssog_reference


def kronecker_kernel(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """Σ_m α_m G_row,m ⊗ G_col,m for one head with fixed atoms: mu, sigma (M, 2); amp (M,). Returns (N, N),
    N = H·W, row-major tokens; equal to `ops.dense_kernel` of the same atoms (with a heads axis of 1)."""
    g_row, g_col = axis_matrices(mu, sigma, grid)  # (M, H, H), (M, W, W)
    return sum(a * torch.kron(r, c) for a, r, c in zip(amp, g_row, g_col, strict=True))


def separability_check(grid: tuple[int, int] = (6, 7), atoms: int = 3, d: int = 5, seed: int = 0) -> dict[str, float]:
    """Random fixed atoms of one head and random values (B = 2, N = H·W, d), float64: the largest |difference|
    between the dense kernel (`ops.dense_kernel`'s) and the sum of Kronecker products, and between the separable
    evaluation of SSoG and K·V. Both are float64 rounding when the identity holds."""
    generator = torch.Generator().manual_seed(seed)
    mu, sigma, amp = random_atoms(1, atoms, grid, generator=generator, dtype=torch.float64)  # (1, M, 2), (1, M)
    v = torch.randn(2, 1, grid[0] * grid[1], d, generator=generator, dtype=torch.float64)  # (B, heads, N, d)
    dense = dense_kernel_reference(mu, sigma, amp, grid)[0]  # (N, N)
    kron = kronecker_kernel(mu[0], sigma[0], amp[0], grid)  # (N, N)
    separable = ssog_reference(v, mu, sigma, amp, grid, dense=False)  # (B, heads, N, d)
    return {"max |K_dense − Σ α G_row ⊗ G_col|": float((dense - kron).abs().max()),
            "max |separable Y − K V|": float((separable - dense @ v).abs().max())}
