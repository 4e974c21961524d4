"""PyTorch reference of the SSoG operator (DESIGN.md §1).

Two ways to evaluate the same map, chosen per call:

* **separable**: two batched contractions, one per axis — O(M·N·(H+W)·d), never an N×N tensor;
* **dense**: build the N×N kernel once and do one matmul — faster for small grids, where the
  kernel is tiny and a single large GEMM beats several thin ones.

Both are exact evaluations of DESIGN.md's formulas; tests check them against a brute-force
kernel built cell by cell.
"""

from __future__ import annotations

import torch
from torch import Tensor

# Grids with at most this many tokens use the dense kernel (see docs/results/operator_cpu.md
# for the crossover measurement behind the number).
DENSE_MAX_TOKENS = 64


def axis_weights(query_pos: Tensor, mu: Tensor, sigma: Tensor, length: int) -> Tensor:
    """Normalized 1-D Gaussian weights g(i → j; μ, σ) for j = 0 … length−1.

    query_pos, mu, sigma broadcast together to a shape S (positions and widths in token units).
    Returns (*S, length): a softmax over j of the logit −(j − i − μ)² / (2σ²), computed in log
    space so that a centre far off the axis or a tiny σ still yields finite weights summing to 1.
    """
    j = torch.arange(length, device=mu.device, dtype=mu.dtype)  # (L,)
    centre = (query_pos + mu).unsqueeze(-1)  # (*S, 1)
    logits = -((j - centre) ** 2) / (2 * sigma.unsqueeze(-1) ** 2)  # (*S, L)
    return torch.softmax(logits, dim=-1)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Weights are computed in float32 for half types (their exponent range is too narrow)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _positions(length: int, like: Tensor) -> Tensor:
    return torch.arange(length, device=like.device, dtype=like.dtype)


def _fixed_axis_matrices(mu: Tensor, sigma: Tensor, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Per-head, per-atom Gaussian matrices for fixed parameters.

    mu, sigma: (heads, M, 2). Returns G_row (heads, M, H, H) and G_col (heads, M, W, W),
    with G[..., i, j] = g(i → j).
    """
    height, width = grid
    rows = _positions(height, mu)[:, None]  # (H, 1): query positions i
    cols = _positions(width, mu)[:, None]  # (W, 1)
    g_row = axis_weights(rows, mu[..., None, None, 0], sigma[..., None, None, 0], height)[..., 0, :]
    g_col = axis_weights(cols, mu[..., None, None, 1], sigma[..., None, None, 1], width)[..., 0, :]
    return g_row, g_col  # (heads, M, H, H), (heads, M, W, W)


def _steered_axis_weights(mu: Tensor, sigma: Tensor, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Per-token Gaussian weights for steered parameters.

    mu, sigma: (B, heads, N, M, 2). Returns
    G_row (B, heads, H, W, M, H): weights over r' for the output token (r, c), and
    G_col (B, heads, H, W, M, W): weights over c' for the output token (r, c).
    """
    height, width = grid
    b, heads, _, atoms, _ = mu.shape
    mu = mu.reshape(b, heads, height, width, atoms, 2)  # (B, heads, H, W, M, 2)
    sigma = sigma.reshape(b, heads, height, width, atoms, 2)
    rows = _positions(height, mu)[:, None, None]  # (H, 1, 1): broadcast over (H, W, M)
    cols = _positions(width, mu)[None, :, None]  # (1, W, 1)
    g_row = axis_weights(rows, mu[..., 0], sigma[..., 0], height)  # (B, heads, H, W, M, H)
    g_col = axis_weights(cols, mu[..., 1], sigma[..., 1], width)  # (B, heads, H, W, M, W)
    return g_row, g_col


def dense_kernel_reference(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """The N×N kernel K with Y = K V. Fixed: (heads, N, N); steered: (B, heads, N, N).

    K[(r,c), (r',c')] = Σ_m α_m g(r → r'; μ_row,m, σ_row,m) g(c → c'; μ_col,m, σ_col,m), where in the
    steered form α and the row Gaussian use the parameters of the output token (r, c) and the column
    Gaussian those of the intermediate token (r', c) (the two axial stages of DESIGN.md §1).
    """
    height, width = grid
    n = height * width
    work = _compute_dtype(mu.dtype)
    mu, sigma, amp = mu.to(work), sigma.to(work), amp.to(work)
    if mu.dim() == 3:
        g_row, g_col = _fixed_axis_matrices(mu, sigma, grid)
        kernel = torch.einsum("hm,hmry,hmcx->hrcyx", amp, g_row, g_col)  # (heads, H, W, H, W)
        return kernel.reshape(mu.shape[0], n, n)
    g_row, g_col = _steered_axis_weights(mu, sigma, grid)
    amp = amp.reshape(*amp.shape[:2], height, width, -1)  # (B, heads, H, W, M)
    # g_col is indexed by the intermediate token (r', c): g_col[b, h, r', c, m, c'].
    kernel = torch.einsum("bhrcm,bhrcmy,bhycmx->bhrcyx", amp, g_row, g_col)  # (B, heads, H, W, H, W)
    return kernel.reshape(*mu.shape[:2], n, n)


def ssog_reference(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int],
                   dense: bool | None = None) -> Tensor:
    """SSoG in PyTorch. Shapes as in `ssog_lab.ops.ssog` (validated there).

    dense: True forces the N×N-kernel path, False the separable one, None picks by grid size.
    """
    height, width = grid
    b, heads, n, d = v.shape
    if dense is None:
        dense = n <= DENSE_MAX_TOKENS
    if dense:
        kernel = dense_kernel_reference(mu, sigma, amp, grid).to(v.dtype)  # (heads | B·heads, N, N)
        return kernel @ v  # (B, heads, N, d)

    work = _compute_dtype(mu.dtype)
    mu, sigma, amp = mu.to(work), sigma.to(work), amp.to(work)
    grid_v = v.reshape(b, heads, height, width, d)  # (B, heads, H, W, d)
    if mu.dim() == 3:
        g_row, g_col = _fixed_axis_matrices(mu, sigma, grid)
        g_row = (amp[..., None, None] * g_row).to(v.dtype)  # fold α into the row stage
        g_col = g_col.to(v.dtype)
        # Stage 1 (columns mix): Z[b,h,m,r,c] = Σ_c' G_col[h,m,c,c'] V[b,h,r,c'].
        z = torch.einsum("hmcx,bhrxd->bhmrcd", g_col, grid_v)  # (B, heads, M, H, W, d)
        # Stage 2 (rows mix), summed over atoms: Y[b,h,r,c] = Σ_m Σ_r' α G_row[h,m,r,r'] Z[b,h,m,r',c].
        y = torch.einsum("hmry,bhmycd->bhrcd", g_row, z)  # (B, heads, H, W, d)
        return y.reshape(b, heads, n, d)

    g_row, g_col = _steered_axis_weights(mu, sigma, grid)
    amp = amp.reshape(b, heads, height, width, -1)  # (B, heads, H, W, M)
    g_row = (amp[..., None] * g_row).to(v.dtype)  # (B, heads, H, W, M, H)
    g_col = g_col.to(v.dtype)  # (B, heads, H, W, M, W)
    # Stage 1: Z[b,h,r,c,m] = Σ_c' G_col[b,h,r,c,m,c'] V[b,h,r,c'].
    z = torch.einsum("bhrcmx,bhrxd->bhrcmd", g_col, grid_v)  # (B, heads, H, W, M, d)
    # Stage 2: Y[b,h,r,c] = Σ_m Σ_r' α G_row[b,h,r,c,m,r'] Z[b,h,r',c,m].
    y = torch.einsum("bhrcmy,bhycmd->bhrcd", g_row, z)  # (B, heads, H, W, d)
    return y.reshape(b, heads, n, d)
