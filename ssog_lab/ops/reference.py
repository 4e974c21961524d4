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
# Steered parameters make the dense kernel per image (B·heads·N² entries to build), so it pays off only on
# smaller grids: forward + backward at B=64, 8 heads × 8, M=4, one thread, dense vs separable ms:
# 4×4 15.6 / 21.4, 5×5 25.6 / 32.1, 6×6 42.3 / 40.1, 8×8 121.9 / 90.3 (docs/results/operator_cpu.md).
DENSE_MAX_TOKENS_STEERED = 25

# axis_weights normalizes with explicit ops instead of torch.softmax below this many weights, or for axes
# this short (torch.softmax's CPU kernel is slow on short rows: 8-long rows, 131k of them, forward and
# backward in 29 ms against 14 ms explicitly; 64-long rows favour torch.softmax 4×).
_SMALL_SOFTMAX = 2**17
_SHORT_AXIS = 16


def axis_weights(query_pos: Tensor, mu: Tensor, sigma: Tensor, length: int) -> Tensor:
    """Normalized 1-D Gaussian weights g(i → j; μ, σ) for j = 0 … length−1.

    query_pos, mu, sigma broadcast together to a shape S (positions and widths in token units).
    Returns (*S, length): a softmax over j of the logit −(j − i − μ)² / (2σ²), computed in log
    space so that a centre far off the axis or a tiny σ still yields finite weights summing to 1.
    """
    j = torch.arange(length, device=mu.device, dtype=mu.dtype)  # (L,)
    centre = (query_pos + mu).unsqueeze(-1)  # (*S, 1)
    coefficient = (-0.5 / sigma**2).unsqueeze(-1)  # (*S, 1): −1/(2σ²), so the (*S, L) work is sub, square, mul
    logits = (j - centre).square() * coefficient  # (*S, L)
    if logits.numel() >= _SMALL_SOFTMAX and length > _SHORT_AXIS:
        return torch.softmax(logits, dim=-1)
    # torch.softmax has a fixed cost of ~0.3 ms per call on CPU, several times the work on a small grid
    # (measured: (24, 4, 14, 14) in 370 µs against 66 µs for these three ops); same maths, max subtracted.
    weights = (logits - logits.amax(dim=-1, keepdim=True)).exp()
    return weights / weights.sum(dim=-1, keepdim=True)


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
    # Query positions (L,) against parameters (heads, M, 1): the weights come out as (heads, M, L, L)
    # directly, with no unit axis in the broadcast (which makes the elementwise ops several times slower).
    g_row = axis_weights(_positions(height, mu), mu[..., None, 0], sigma[..., None, 0], height)
    g_col = axis_weights(_positions(width, mu), mu[..., None, 1], sigma[..., None, 1], width)
    return g_row, g_col  # (heads, M, H, H), (heads, M, W, W)


def _steered_axis_weights(mu: Tensor, sigma: Tensor, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Per-token Gaussian weights for steered parameters.

    mu, sigma: (B, heads, N, M, 2). Returns
    G_row (B, heads, W, H, M, H): weights over r' for the output token (r, c), stored column-major
        (c before r) so that the row stage reads them without a copy, and
    G_col (B, heads, H, W, M, W): weights over c' for the output token (r, c).
    """
    height, width = grid
    b, heads, _, atoms, _ = mu.shape
    mu = mu.reshape(b, heads, height, width, atoms, 2)  # (B, heads, H, W, M, 2)
    sigma = sigma.reshape(b, heads, height, width, atoms, 2)
    rows = _positions(height, mu)[:, None]  # (H, 1): broadcast over (W, H, M) below
    cols = _positions(width, mu)[:, None]  # (W, 1): broadcast over (H, W, M)
    # Transposed parameters are made contiguous (they are small) so that the weights come out contiguous.
    mu_row, sigma_row = (t[..., 0].transpose(2, 3).contiguous() for t in (mu, sigma))  # (B, heads, W, H, M)
    g_row = axis_weights(rows, mu_row, sigma_row, height)
    g_col = axis_weights(cols, mu[..., 1], sigma[..., 1], width)
    return g_row, g_col  # (B, heads, W, H, M, H), (B, heads, H, W, M, W)


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
    # g_row[b, h, c, r, m, r'] belongs to the output token (r, c); g_col[b, h, r', c, m, c'] to the
    # intermediate token (r', c).
    kernel = torch.einsum("bhrcm,bhcrmy,bhycmx->bhrcyx", amp, g_row, g_col)  # (B, heads, H, W, H, W)
    return kernel.reshape(*mu.shape[:2], n, n)


def ssog_reference(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int],
                   dense: bool | None = None) -> Tensor:
    """SSoG in PyTorch. Shapes as in `ssog_lab.ops.ssog` (validated there).

    dense: True forces the N×N-kernel path, False the separable one, None picks by grid size
    (DENSE_MAX_TOKENS for fixed, DENSE_MAX_TOKENS_STEERED for steered parameters).
    """
    height, width = grid
    b, heads, n, d = v.shape
    if dense is None:
        dense = n <= (DENSE_MAX_TOKENS if mu.dim() == 3 else DENSE_MAX_TOKENS_STEERED)
    if dense:
        kernel = dense_kernel_reference(mu, sigma, amp, grid).to(v.dtype)  # (heads | B·heads, N, N)
        return kernel @ v  # (B, heads, N, d)

    work = _compute_dtype(mu.dtype)
    mu, sigma, amp = mu.to(work), sigma.to(work), amp.to(work)
    if mu.dim() == 3:
        return _fixed_separable(v, mu, sigma, amp, grid)
    return _steered_separable(v, mu, sigma, amp, grid)


def _token_major(y: Tensor) -> Tensor:
    """(B, H, W, heads, d) laid out token-major, returned as the (B, heads, N, d) view of it: merging the
    heads back into (B, N, heads·d), as a mixer's output projection does, is then free."""
    b, height, width, heads, d = y.shape
    return y.view(b, height * width, heads, d).transpose(1, 2)  # (B, heads, N, d)


def _fixed_separable(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """Fixed SSoG as large GEMMs, one per head and stage (the Gaussian matrices are shared by the batch).

    The values of one head are laid out as a matrix with the row index r' first and everything else
    (b, d, c') behind it, so that the row stage is a single left multiplication for all atoms at once,
    and its result, read per atom as rows (r, b, d) × columns c', feeds the column stage as a right
    multiplication; the atom sum accumulates in place. Only the input and the output are permuted.
    """
    height, width = grid
    b, heads, n, d = v.shape
    atoms = mu.shape[1]
    g_row, g_col = _fixed_axis_matrices(mu, sigma, grid)  # (heads, M, H, H), (heads, M, W, W)
    g_row = (amp[..., None, None] * g_row).to(v.dtype)  # fold α into the row stage
    g_col_t = g_col.transpose(-1, -2).to(v.dtype)  # (heads, M, W', W): G_colᵀ, the right factor
    x = v.reshape(b, heads, height, width, d).permute(1, 2, 0, 4, 3)  # (heads, H, B, d, W)
    x = x.reshape(heads, height, b * d * width)  # (heads, H, B·d·W), a copy
    # Row stage, all atoms in one GEMM per head: Z[h, (m, r), (b, d, c')] = Σ_r' α G_row[h, m, r, r'] X[h, r', ...].
    z = torch.bmm(g_row.reshape(heads, atoms * height, height), x)  # (heads, M·H, B·d·W)
    z = z.view(heads, atoms, height * b * d, width)  # (heads, M, H·B·d, W'): per atom, rows (r, b, d)
    # Column stage, summed over atoms: Y[h, (r, b, d), c] = Σ_m Σ_c' Z[h, m, (r, b, d), c'] G_col[h, m, c, c'].
    y = torch.bmm(z[:, 0], g_col_t[:, 0])  # (heads, H·B·d, W)
    for m in range(1, atoms):
        y.baddbmm_(z[:, m], g_col_t[:, m])  # in place: an out-of-place sum would copy y once per atom
    out = y.view(heads, height, b, d, width).permute(2, 1, 4, 0, 3)  # (B, H, W, heads, d)
    return _token_major(out.contiguous())


def _steered_separable(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """Steered SSoG as two batched matmuls over per-token weights (DESIGN.md §1, stages 1 and 2)."""
    height, width = grid
    b, heads, n, d = v.shape
    atoms = mu.shape[-2]
    g_row, g_col = _steered_axis_weights(mu, sigma, grid)  # (B, heads, W, H, M, H), (B, heads, H, W, M, W)
    amp = amp.reshape(b, heads, height, width, atoms).transpose(2, 3).contiguous()  # (B, heads, W, H, M)
    g_row = (amp[..., None] * g_row).to(v.dtype)  # (B, heads, W, H, M, H), α folded in
    g_col = g_col.to(v.dtype)
    # Stage 1, per image row: Z[b,h,r,(c,m)] = Σ_c' G_col[b,h,r,c,m,c'] V[b,h,r,c'].
    rows_v = v.reshape(b * heads * height, width, d)  # (B·heads·H, W, d)
    z = torch.bmm(g_col.reshape(b * heads * height, width * atoms, width), rows_v)  # (B·heads·H, W·M, d)
    z = z.view(b, heads, height, width, atoms, d).permute(0, 1, 3, 4, 2, 5)  # (B, heads, W, M, H', d)
    z = z.reshape(b * heads * width, atoms * height, d)  # per image column, rows (m, r'), a copy
    # Stage 2, per image column: Y[b,h,c,r] = Σ_m Σ_r' α G_row[b,h,c,r,m,r'] Z[b,h,c,(m,r')].
    y = torch.bmm(g_row.reshape(b * heads * width, height, atoms * height), z)  # (B·heads·W, H, d)
    out = y.view(b, heads, width, height, d).permute(0, 3, 2, 1, 4)  # (B, H, W, heads, d)
    return _token_major(out.contiguous())
