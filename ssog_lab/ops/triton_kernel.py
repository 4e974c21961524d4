"""SSoG in Triton: a one-pass forward and one fused backward kernel per axial stage.

How the operator maps onto kernels
----------------------------------
SSoG (docs/DESIGN.md §1) is two *axial stages*, each a 1-D Gaussian mixing applied along every line of the grid:

    stage 1 = column mixing: G_col along each row (c → c'), parameters [..., 1]   (col_stage: lines = rows)
        Z[r, i, m] = Σ_j g(i → j; μ_col, σ_col of token (r, i)) · V[r, j]
    stage 2 = row mixing: G_row and α along each column (r → r'), parameters [..., 0]   (row_stage: lines = columns)
        Y[i, c]    = Σ_m α_m Σ_j g(i → j; μ_row, σ_row of token (i, c)) · Z[j, c, m]

with g(i → j) = e_ij / Σ_j e_ij and e_ij = 2^((ℓ_ij − ℓ_ij*)·log2 e), ℓ_ij = −(j − i − μ)² / (2σ²). The maximum
of the quadratic logit over the line is known in closed form — at the grid position j* nearest the centre i + μ
(`_mode`) — so no running max and no separate log-sum-exp pass are needed. Fixed parameters are steered ones
broadcast over batch and tokens with stride 0, so the same kernels serve both forms.

Two kernels, one program per (batch·head, line, …), the whole line of L ≤ MAX_LINE positions in one tile
(BLOCK_L = a power of two ≥ L, `triton_host.line_blocks`), so the N×L weights live only in registers and are built once:

1. `_stage_forward_kernel`  — one program per (batch·head, line, block of BLOCK_I query positions): for each atom,
   the unnormalized weights e (BLOCK_I, BLOCK_L), Σ_j e_ij x_j as one `tl.dot` and Σ_j e_ij as a row sum in the
   same pass; normalized (and scaled by α) per row after the dot. It stores the normalizer 1/Σ_j e_ij per
   (token, atom) for the backward pass.
2. `_stage_backward_kernel` — one program per (batch·head, line): for each atom and block of queries it rebuilds
   the same weights bit for bit, accumulates the adjoint dX = Wᵀ dOut for the whole line (tensor cores), forms
   g_ij = ⟨dOut_i, x_j⟩ (tensor cores), then r_ij = w_ij g_ij − S_i w_ij with S_i = Σ_j w_ij g_ij, and three row
   sums (S, Σ_j r u, Σ_j r u h: see its docstring) give dα, dμ and dσ per (token, atom).

Forward = kernel 1 for stage 1, then for stage 2. Backward = kernel 2 for stage 2, then for stage 1.

Weights (per element: 1 FADD, 1 FFMA, 2 FMUL, the tail select and one MUFU.EX2)
-------------------------------------------------------------------------------
With u = j − j* and t* = j* − i − μ, the shifted logit is ℓ_ij − ℓ_ij* = −u (t* + u/2) / σ². In base 2 it is
(u·s)·(t* + u/2) with the per-query constant s = −log2(e) / σ², so e = exp2((u·s)·(t* + u/2)), exactly 1 at the
mode (so Σ_j e ≥ 1), and ≤ 1 elsewhere. Where the exponent is below TAIL_LOG2_CUTOFF the weight is exactly 0. These
are the torch reference's rules (`ssog_lab.ops.reference.axis_weights`), step for step, so the two agree on every
finite μ and σ:
* j* is i + μ rounded half to even (as torch.round) and clamped to the line; t* + u/2 is then exact where it
  nearly cancels (a centre just off a half-integer), and exactly 0 at a tie (50/50 between two positions);
* both factors stay finite for any finite μ and σ (|μ| = 1e30 included), so where their product overflows it is
  −inf, a weight of exactly 0, never inf·0;
* σ is floored at SIGMA_FLOOR, which keeps s and the backward's 1/σ³ finite and gives the σ → 0 weights below it.
Positions beyond the line get u = FAR = +inf, whose exponent is −inf (or NaN where s = −0, σ > 1.8e19), and the
tail select keeps only exponents ≥ the cutoff, which neither passes: no 2-D mask is needed. Compared with folding
the constants into u·(a·u + b) this costs one FMUL more per weight, but that form rounds b = 2·a·t* and so loses
the exact cancellation near a tie (inf weights and NaN for tiny σ).

Memory traffic (per batch·head, in elements; V, Z, Y in v's dtype; parameters and normalizers float32)
-----------------------------------------------------------------------------------------------------
    forward  stage 1: read V (N·d) + (μ, σ) (2·N·M), write 1/Σe (N·M) and Z (N·M·d)
             stage 2: read Z (N·M·d) + (μ, σ, α) (3·N·M), write 1/Σe (N·M) and Y (N·d)
    backward stage 2: read dY (N·d), Z, parameters, 1/Σe → write dZ (N·M·d) and 3 gradients (3·N·M)
             stage 1: read dZ, V, parameters, 1/Σe → write dV (N·d) and 2 gradients (2·N·M)
The intermediate Z is kept for the backward pass (recomputing it would cost a whole stage-1 forward). The
roofline model of these counts, with an instruction-issue term, is `ssog_lab.ops.roofline`. Tile sizes, autotuning
and the launch itself are host code in `ssog_lab.ops.triton_host`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from .triton_host import INTERPRET, StageParams, _dot_precision, _launch, _tuned, line_blocks, values_6d

# Weights whose base-2 exponent (ℓ − max ℓ)·log2(e) is below this are exactly 0: the same cutoff as the torch
# reference's `ssog_lab.ops.reference.TAIL_LOG2_CUTOFF[torch.float32]` (2^-50 ≈ 9e-16, far below float32
# resolution of a sum ≥ 1; it also keeps exp2 away from subnormals).
TAIL_LOG2_CUTOFF = tl.constexpr(-50.0)
LOG2E = tl.constexpr(1.4426950408889634)
# Source position given to the padding columns beyond a line: +inf makes their exponent −inf or NaN, which the tail
# select drops, whatever the centre (a finite position would be nearer than j* to a centre beyond it).
FAR = tl.constexpr(float("inf"))
# σ is floored here, as in the torch reference (`reference._SIGMA_FLOOR[torch.float32]`): 1/σ² and 1/σ³ stay finite,
# and below it every weight is already the σ → 0 limit (one-hot, 50/50 at a tie). The gradient for σ is 0 below it.
SIGMA_FLOOR = tl.constexpr(1.0e-12)
# 1.5·2^23: for |c| < 2^22, (c + ROUND_MAGIC) − ROUND_MAGIC is c rounded to the nearest integer, ties to even (the
# sum lies in [2^23, 2^24), where float32's spacing is 1); larger |c| lie far beyond any line and are clamped.
ROUND_MAGIC = tl.constexpr(12582912.0)
# The whole line is one tile (the backward kernel accumulates dX over the line in registers): longer lines are
# refused with a ValueError (4096-pixel images at 16-pixel patches are 256 tokens long).
MAX_LINE = 256

# Gradient fields of the per-token gradient tensor (B, heads, H, W, M, 3); constexpr so kernels may read them.
MU, SIGMA, AMP = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)


# ---------------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------------

@triton.jit
def _mode(centre, L):
    """j* = the position on the line nearest the Gaussian's centre i + μ: where the logit ℓ is largest. Rounded half
    to even as torch.round (floor(c + 0.5) would round c = 0.5 − 2^-25 up, as c + 0.5 rounds to 1)."""
    return tl.minimum(tl.maximum((centre + ROUND_MAGIC) - ROUND_MAGIC, 0.0), L - 1.0)


@triton.jit
def _atom(mu_ptr, sigma_ptr, at, ok, pos, L):
    """One atom's Gaussians for query positions pos (BLOCK,): loads (μ, σ) at offsets `at` and returns the mode j*,
    t* = (j* − i) − μ (the integer j* − i is exact, so only μ is rounded, as in the torch reference), σ as loaded
    and the base-2 logit constant s = −log2(e)/σ² of the floored σ (each (BLOCK,))."""
    mu = tl.load(mu_ptr + at, mask=ok, other=0.0)
    sigma = tl.load(sigma_ptr + at, mask=ok, other=1.0)
    i = pos.to(tl.float32)
    mode = _mode(i + mu, L)
    floored = tl.maximum(sigma, SIGMA_FLOOR)
    return mode, (mode - i) - mu, sigma, (1.0 / (floored * floored)) * -LOG2E


@triton.jit
def _weights(u, t_star, s):
    """e = 2^((u·s)·(t* + u/2)), exactly 1 at the mode (u = 0) and exactly 0 below TAIL_LOG2_CUTOFF (or NaN, at the
    padding); u (BLOCK_I, BLOCK_L) = j − j*, t* and s (BLOCK_I, 1)."""
    exponent = (u * s) * (t_star + 0.5 * u)
    return tl.where(exponent >= TAIL_LOG2_CUTOFF, tl.exp2(exponent), 0.0)


@triton.jit
def _line_sources(L, BLOCK_L: tl.constexpr):
    """Source positions of one line as float32 (BLOCK_L,), FAR beyond the line (their weights are then 0)."""
    j = tl.arange(0, BLOCK_L)
    return j, tl.where(j < L, j.to(tl.float32), FAR)


@triton.jit
def _line_base(ptr, bh, line, heads, s_b, s_h, s_line):
    """Pointer to the start of one (batch, head, line): int64 arithmetic here, int32 offsets inside the line."""
    b, h = (bh // heads).to(tl.int64), (bh % heads).to(tl.int64)
    return ptr + b * s_b + h * s_h + line.to(tl.int64) * s_line


# Integer arguments Triton must not specialize on (==1, %16): strides and sizes vary between calls and each
# specialization is one more compilation. The value tiles' position strides stay specialized (their %16 lets
# the loads vectorize).
_NO_SPECIALIZE_FWD = ["heads", "L", "M", "D", "x_sb", "x_sh", "x_sline", "x_satom", "o_sb", "o_sh", "o_sline",
                      "o_satom", "n_sb", "n_sh", "n_sline", "n_spos", "n_satom", "p_sb", "p_sh", "p_sline", "p_spos",
                      "p_satom", "a_sb", "a_sh", "a_sline", "a_spos", "a_satom"]


@triton.jit(do_not_specialize=_NO_SPECIALIZE_FWD)
def _stage_forward_kernel(x_ptr, out_ptr, norm_ptr, mu_ptr, sigma_ptr, amp_ptr, heads, L, M, D,
                          x_sb, x_sh, x_sline, x_spos, x_satom,
                          o_sb, o_sh, o_sline, o_spos, o_satom,
                          n_sb, n_sh, n_sline, n_spos, n_satom,
                          p_sb, p_sh, p_sline, p_spos, p_satom,
                          a_sb, a_sh, a_sline, a_spos, a_satom,
                          X_PER_ATOM: tl.constexpr, SUM_ATOMS: tl.constexpr, HAS_AMP: tl.constexpr,
                          PRECISION: tl.constexpr,
                          BLOCK_I: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[i, m, :] = α_m(i) Σ_j e_ij x[j, m, :] / Σ_j e_ij for BLOCK_I query positions i of one line, all d.

    x: the stage's input, per atom (X_PER_ATOM, stage 2: Z) or shared by all atoms (stage 1: V, loaded once).
    SUM_ATOMS writes Σ_m (stage 2: Y) instead of one output per atom (stage 1: Z). HAS_AMP multiplies by α
    (stage 2 only). norm[i, m] = 1/Σ_j e_ij is stored for the backward kernel. Strides are in elements, per
    (batch, head, line, position, atom); the channel stride of x and out is 1.
    """
    bh, line = tl.program_id(0), tl.program_id(1)
    x_ptr = _line_base(x_ptr, bh, line, heads, x_sb, x_sh, x_sline)
    out_ptr = _line_base(out_ptr, bh, line, heads, o_sb, o_sh, o_sline)
    norm_ptr = _line_base(norm_ptr, bh, line, heads, n_sb, n_sh, n_sline)
    mu_ptr = _line_base(mu_ptr, bh, line, heads, p_sb, p_sh, p_sline)
    sigma_ptr = _line_base(sigma_ptr, bh, line, heads, p_sb, p_sh, p_sline)
    amp_ptr = _line_base(amp_ptr, bh, line, heads, a_sb, a_sh, a_sline)
    i = tl.program_id(2) * BLOCK_I + tl.arange(0, BLOCK_I)  # (BLOCK_I,) query positions
    i_ok = i < L
    j, src = _line_sources(L, BLOCK_L)  # (BLOCK_L,)
    ch = tl.arange(0, BLOCK_D)  # (BLOCK_D,) channels
    x_mask = (j < L)[:, None] & (ch < D)[None, :]
    x_at = j[:, None] * x_spos + ch[None, :]  # (BLOCK_L, BLOCK_D) int32 offsets inside the line
    out_at = i[:, None] * o_spos + ch[None, :]  # (BLOCK_I, BLOCK_D)
    out_mask = i_ok[:, None] & (ch < D)[None, :]
    if not X_PER_ATOM:
        x = tl.load(x_ptr + x_at, mask=x_mask, other=0.0)  # (BLOCK_L, BLOCK_D), shared by all atoms
    total = tl.zeros((BLOCK_I, BLOCK_D), tl.float32)
    for m in range(M):
        if X_PER_ATOM:
            x = tl.load(x_ptr + m * x_satom + x_at, mask=x_mask, other=0.0)
        mode, t_star, sigma, s = _atom(mu_ptr, sigma_ptr, i * p_spos + m * p_satom, i_ok, i, L)
        e = _weights(src[None, :] - mode[:, None], t_star[:, None], s[:, None])  # (BLOCK_I, BLOCK_L)
        inv_sum = 1.0 / tl.sum(e, axis=1)  # (BLOCK_I,): Σ_j e ≥ 1 (e = 1 at the mode)
        tl.store(norm_ptr + i * n_spos + m * n_satom, inv_sum, mask=i_ok)
        if HAS_AMP:
            inv_sum *= tl.load(amp_ptr + i * a_spos + m * a_satom, mask=i_ok, other=0.0)
        y = tl.dot(e.to(x.dtype), x, input_precision=PRECISION) * inv_sum[:, None]  # (BLOCK_I, BLOCK_D)
        if SUM_ATOMS:
            total += y
        else:
            tl.store(out_ptr + m * o_satom + out_at, y.to(out_ptr.dtype.element_ty), mask=out_mask)
    if SUM_ATOMS:
        tl.store(out_ptr + out_at, total.to(out_ptr.dtype.element_ty), mask=out_mask)


_NO_SPECIALIZE_BWD = ["heads", "L", "M", "D", "d_sb", "d_sh", "d_sline", "d_satom", "x_sb", "x_sh", "x_sline",
                      "x_satom", "g_sb", "g_sh", "g_sline", "g_satom", "n_sb", "n_sh", "n_sline", "n_spos", "n_satom",
                      "p_sb", "p_sh", "p_sline", "p_spos", "p_satom", "a_sb", "a_sh", "a_sline", "a_spos", "a_satom",
                      "r_sb", "r_sh", "r_sline", "r_spos", "r_satom"]


@triton.jit(do_not_specialize=_NO_SPECIALIZE_BWD)
def _stage_backward_kernel(dout_ptr, x_ptr, dx_ptr, norm_ptr, mu_ptr, sigma_ptr, amp_ptr, grad_ptr,
                           heads, L, M, D,
                           d_sb, d_sh, d_sline, d_spos, d_satom,
                           x_sb, x_sh, x_sline, x_spos, x_satom,
                           g_sb, g_sh, g_sline, g_spos, g_satom,
                           n_sb, n_sh, n_sline, n_spos, n_satom,
                           p_sb, p_sh, p_sline, p_spos, p_satom,
                           a_sb, a_sh, a_sline, a_spos, a_satom,
                           r_sb, r_sh, r_sline, r_spos, r_satom,
                           X_PER_ATOM: tl.constexpr, DX_SUM_ATOMS: tl.constexpr, HAS_AMP: tl.constexpr,
                           PRECISION: tl.constexpr,
                           BLOCK_I: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    """The whole backward pass of one stage on one line: dx (g_* strides) and the per-token gradients (r_*).

    The stage computes out_i = α Σ_j w_ij x_j, w_ij = e_ij · norm_i. Per atom, over blocks of queries i:
        dx_j += Σ_i α w_ij dOut_i                      (the adjoint, one tl.dot per block; Σ_m if DX_SUM_ATOMS)
        g_ij  = ⟨dOut_i, x_j⟩, S = Σ_j w_ij g_ij        (one tl.dot per block)
        dα = S,   dℓ_j = α w_j (g_j − S),   dμ = Σ_j dℓ_j t_j / σ²,   dσ = Σ_j dℓ_j t_j² / σ³,   t_j = j − i − μ.
    Expanding Σ_j w_j (g_j − S) t_j into sums would cancel catastrophically for tiny σ or a far centre. Since
    Σ_j w_j (g_j − S) = 0, any constant may be subtracted from t and t²: with r_j = w_j (g_j − S), u_j = j − j* (an
    integer, 0 where w is largest) and h_j = t* + u_j/2 (as in the weights: exact near a tie),
        Σ w (g − S) t  = Σ r u,      Σ w (g − S) t² = Σ r (t² − t*²) = 2 Σ (r u) h,
    three row sums (S, Σ r u, Σ r u h) of products that stay finite for any finite μ and σ.
    Stage 2: dOut = dY (shared by the atoms), x = Z_m, dx = dZ_m. Stage 1: dOut = dZ_m, x = V, dx = dV = Σ_m.
    """
    bh, line = tl.program_id(0), tl.program_id(1)
    dout_ptr = _line_base(dout_ptr, bh, line, heads, d_sb, d_sh, d_sline)
    x_ptr = _line_base(x_ptr, bh, line, heads, x_sb, x_sh, x_sline)
    dx_ptr = _line_base(dx_ptr, bh, line, heads, g_sb, g_sh, g_sline)
    norm_ptr = _line_base(norm_ptr, bh, line, heads, n_sb, n_sh, n_sline)
    mu_ptr = _line_base(mu_ptr, bh, line, heads, p_sb, p_sh, p_sline)
    sigma_ptr = _line_base(sigma_ptr, bh, line, heads, p_sb, p_sh, p_sline)
    amp_ptr = _line_base(amp_ptr, bh, line, heads, a_sb, a_sh, a_sline)
    grad_ptr = _line_base(grad_ptr, bh, line, heads, r_sb, r_sh, r_sline)
    j, src = _line_sources(L, BLOCK_L)  # (BLOCK_L,)
    ch = tl.arange(0, BLOCK_D)
    x_mask = (j < L)[:, None] & (ch < D)[None, :]
    dx_at = j[:, None] * g_spos + ch[None, :]  # (BLOCK_L, BLOCK_D)
    xt_at = ch[:, None] + j[None, :] * x_spos  # (BLOCK_D, BLOCK_L): x is only read as the dot's xᵀ
    xt_mask = (ch < D)[:, None] & (j < L)[None, :]
    dx = tl.zeros((BLOCK_L, BLOCK_D), tl.float32)
    for m in range(M):
        if not DX_SUM_ATOMS:
            dx = tl.zeros((BLOCK_L, BLOCK_D), tl.float32)
        for i0 in range(0, L, BLOCK_I):
            i = i0 + tl.arange(0, BLOCK_I)  # (BLOCK_I,) query positions
            i_ok = i < L
            mode, t_star, sigma, s = _atom(mu_ptr, sigma_ptr, i * p_spos + m * p_satom, i_ok, i, L)
            norm = tl.load(norm_ptr + i * n_spos + m * n_satom, mask=i_ok, other=0.0)
            if HAS_AMP:
                amp = tl.load(amp_ptr + i * a_spos + m * a_satom, mask=i_ok, other=0.0)
            else:
                amp = tl.full((BLOCK_I,), 1.0, tl.float32)
            dout = tl.load(dout_ptr + m * d_satom + i[:, None] * d_spos + ch[None, :],
                           mask=i_ok[:, None] & (ch < D)[None, :], other=0.0)  # (BLOCK_I, BLOCK_D), 0 beyond L
            # xᵀ (BLOCK_D, BLOCK_L), re-read per block of queries (from L1/L2): held across the loop it would
            # push the float32 variants past 255 registers.
            x_t = tl.load(x_ptr + m * x_satom + xt_at, mask=xt_mask, other=0.0)
            u = src[None, :] - mode[:, None]  # (BLOCK_I, BLOCK_L)
            w = _weights(u, t_star[:, None], s[:, None]) * norm[:, None]  # normalized weights, as in the forward
            dx += tl.dot(tl.trans((w * amp[:, None]).to(x_t.dtype)), dout, input_precision=PRECISION)
            g = tl.dot(dout, x_t, input_precision=PRECISION)  # (BLOCK_I, BLOCK_L)
            wg = w * g
            s_wg = tl.sum(wg, axis=1)  # S
            r = wg - s_wg[:, None] * w  # w (g − S), 0 at the padding
            # Per weight after w: 1 FMUL, 1 FFMA (r), 1 FMNMX, 1 FFMA (h), 2 FMUL and 3 row sums: one fewer than the
            # five sums Σ w g u^k, Σ w u^k (k ≤ 2) this replaces, which pays for the weights' extra FMUL.
            u = tl.minimum(u, BLOCK_L)  # finite at the padding (u = +inf there), so that r·u = 0
            ru = r * u
            first = tl.sum(ru, axis=1)  # Σ w (g − S) t
            second = 2.0 * tl.sum(ru * (t_star[:, None] + 0.5 * u), axis=1)  # Σ w (g − S) t²
            floored = tl.maximum(sigma, SIGMA_FLOOR)
            inv_var = 1.0 / (floored * floored)  # finite for any σ
            g_at = grad_ptr + i * r_spos + m * r_satom
            tl.store(g_at + MU, amp * first * inv_var, mask=i_ok)
            # Below the floor the weights do not depend on σ (the reference's clamp has gradient 0 there too).
            d_sigma = tl.where(sigma >= SIGMA_FLOOR, amp * second * inv_var / floored, 0.0)
            tl.store(g_at + SIGMA, d_sigma, mask=i_ok)
            if HAS_AMP:
                tl.store(g_at + AMP, s_wg, mask=i_ok)
        if not DX_SUM_ATOMS:
            tl.store(dx_ptr + m * g_satom + dx_at, dx.to(dx_ptr.dtype.element_ty), mask=x_mask)
    if DX_SUM_ATOMS:
        tl.store(dx_ptr + dx_at, dx.to(dx_ptr.dtype.element_ty), mask=x_mask)


# Kernel parts in reading order (notebook 08 shows them one by one): every helper the kernels call, the kernels,
# then the launchers and the autograd Function below (kept beside the kernels: notebook 08 reads them from here).
READING_ORDER = ("_mode", "_atom", "_weights", "_line_sources", "_line_base", "_stage_forward_kernel",
                 "_stage_backward_kernel", "Stage", "stage_forward", "stage_backward", "SSoGFunction")

# The kernels as launched: autotuned on a GPU (`triton_host._tuned`), as they are in the interpreter.
forward_kernel = _tuned(_stage_forward_kernel, ["X_PER_ATOM", "SUM_ATOMS"])
backward_kernel = _tuned(_stage_backward_kernel, ["X_PER_ATOM", "DX_SUM_ATOMS"])


# ---------------------------------------------------------------------------------------------------------------
# Launchers: every tensor is seen as (B, heads, H, W, M, [channels]) and addressed in *stage coordinates*
# (batch b, head h, line, position along the line, atom); the channel dim has stride 1.
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    """One axial stage. axis 1: stage 1 = column mixing (lines are rows, positions columns, parameters [..., 1]);
    axis 0: stage 2 = row mixing with α (lines are columns, positions rows, parameters [..., 0])."""

    axis: int
    grid: tuple[int, int]

    @property
    def lines(self) -> int:
        return self.grid[1 - self.axis]

    @property
    def length(self) -> int:
        return self.grid[self.axis]

    @property
    def field(self) -> int:
        """Which parameter component this stage reads: [..., 0] rows, [..., 1] columns."""
        return self.axis

    def strides(self, t: Tensor) -> tuple[int, int, int, int, int]:
        """(b, h, line, pos, atom) strides in elements of a (B, heads, H, W, M, …) tensor; size-1 dims count as 0
        (broadcast)."""
        s = [st if size > 1 else 0 for st, size in zip(t.stride()[:5], t.shape[:5], strict=True)]
        row, col = s[2], s[3]
        line, pos = (row, col) if self.axis == 1 else (col, row)
        return s[0], s[1], line, pos, s[4]

    def params(self, mu: Tensor, sigma: Tensor, amp: Tensor | None) -> StageParams:
        """This stage's parameters. mu, sigma (heads, M, 2) or (B, heads, N, M, 2); amp (heads, M) or
        (B, heads, N, M) or None."""
        height, width = self.grid

        def view(t: Tensor) -> Tensor:  # (heads, M) → (1, heads, 1, 1, M); (B, heads, N, M) → (B, heads, H, W, M)
            return t[None, :, None, None, :] if t.dim() == 2 else t.unflatten(2, (height, width))

        mu, sigma = (t.float().contiguous()[..., self.field] for t in (mu, sigma))  # (…, M): shared strides
        return StageParams(view(mu), view(sigma), None if amp is None else view(amp.float()))


def stage_forward(stage: Stage, x: Tensor, out: Tensor, params: StageParams, heads: int) -> Tensor:
    """Kernel 1 on one stage: out (B, heads, H, W, M or 1, d) from x (same layout, atom dim 1 = shared by the
    atoms); returns the normalizers 1/Σ_j e_ij, (B, heads, H, W, M) float32."""
    batch, d, atoms = x.shape[0], x.shape[-1], params.mu.shape[-1]
    norm = torch.empty(batch, heads, *stage.grid, atoms, device=x.device, dtype=torch.float32)
    block_l, block_d = line_blocks(stage.length, d, x.element_size())
    amp = params.amp if params.amp is not None else params.mu  # unread when HAS_AMP is False
    grid = lambda meta: (batch * heads, stage.lines, triton.cdiv(stage.length, meta["BLOCK_I"]))
    args = (x, out, norm, params.mu, params.sigma, amp, heads, stage.length, atoms, d,
            *stage.strides(x), *stage.strides(out), *stage.strides(norm), *stage.strides(params.mu),
            *(stage.strides(amp) if params.amp is not None else (0,) * 5))
    consts = dict(X_PER_ATOM=x.shape[4] > 1, SUM_ATOMS=out.shape[4] == 1, HAS_AMP=params.amp is not None,
                  PRECISION=_dot_precision(x), BLOCK_L=block_l, BLOCK_D=block_d)
    _launch(forward_kernel, grid, args, consts)
    return norm


def stage_backward(stage: Stage, dout: Tensor, x: Tensor, dx: Tensor, norm: Tensor, params: StageParams,
                   heads: int) -> Tensor:
    """Kernel 2 on one stage: writes dx (layout of x; atom dim 1 = Σ over atoms) and returns the per-token
    gradients (dμ, dσ, dα) of the stage, (B, heads, H, W, M, 3) float32 (dα is unwritten where the stage has no α)."""
    batch, d, atoms = x.shape[0], x.shape[-1], params.mu.shape[-1]
    grads = torch.empty(batch, heads, *stage.grid, atoms, 3, device=x.device, dtype=torch.float32)
    block_l, block_d = line_blocks(stage.length, d, x.element_size())
    amp = params.amp if params.amp is not None else params.mu
    args = (dout, x, dx, norm, params.mu, params.sigma, amp, grads, heads, stage.length, atoms, d,
            *stage.strides(dout), *stage.strides(x), *stage.strides(dx), *stage.strides(norm),
            *stage.strides(params.mu), *(stage.strides(amp) if params.amp is not None else (0,) * 5),
            *stage.strides(grads))
    consts = dict(X_PER_ATOM=x.shape[4] > 1, DX_SUM_ATOMS=dx.shape[4] == 1, HAS_AMP=params.amp is not None,
                  PRECISION=_dot_precision(x), BLOCK_L=block_l, BLOCK_D=block_d)
    _launch(backward_kernel, (batch * heads, stage.lines), args, consts)
    return grads


def stage_lse(stage: Stage, mu: Tensor, sigma: Tensor, batch: int = 1) -> Tensor:
    """lse_i = log Σ_j exp(ℓ_ij − max_j ℓ_ij) of one stage from the forward kernel's normalizers: (B, heads, H, W, M).

    Runs the forward kernel on a dummy 1-channel input; for teaching (notebook 08) and tests.
    """
    params = stage.params(mu, sigma, None)
    heads = params.mu.shape[1]
    x = torch.zeros(batch, heads, *stage.grid, 1, 1, device=mu.device)  # (B, heads, H, W, 1, d = 1)
    out = torch.empty(batch, heads, *stage.grid, params.mu.shape[-1], 1, device=mu.device)
    return -torch.log(stage_forward(stage, x, out, params, heads))



class SSoGFunction(torch.autograd.Function):
    """Autograd wiring of the Triton SSoG: v (B, heads, N, d) → (B, heads, N, d), gradients for v, μ, σ, α."""

    @staticmethod
    def forward(ctx, v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
        b, heads, n, d = v.shape
        atoms = mu.shape[-2]
        row_stage, col_stage = Stage(0, grid), Stage(1, grid)
        p_col = col_stage.params(mu, sigma, None)
        p_row = row_stage.params(mu, sigma, amp)
        v6 = values_6d(v, grid)  # (B, heads, H, W, 1, d)
        z = v.new_empty(b, heads, *grid, atoms, d)  # (B, heads, H, W, M, d)
        y = v.new_empty(b, heads, *grid, 1, d)  # (B, heads, H, W, 1, d)
        norm_col = stage_forward(col_stage, v6, z, p_col, heads)  # (B, heads, H, W, M)
        norm_row = stage_forward(row_stage, z, y, p_row, heads)
        ctx.save_for_backward(v6, z, norm_col, norm_row, mu, sigma, amp)
        ctx.grid = grid
        return y.view(b, heads, n, d)

    @staticmethod
    @once_differentiable  # the backward kernels are not themselves differentiable
    def backward(ctx, dy: Tensor):
        v6, z, norm_col, norm_row, mu, sigma, amp = ctx.saved_tensors
        b, heads, height, width, atoms, d = z.shape
        row_stage, col_stage = Stage(0, ctx.grid), Stage(1, ctx.grid)
        p_col = col_stage.params(mu, sigma, None)
        p_row = row_stage.params(mu, sigma, amp)
        dy6 = values_6d(dy, ctx.grid)  # (B, heads, H, W, 1, d): the same dY for every atom
        dz = torch.empty_like(z)  # (B, heads, H, W, M, d)
        g_row = stage_backward(row_stage, dy6, z, dz, norm_row, p_row, heads)  # (B, heads, H, W, M, 3)
        dv6 = torch.empty(b, heads, height, width, 1, d, device=z.device, dtype=z.dtype)
        g_col = stage_backward(col_stage, dz, v6, dv6, norm_col, p_col, heads)
        per_token = lambda g: g.view(b, heads, height * width, atoms, *g.shape[5:])  # (B, heads, N, M, ...)
        dmu = per_token(torch.stack([g_row[..., MU.value], g_col[..., MU.value]], dim=-1))  # (B, heads, N, M, 2)
        dsigma = per_token(torch.stack([g_row[..., SIGMA.value], g_col[..., SIGMA.value]], dim=-1))
        damp = per_token(g_row[..., AMP.value])  # (B, heads, N, M)
        if mu.dim() == 3:  # fixed parameters: sum the per-token contributions over batch and tokens
            dmu, dsigma, damp = (g.sum(dim=(0, 2)) for g in (dmu, dsigma, damp))
        need_v, need_mu, need_sigma, need_amp = ctx.needs_input_grad[:4]
        return (dv6.view(b, heads, height * width, d) if need_v else None,
                dmu.to(mu.dtype) if need_mu else None, dsigma.to(sigma.dtype) if need_sigma else None,
                damp.to(amp.dtype) if need_amp else None, None)


def ssog_triton(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """SSoG through the Triton kernels; shapes as in `ssog_lab.ops.ssog` (validated there), fixed or steered.

    v float32, or on GPU also bfloat16 (and float16, which autocast produces on GPUs without bfloat16); weights,
    parameters and accumulation in float32, Z and Y in v's dtype. Lines longer than MAX_LINE are refused.
    """
    allowed = (torch.float32,) if INTERPRET else (torch.float32, torch.bfloat16, torch.float16)
    if v.dtype not in allowed:
        raise ValueError(f"v must be {' or '.join(str(t).removeprefix('torch.') for t in allowed)} for the Triton "
                         f"backend{' in the interpreter' if INTERPRET else ''}, got {v.dtype}")
    if max(grid) > MAX_LINE:
        raise ValueError(f"grid {tuple(grid)}: the Triton backend takes lines of at most MAX_LINE={MAX_LINE} tokens; "
                         "use backend='torch'")
    return SSoGFunction.apply(v, mu, sigma, amp, tuple(grid))
