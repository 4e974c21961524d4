"""Exercises of notebook 02 (registered with `@exercise`; see the package docstring)."""

import torch

from .. import ops
from ..bench.operator import OPERATORS, flop_counts
from ..ops import reference
from ._registry import close, exercise, same_function

_SDPA, _SEPARABLE, _ = OPERATORS


@exercise("02.ratio", wrong=7.0, judge=close(0.01),
          hint="divide the two FLOP formulas of the table and cancel what they share; count a multiply–add "
               "as 2 FLOPs on both sides, and do not forget the M atoms.",
          explain="2N / (M(H + W)): each atom costs N(H + W) multiply–adds per feature, attention 2N² (scores and AV).")
def ratio() -> float:
    counts = flop_counts(14, d=64, atoms=4)
    return counts[_SDPA]["flops"] / counts[_SEPARABLE]["flops"]


@exercise("02.mib", wrong=16.0, judge=close(0.01),
          hint="count the tokens from the image and patch sizes; the matrix holds N² scores of 4 bytes each, "
               "and 1 MiB is 2²⁰ bytes.",
          explain="per head, per image and per layer: flash-type kernels avoid storing it, not computing it.")
def mib() -> float:
    return flop_counts(64)[_SDPA]["memory"] * 4 / 2**20


@exercise("02.side", wrong=16, judge=close(0.0),
          hint="write the condition FLOPs(separable) < FLOPs(SDPA) on a square grid of side s and simplify; "
               "is the inequality strict?",
          explain="the condition is s > M, so the side must exceed the number of atoms.")
def side() -> int:
    return next(s for s in range(1, 200)
                if flop_counts(s, atoms=16)[_SEPARABLE]["flops"] < flop_counts(s, atoms=16)[_SDPA]["flops"])


def _inputs() -> tuple:
    """Two images, three heads, d = 4 on a 5×6 grid, random atoms (float64)."""
    generator = torch.Generator().manual_seed(2)
    grid = (5, 6)
    mu, sigma, amp = ops.random_atoms(3, 4, grid, generator=generator, dtype=torch.float64)  # (3, 4, 2), (3, 4)
    v = torch.randn(2, 3, 30, 4, generator=generator, dtype=torch.float64)  # (B, heads, N, d)
    return v, mu, sigma, amp, grid


def _transposed_stages(v, mu, sigma, amp, grid):
    """A plausible slip: G[i, j] = g(i → j) contracted over i instead of j (Gᵀ in place of G)."""
    height, width = grid
    b, heads, n, d = v.shape
    rows = torch.arange(height, dtype=v.dtype)  # (H,): query positions r
    cols = torch.arange(width, dtype=v.dtype)  # (W,): query positions c
    g_row = ops.axis_weights(rows, mu[..., None, 0], sigma[..., None, 0], height)  # (heads, M, H, H)
    g_col = ops.axis_weights(cols, mu[..., None, 1], sigma[..., None, 1], width)  # (heads, M, W, W)
    x = v.reshape(b, heads, height, width, d)  # (B, heads, H, W, d)
    z = torch.einsum("hmxc,bhrxd->bhmrcd", g_col, x)  # wrong index: sums over the query c
    y = torch.einsum("hm,hmyr,bhmycd->bhrcd", amp, g_row, z)
    return y.reshape(b, heads, n, d)


# The operator under every name the library gives it: the exercise asks for the two stages themselves.
_OPERATORS = (ops.ssog, ops.dense_kernel, reference.ssog_reference, reference.dense_kernel_reference,
              reference.apply_fixed, reference._fixed_separable, reference._steered_separable, reference._fixed_dense)


@exercise("02.two_stage", wrong=_transposed_stages, judge=same_function(_inputs, forbid=_OPERATORS),
          hint="start from the shapes: with v as (B, heads, H, W, d), which index does each 1-D Gaussian sum over, "
               "and in which stage can the atom's amplitude α enter? Remember G[i, j] = g(i → j).",
          explain="two einsums and two reshapes: O(M·N·(H + W)·d), and never an N×N tensor.")
def two_stage():
    return lambda v, mu, sigma, amp, grid: ops.ssog(v, mu, sigma, amp, grid)
