"""PyTorch reference of the SSoG operator (docs/DESIGN.md §1).

Two ways to evaluate the same map, chosen per call:

* **separable**: two batched contractions, one per axis — O(M·N·(H+W)·d), never an N×N tensor;
* **dense**: build the N×N kernel once and do one matmul — faster for small grids, where the
  kernel is tiny and a single large GEMM beats several thin ones.

Stage 1 = column mixing: G_col along each row (c → c'), parameters [..., 1]; stage 2 = row mixing: G_row and α
along each column (r → r'), parameters [..., 0]. Weights, the stage-1 intermediate and the atom sum are kept
in float32 for half-precision inputs (as in the Triton kernel); the output is cast once. Both paths are exact
evaluations of docs/DESIGN.md's formulas; tests check them against a brute-force kernel built cell by cell.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

# Fixed parameters, operator built for one call (ssog_reference, ops.ssog; the training step): the dense path
# builds the N×N kernel once per head (its cost, forward and backward, does not grow with the batch) and then does
# 2·N² multiply-adds per head and batch column (B·d columns) in one GEMM of inner size N; the separable path does
# 2·M·(H+W) per token and column, in thin GEMMs (inner size H or W) that run several times slower per FLOP. So the
# dense path pays off on small grids at large B·d: `_fixed_dense_pays_off` picks it when
#     N · (B·d + DENSE_BUILD_COLUMNS) ≤ DENSE_FLOP_RATIO · M·(H+W) · B·d   and   N ≤ DENSE_MAX_TOKENS,
# DENSE_BUILD_COLUMNS being the batch columns whose GEMM costs as much as building the kernel, DENSE_FLOP_RATIO the
# per-FLOP speed of the dense GEMM over the thin ones, and DENSE_MAX_TOKENS a bound on the kernel's memory
# (heads·N² numbers, and as many for its gradient). The constants were fitted on forward + backward times at
# 7×7 and 14×14 tokens, 8-24 heads × 4-8 features, M = 4 and 8, B = 1-128, one thread; nano's training shape is
# timed in docs/results/operator_cpu/fixed_dense_b128_heads8_dim8 (`operator_cpu.md` gives the command).
# A prepared operator (`prepare_fixed`, the SSoGMixer's no-grad cache) is built once for many calls, so only
# applying it counts: the kernel for N ≤ DENSE_MAX_TOKENS_PREPARED (timed as `apply_fixed(v, op)` with
# `op = prepare_fixed(mu, sigma, amp, grid, dense=True/False)` built before the timing loop).
DENSE_MAX_TOKENS = 256
DENSE_BUILD_COLUMNS = 96
DENSE_FLOP_RATIO = 3
DENSE_MAX_TOKENS_PREPARED = 64
# Steered parameters make the dense kernel per image (B·heads·N² entries to build), so it pays off only on
# smaller grids: forward + backward, dense against separable, are level around 5×5 and 6×6 tokens
# (docs/results/operator_cpu/steered_dense_b64_heads8_dim8: B = 64, 8 heads × 8, M = 4, one thread).
DENSE_MAX_TOKENS_STEERED = 25

# The tails of every Gaussian are cut to exact zeros, never left as subnormal floats (which slow CPU matrix
# products many-fold on some processors, forward and backward). The unnormalized weight e_j = exp(λ_j), with
# λ_j = ℓ_j − max ℓ ≤ 0 the logit relative to its maximum, is set to exactly 0 where λ_j·log2(e) is below the
# cutoff of the compute dtype (half types compute in float32), by filling −inf before the exponential (so
# autograd gives exact zeros too). The smallest kept e_j is 2^-50 (float32), and a kept weight e_j / Σe ≥
# 2^-50 / L is a normal float. Error: each dropped weight is < 2^-50 relative to the largest, so one Gaussian's
# weights change by at most L·2^-50 in total (L = 64: 2^-44), far below float32's rounding of 2^-24 (float64:
# L·2^-100 against 2^-53). The Triton kernel uses the same convention.
TAIL_LOG2_CUTOFF = {torch.float32: -50.0, torch.float64: -100.0}
# σ below this floor gives the same weights as σ → 0 in that dtype (one-hot on the nearest grid point, 50/50 at
# an exact tie): every other logit is then far below the cutoff, as |λ| ≥ (half an ulp of the centre)/σ² ≫ 100.
# The floor keeps 1/σ² and its derivative 2/σ³ finite, so a tiny σ gives neither inf nor NaN, forward or backward
# (1/σ is squared, not σ² inverted: the latter's backward passes through 1/σ⁴, which overflows float32).
_SIGMA_FLOOR = {torch.float32: 1e-12, torch.float64: 1e-100}
_LOG2E = 1.0 / math.log(2.0)

def axis_weights(query_pos: Tensor, mu: Tensor, sigma: Tensor, length: int, amp: Tensor | None = None) -> Tensor:
    """Normalized 1-D Gaussian weights g(i → j; μ, σ) for j = 0 … length−1, times amp when given (α·g).

    query_pos, mu, sigma (and amp) broadcast together to a shape S (positions and widths in token units).
    Returns (*S, length) in the compute dtype (float32 for half types): a softmax over j of the logit
    ℓ_j = −(j − i − μ)² / (2σ²), with tails below TAIL_LOG2_CUTOFF exactly zero. Differentiable in all of them,
    through `_AxisWeights` (its backward in closed form).

    The logits are taken relative to the nearest grid point j* (clamped to the axis), where ℓ is largest, as
    the Triton kernel does: λ_j = ℓ_j − ℓ_j* = −u (t* + u/2) / σ² with u = j − j*, t* = j* − i − μ. This
    never subtracts two huge squares, so a centre far off the axis (|μ| ≥ 3e7 in float32) or a tiny σ still
    gives the exact limit (one-hot at the nearest clamped grid point), and λ_j* = 0 needs no running max.
    """
    work = _compute_dtype(mu.dtype)
    query_pos, mu, sigma = query_pos.to(work), mu.to(work), sigma.to(work)
    amp = amp.to(work) if amp is not None else None
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (query_pos, mu, sigma, amp)):
        return _AxisWeights.apply(query_pos, mu, sigma, length, amp)[0]
    weights = _axis_weights(query_pos, mu, sigma, length)[0]
    return weights if amp is None else weights.mul_(amp.unsqueeze(-1))


def _axis_weights(query_pos: Tensor, mu: Tensor, sigma: Tensor, length: int) -> tuple[Tensor, Tensor, Tensor]:
    """`axis_weights` without autograd, in the compute dtype: (weights (*S, L), j* (*S), t* (*S, 1)).

    The steps run in place on one buffer (no allocation per step); the maximum is known (λ = 0 at j*), so there
    is no max pass."""
    mode = (query_pos + mu).round().clamp(0, length - 1)  # (*S): j*, piecewise constant
    # (*S, 1): t* = (j* − i) − μ. The integer j* − i is exact, so only μ is rounded; i + μ as one number would
    # carry the rounding of the grid position too (ulp(150) = 2⁻¹⁶ in float32), amplified by 1/σ² in λ.
    offset = ((mode - query_pos) - mu).unsqueeze(-1)
    # (*S, 1): −log2(e)/σ², so that λ·log2(e) comes out directly and exp2 needs no extra pass.
    scale = sigma.clamp_min(_SIGMA_FLOOR[mu.dtype]).reciprocal().square().mul(-_LOG2E).unsqueeze(-1)
    u = torch.arange(length, device=mu.device, dtype=mu.dtype) - mode.unsqueeze(-1)  # (*S, L): j − j*
    half = torch.add(offset, u, alpha=0.5)  # (*S, L): t* + u/2
    # λ·log2(e) = (u·scale)·(t* + u/2) ≤ 0: both factors stay finite for any finite μ and σ. F.threshold_ keeps
    # λ·log2(e) ≥ cutoff (its threshold is the float just below it) and puts −inf elsewhere, in one pass.
    below = torch.nextafter(torch.tensor(TAIL_LOG2_CUTOFF[mu.dtype]), torch.tensor(-math.inf)).item()
    weights = F.threshold_(u.mul_(scale).mul_(half), below, -math.inf).exp2_()  # (*S, L)
    return weights.div_(weights.sum(dim=-1, keepdim=True)), mode, offset


class _AxisWeights(torch.autograd.Function):
    """`axis_weights` with its backward in closed form, instead of autograd's chain through every elementwise
    step of the forward (each a full pass over the weights, forward and backward, most with an allocation).

    With G the gradient of the output α·g, c = Σ_k g_k G_k (the gradient of α), s_j = α g_j (G_j − c) (the
    softmax's gradient) and u = j − j*:
        ∂/∂μ = ∂/∂i = Σ_j s_j u_j / σ²,    ∂/∂σ = Σ_j s_j u_j (2 t* + u_j) / σ³  (0 where σ is below its floor),
    the derivatives of λ_j = −u_j (t* + u_j/2) / σ² (∂t*/∂μ = −1; j* is piecewise constant). Cut tails have
    g_j = 0, hence s_j = 0: no gradient, as through the −inf the forward puts there. α (one per row) multiplies
    the row sums, not every weight.
    """

    generate_vmap_rule = True  # every step is an ordinary tensor op, so torch.func.vmap batches it as it is

    @staticmethod
    def forward(query_pos: Tensor, mu: Tensor, sigma: Tensor, length: int,
                amp: Tensor | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Returns (α·g, g, j*, t*); the last three are saved for the derivatives, not differentiable. Without α
        the output is g itself, and the second slot an empty tensor (one tensor cannot be both outputs)."""
        weights, mode, offset = _axis_weights(query_pos, mu, sigma, length)
        if amp is None:
            return weights, weights.new_empty(0), mode, offset
        return weights * amp.unsqueeze(-1), weights, mode, offset

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        # A separate setup_context (not a ctx argument of forward) is what torch.func's transforms require
        # (jvp, vjp, vmap: the Lipschitz tools run them through the steered branch).
        query_pos, mu, sigma, _, amp = inputs
        out, weights, mode, offset = output
        weights = out if amp is None else weights
        ctx.mark_non_differentiable(*output[1:])
        ctx.save_for_backward(weights, mode, offset, query_pos, mu, sigma, amp)
        ctx.save_for_forward(weights, mode, offset, sigma, amp)

    @staticmethod
    def jvp(ctx, d_query_pos: Tensor | None, d_mu: Tensor | None, d_sigma: Tensor | None, _: None,
            d_amp: Tensor | None) -> tuple[Tensor, None, None, None]:
        """Forward mode: dλ_j = u_j (dμ + di) / σ² + u_j (2 t* + u_j) dσ / σ³, dg = g (dλ − Σ_k g_k dλ_k), and
        d(α g) = α dg + g dα."""
        weights, mode, offset, sigma, amp = ctx.saved_tensors
        u = torch.arange(weights.shape[-1], device=weights.device, dtype=weights.dtype) - mode.unsqueeze(-1)
        floor = _SIGMA_FLOOR[sigma.dtype]
        inv = sigma.clamp_min(floor).reciprocal().unsqueeze(-1)  # (*S', 1): 1/σ
        d_logit = torch.zeros_like(weights)  # (*S, L): dλ
        for d_shift in (d_query_pos, d_mu):  # λ depends on i and μ only through i + μ
            if d_shift is not None:
                d_logit = d_logit + u * (d_shift.unsqueeze(-1) * inv * inv)
        if d_sigma is not None:
            d_sigma = (d_sigma * (sigma >= floor)).unsqueeze(-1)  # clamp_min passes no tangent below the floor
            d_logit = d_logit + u * (2 * offset + u) * (d_sigma * inv * inv * inv)
        d_weights = weights * (d_logit - (weights * d_logit).sum(dim=-1, keepdim=True))  # (*S, L): dg
        if amp is not None:
            d_weights = d_weights * amp.unsqueeze(-1)
            if d_amp is not None:
                d_weights = d_weights + weights * d_amp.unsqueeze(-1)
        return d_weights, None, None, None

    @staticmethod
    def backward(ctx, grad: Tensor, *_):  # the gradients of g, j*, t* are not used (not differentiable)
        weights, mode, offset, query_pos, mu, sigma, amp = ctx.saved_tensors
        s = weights * grad  # (*S, L)
        c = s.sum(dim=-1, keepdim=True)  # (*S, 1): Σ g G, the gradient of α
        s.addcmul_(weights, c, value=-1.0)  # s_j / α = g_j (G_j − c)
        u = torch.arange(weights.shape[-1], device=mu.device, dtype=mu.dtype) - mode.unsqueeze(-1)  # (*S, L)
        su = s.mul_(u).sum(dim=-1, keepdim=True)  # (*S, 1): Σ s u / α
        su2 = s.mul_(u).sum(dim=-1, keepdim=True)  # (*S, 1): Σ s u² / α
        if amp is not None:
            su, su2 = su * amp.unsqueeze(-1), su2 * amp.unsqueeze(-1)
        floor = _SIGMA_FLOOR[mu.dtype]
        inv = sigma.clamp_min(floor).reciprocal().unsqueeze(-1)  # (*S', 1): 1/σ
        # One factor 1/σ at a time: an exact 0 stays 0 (inv³ alone could overflow, and 0·inf is NaN).
        d_mu = (su * inv * inv).squeeze(-1)  # (*S)
        d_sigma = ((2 * offset * su + su2) * inv * inv * inv).squeeze(-1)
        d_sigma = d_sigma * (sigma >= floor)  # clamp_min passes no gradient below the floor
        # A gradient below the smallest normal float is 0, as a cut tail's weight is (a huge σ's 1/σ² and 1/σ³).
        grads = [_flush(d_mu.sum_to_size(t.shape)) if t.requires_grad else None for t in (query_pos, mu)]
        d_amp = _flush(c.squeeze(-1).sum_to_size(amp.shape)) if amp is not None and amp.requires_grad else None
        return *grads, _flush(d_sigma.sum_to_size(sigma.shape)) if sigma.requires_grad else None, None, d_amp


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Weights and sums are computed in float32 for half types (their range and precision are too narrow)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _positions(length: int, like: Tensor) -> Tensor:
    return torch.arange(length, device=like.device, dtype=like.dtype)


def axis_matrices(mu: Tensor, sigma: Tensor, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """The 1-D Gaussian matrices of fixed atoms: `axis_weights` at every query position of each axis.

    mu, sigma: (..., 2), e.g. (heads, M, 2) or one head's (M, 2), [..., 0] the row axis and [..., 1] the column
    axis. Returns G_row (..., H, H) and G_col (..., W, W), with G[..., i, j] = g(i → j), in the compute dtype on
    mu's device; one head's kernel is Σ_m α_m G_row,m ⊗ G_col,m (`ops.kronecker_kernel`).
    """
    height, width = grid
    # The compute dtype first, as the internal callers do: the query positions are made in mu's dtype, and
    # bfloat16 holds the integers exactly only up to 256.
    work = _compute_dtype(mu.dtype)
    mu, sigma = mu.to(work), sigma.to(work)
    # Query positions (L,) against parameters (..., 1): the weights come out as (..., L, L) directly, with no
    # unit axis in the broadcast (which makes the elementwise ops several times slower).
    g_row = axis_weights(_positions(height, mu), mu[..., None, 0], sigma[..., None, 0], height)
    g_col = axis_weights(_positions(width, mu), mu[..., None, 1], sigma[..., None, 1], width)
    return g_row, g_col  # (..., H, H), (..., W, W)


def _steered_axis_weights(mu: Tensor, sigma: Tensor, grid: tuple[int, int],
                          amp: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Per-token Gaussian weights for steered parameters.

    mu, sigma: (B, heads, N, M, 2); amp (B, heads, N, M) or None. Returns
    G_row (B, heads, W, H, M, H): weights over r' for the output token (r, c), times its α when amp is given,
        stored column-major (c before r) so that the row stage reads them without a copy, and
    G_col (B, heads, H, W, M, W): weights over c' for the output token (r, c).
    """
    height, width = grid
    b, heads, _, atoms, _ = mu.shape
    # unbind, not two selects: its backward stacks both gradients into one buffer, where each select's backward
    # would zero-fill a gradient of the parameters' full size.
    mu_row, mu_col = mu.reshape(b, heads, height, width, atoms, 2).unbind(-1)  # (B, heads, H, W, M) each
    sigma_row, sigma_col = sigma.reshape(b, heads, height, width, atoms, 2).unbind(-1)
    rows = _positions(height, mu)[:, None]  # (H, 1): broadcast over (W, H, M) below
    cols = _positions(width, mu)[:, None]  # (W, 1): broadcast over (H, W, M)
    # The parameters are made contiguous (they are small) so that the weights come out contiguous, ready for the
    # GEMMs: the steering head gives them token-major (B, N, heads, M) in memory.
    mu_row, sigma_row = (t.transpose(2, 3).contiguous() for t in (mu_row, sigma_row))  # (B, heads, W, H, M)
    mu_col, sigma_col = mu_col.contiguous(), sigma_col.contiguous()  # (B, heads, H, W, M)
    if amp is not None:
        amp = amp.reshape(b, heads, height, width, atoms).transpose(2, 3).contiguous()  # (B, heads, W, H, M)
    g_row = axis_weights(rows, mu_row, sigma_row, height, amp)
    g_col = axis_weights(cols, mu_col, sigma_col, width)
    return g_row, g_col  # (B, heads, W, H, M, H), (B, heads, H, W, M, W)


def dense_kernel_reference(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """The N×N kernel K with Y = K V, in the compute dtype. Fixed: (heads, N, N); steered: (B, heads, N, N).

    K[(r,c), (r',c')] = Σ_m α_m g(r → r'; μ_row,m, σ_row,m) g(c → c'; μ_col,m, σ_col,m), where in the
    steered form α and the row Gaussian use the parameters of the output token (r, c) and the column
    Gaussian those of the intermediate token (r', c) (the two axial stages of docs/DESIGN.md §1).
    """
    height, width = grid
    n = height * width
    work = _compute_dtype(mu.dtype)
    mu, sigma, amp = mu.to(work), sigma.to(work), amp.to(work)
    if mu.dim() == 3:
        g_row, g_col = axis_matrices(mu, sigma, grid)
        kernel = torch.einsum("hm,hmry,hmcx->hrcyx", amp, g_row, g_col)  # (heads, H, W, H, W)
        kernel = kernel.reshape(mu.shape[0], n, n)  # (heads, N, N), a copy (einsum leaves it permuted)
        with torch.no_grad():  # in place, and no extra pass in the backward (see _flush)
            return kernel.masked_fill_(kernel.abs() < torch.finfo(kernel.dtype).tiny, 0.0)
    g_row, g_col = _steered_axis_weights(mu, sigma, grid)
    amp = amp.reshape(*amp.shape[:2], height, width, -1)  # (B, heads, H, W, M)
    # g_row[b, h, c, r, m, r'] belongs to the output token (r, c); g_col[b, h, r', c, m, c'] to the
    # intermediate token (r', c).
    kernel = torch.einsum("bhrcm,bhcrmy,bhycmx->bhrcyx", amp, g_row, g_col)  # (B, heads, H, W, H, W)
    return _flush(kernel.reshape(*mu.shape[:2], n, n))


def _flush(kernel: Tensor) -> Tensor:
    """Entries of K below the dtype's smallest normal float set to 0. A product of two kept weights is ≥ 2^-112
    (float32), a normal float, but a small amplitude (|α| < 2^-14) could still make it subnormal; the entries
    dropped are < 2^-126 absolute, against weights that sum to 1. The fixed kernel is flushed in place without
    autograd instead: its gradient treats the flush as the identity, which differs from this one's only on the
    dropped entries, by as little."""
    return kernel.masked_fill(kernel.abs() < torch.finfo(kernel.dtype).tiny, 0.0)


def ssog_reference(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int],
                   dense: bool | None = None) -> Tensor:
    """SSoG in PyTorch. Shapes as in `ssog_lab.ops.ssog` (validated there).

    dense: True forces the N×N-kernel path, False the separable one, None picks by grid, atoms and batch for
    fixed parameters (`_fixed_dense_pays_off`), by grid size for steered ones (DENSE_MAX_TOKENS_STEERED).
    Half-precision v is mixed in float32 and the result cast back once.
    """
    b, heads, n, d = v.shape
    if mu.dim() == 3:
        if dense is None:
            dense = _fixed_dense_pays_off(b * d, mu.shape[1], grid)
        return apply_fixed(v, prepare_fixed(mu, sigma, amp, grid, dense))
    if dense is None:
        dense = n <= DENSE_MAX_TOKENS_STEERED
    work = _compute_dtype(v.dtype)
    x = v.to(work)
    mu, sigma, amp = mu.to(work), sigma.to(work), amp.to(work)
    y = dense_kernel_reference(mu, sigma, amp, grid) @ x if dense else _steered_separable(x, mu, sigma, amp, grid)
    return y.to(v.dtype)  # (B, heads, N, d)


def _fixed_dense_pays_off(columns: int, atoms: int, grid: tuple[int, int]) -> bool:
    """Whether the dense kernel, built for one call, beats the separable path for fixed parameters: columns = B·d
    values per token and head, atoms = M (the cost model next to DENSE_MAX_TOKENS)."""
    height, width = grid
    n = height * width
    return n <= DENSE_MAX_TOKENS and n * (columns + DENSE_BUILD_COLUMNS) <= DENSE_FLOP_RATIO * atoms * (
        height + width) * columns


class FixedOperator(NamedTuple):
    """Fixed-parameter SSoG made ready for one grid, in the compute dtype: either the dense kernel, or the two
    separable factors. It depends on the parameters and the grid only, so it can serve many calls (any batch).

    kernel  (heads, N, N): K, or None;
    row     (heads, M·H, H): α_m G_row,m stacked by atom (the row stage's left factor), or None;
    col_t   (heads, M, W', W): G_col,mᵀ (the column stage's right factor), or None.
    """

    grid: tuple[int, int]
    kernel: Tensor | None
    row: Tensor | None
    col_t: Tensor | None


def prepare_fixed(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int],
                  dense: bool | None = None) -> FixedOperator:
    """Build the Gaussian matrices of fixed parameters mu, sigma (heads, M, 2), amp (heads, M) once, for
    `apply_fixed`. dense: None picks the kernel for N ≤ DENSE_MAX_TOKENS_PREPARED (applying a prepared kernel
    beats the separable factors there). Differentiable in the parameters."""
    height, width = grid
    if dense is None:
        dense = height * width <= DENSE_MAX_TOKENS_PREPARED
    work = _compute_dtype(mu.dtype)
    mu, sigma, amp = mu.to(work), sigma.to(work), amp.to(work)
    if dense:
        return FixedOperator(grid, dense_kernel_reference(mu, sigma, amp, grid), None, None)
    heads, atoms = amp.shape
    g_row, g_col = axis_matrices(mu, sigma, grid)  # (heads, M, H, H), (heads, M, W, W)
    row = (amp[..., None, None] * g_row).reshape(heads, atoms * height, height)  # α folded into the row stage
    return FixedOperator(grid, None, row, g_col.transpose(-1, -2))


def apply_fixed(v: Tensor, op: FixedOperator) -> Tensor:
    """Y = K V for values v (B, heads, N, d) with a prepared fixed operator; (B, heads, N, d) in v's dtype
    (half types are mixed in float32)."""
    work = _compute_dtype(v.dtype)
    x = v.to(work)
    y = _fixed_dense(x, op.kernel.to(work)) if op.kernel is not None else _fixed_separable(x, op)
    return y.to(v.dtype)  # (B, heads, N, d)


def _fixed_dense(v: Tensor, kernel: Tensor) -> Tensor:
    """Y = K V as one GEMM per head for the whole batch: kernel (heads, N, N), v (B, heads, N, d) in the compute
    dtype. `kernel @ v` would broadcast K over the batch, and its backward would reduce B gradients of K."""
    b, heads, n, d = v.shape
    x = v.permute(1, 2, 0, 3).reshape(heads, n, b * d)  # (heads, N', B·d), a copy unless B = 1
    y = torch.bmm(kernel, x).view(heads, n, b, d).permute(2, 1, 0, 3)  # (B, N, heads, d)
    return y.contiguous().transpose(1, 2)  # (B, heads, N, d), token-major as in _token_major


def _token_major(y: Tensor) -> Tensor:
    """(B, H, W, heads, d) laid out token-major, returned as the (B, heads, N, d) view of it: merging the
    heads back into (B, N, heads·d), as a mixer's output projection does, is then free."""
    b, height, width, heads, d = y.shape
    return y.view(b, height * width, heads, d).transpose(1, 2)  # (B, heads, N, d)


def _fixed_separable(v: Tensor, op: FixedOperator) -> Tensor:
    """Fixed SSoG as large GEMMs, one per head and stage, with the factors of `op` (shared by the batch; fixed
    parameters on CUDA take this path too). v is in the compute dtype.

    The values of one head are laid out as a matrix with the row index r' first and everything else
    (b, d, c') behind it, so that the row stage is a single left multiplication for all atoms at once,
    and its result, read per atom as rows (r, b, d) × columns c', feeds the column stage as a right
    multiplication; the atom sum accumulates in place. The order of the two stages does not matter for
    fixed parameters (G_row ⊗ G_col); only the input and the output are permuted.
    """
    height, width = op.grid
    b, heads, n, d = v.shape
    atoms = op.col_t.shape[1]
    row, col_t = op.row.to(v.dtype), op.col_t.to(v.dtype)  # (heads, M·H, H), (heads, M, W', W)
    x = v.reshape(b, heads, height, width, d).permute(1, 2, 0, 4, 3)  # (heads, H, B, d, W)
    x = x.reshape(heads, height, b * d * width)  # (heads, H, B·d·W), a copy
    # row_stage (stage 2; fixed parameters let the stages commute), all atoms in one GEMM per head:
    # Z[h, (m, r), (b, d, c')] = Σ_r' α G_row[h, m, r, r'] X[h, r', ...].
    z = torch.bmm(row, x)  # (heads, M·H, B·d·W)
    # col_stage (stage 1), summed over atoms: Y[h, (r, b, d), c] = Σ_m Σ_c' Z[h, m, (r, b, d), c'] G_col[h, m, c, c'].
    if torch.is_grad_enabled() and (z.requires_grad or col_t.requires_grad):
        # One GEMM per (head, atom), then the sum: the backward of per-atom slices z[:, m] would allocate and
        # zero-fill a full-size gradient of z for every atom.
        z = z.view(heads * atoms, height * b * d, width)  # (heads·M, H·B·d, W'): per atom, rows (r, b, d)
        y = torch.bmm(z, col_t.reshape(heads * atoms, width, width))  # (heads·M, H·B·d, W)
        y = y.view(heads, atoms, height * b * d, width).sum(1)  # (heads, H·B·d, W)
    else:
        # Without autograd, a loop of in-place GEMMs keeps one output buffer instead of M.
        z = z.view(heads, atoms, height * b * d, width)  # (heads, M, H·B·d, W'): per atom, rows (r, b, d)
        y = torch.bmm(z[:, 0], col_t[:, 0])  # (heads, H·B·d, W)
        for m in range(1, atoms):
            y.baddbmm_(z[:, m], col_t[:, m])
    out = y.view(heads, height, b, d, width).permute(2, 1, 4, 0, 3)  # (B, H, W, heads, d)
    return _token_major(out.contiguous())


def _steered_separable(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """Steered SSoG as two batched matmuls over per-token weights (docs/DESIGN.md §1): col_stage (stage 1,
    columns mix along each row), then row_stage (stage 2, rows mix along each column, with α).
    v and the parameters are in the compute dtype."""
    height, width = grid
    b, heads, n, d = v.shape
    atoms = mu.shape[-2]
    # (B, heads, W, H, M, H) with α folded in, (B, heads, H, W, M, W)
    g_row, g_col = _steered_axis_weights(mu, sigma, grid, amp)
    # col_stage, per image row: Z[b,h,r,(c,m)] = Σ_c' G_col[b,h,r,c,m,c'] V[b,h,r,c'].
    rows_v = v.reshape(b * heads * height, width, d)  # (B·heads·H, W, d)
    z = torch.bmm(g_col.reshape(b * heads * height, width * atoms, width), rows_v)  # (B·heads·H, W·M, d)
    z = z.view(b, heads, height, width, atoms, d).permute(0, 1, 3, 4, 2, 5)  # (B, heads, W, M, H', d)
    z = z.reshape(b * heads * width, atoms * height, d)  # per image column, rows (m, r'), a copy
    # row_stage, per image column: Y[b,h,c,r] = Σ_m Σ_r' α G_row[b,h,c,r,m,r'] Z[b,h,c,(m,r')].
    y = torch.bmm(g_row.reshape(b * heads * width, height, atoms * height), z)  # (B·heads·W, H, d)
    out = y.view(b, heads, width, height, d).permute(0, 3, 2, 1, 4)  # (B, H, W, heads, d)
    return _token_major(out.contiguous())
