"""SSoG in Triton: fused Gaussian-weight evaluation and value aggregation, forward and backward.

How the operator maps onto kernels
----------------------------------
SSoG (DESIGN.md §1) is two *axial stages*. Each stage is one 1-D operation applied along every line of the
grid, with a Gaussian per (output position, atom):

    stage 1, along each row (lines = rows r, positions = columns, L = W):
        Z[r, i, m] = Σ_j g(i → j; μ_col, σ_col of token (r, i)) · V[r, j]
    stage 2, along each column (lines = columns c, positions = rows, L = H):
        Y[i, c]    = Σ_m α_m Σ_j g(i → j; μ_row, σ_row of token (i, c)) · Z[j, c, m]

with g(i → j) = exp(ℓ_ij − lse_i), ℓ_ij = −(j − i − μ)² / (2σ²), lse_i = log Σ_j exp ℓ_ij. Fixed parameters
are steered parameters broadcast over batch and tokens (stride 0), so the same kernels serve both forms. The
row stage's α is one of three per-atom "fields" (μ, σ, α); the column stage's α is 1.

Three kernels, each a loop over the L source positions of one line in blocks, with the N×L weights only
ever living in registers:

1. `_axis_lse_kernel`   — one program per (batch·head, line, block of output positions): the log-sum-exp of
                          the logits over the line, a running sum over blocks of j. Online softmax would also
                          keep a running max; here the max is known in closed form (at the grid position
                          nearest the centre), so the logits are shifted by it exactly (`_shifted_logit`).
2. `_axis_apply_kernel` — one program per (batch·head, line, block of positions, block of d): the weighted sum
                          Σ_j w_ij X_j as tiles `w (BLOCK_O, BLOCK_K) @ X (BLOCK_K, BLOCK_D)`. With
                          TRANSPOSED it computes the adjoint Σ_i w_ij dOut_i instead (the value gradient),
                          recomputing the same weights from the stored lse.
3. `_axis_param_grad_kernel` — one program per (batch·head, line, block of output positions): gradients of μ,
                          σ, α from the softmax Jacobian (see the kernel's docstring).

Forward = (1, 2) for stage 1, then (1, 2) for stage 2. Backward = (2ᵀ, 3) for stage 2, then (2ᵀ, 3) for stage 1.

Memory traffic (per batch·head, in elements; V, Z, Y in v's dtype, lse and parameters in float32)
------------------------------------------------------------------------------------------------
The intermediate Z (B, heads, H, W, M, d) is written by stage 1 and read by stage 2, and kept for the backward
pass. It is the operator's natural intermediate, M times the size of V; recomputing it in the backward pass
would cost a whole stage-1 forward (M·N·W·d FMAs) to save M·N·d·s bytes, and the stage-2 weight gradient
needs it at every source position anyway. What is never written is the N×L weight tensor per atom: weights
are rebuilt in registers from (μ, σ, lse), which is 3 floats per (token, atom) instead of L.

    forward  stage 1: read V (N·d) + params, write lse (N·M, fp32) and Z (N·M·d)
             stage 2: read Z (N·M·d) + params, write lse (N·M) and Y (N·d)
    backward stage 2: read dY, Z → write dZ (N·M·d) and 3 param grads (N·M)
             stage 1: read dZ, V → write dV (N·d) and 2 param grads (N·M)

These are compulsory bytes; tiles of the stage input are re-read once per block of output positions and per
atom, which the L2 cache absorbs on realistic shapes (one line of V is L·d·4 ≤ 64·64·4 bytes = 16 KiB).

Roofline
--------
Each stage does 2·N·L·M·d FLOPs in `tl.dot` (L = W, then H) plus ~10 FP32 operations and one exp per
(i, j, m) and d-block to build the weights; the backward pass doubles the dots (adjoint and ⟨dOut, x⟩).
Intensity ≈ 2·(H+W)·M / (s·(2M + 2)) FLOP/byte: for 64×64 tokens, M = 4, that is ~25 (float32) and ~50
(bfloat16). `roofline()` turns the counts into times on given peaks; with the H200 figures, B = 8, 6 heads,
64×64, d = 64, M = 4, a fixed forward moves 264 MB (bf16) / 516 MB (fp32) and does 12.9 GFLOP of dots:
bfloat16 is memory-bound (0.055 ms; tensor-core dots 0.013 ms, exps 0.048 ms), float32 is bound by the FP32
cores (0.22 ms: the "ieee" dots, exact float32 rather than TF32, run there along with the weights).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# Parameter fields along the last dim of the per-stage parameter tensor (B, heads, H, W, M, 3); constexpr so
# that kernels may read them (Python code uses `.value`).
MU, SIGMA, AMP = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)


# ---------------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------------

@triton.jit
def _mode(centre, L):
    """j* = the position on the line nearest the Gaussian's centre i + μ: where the logit ℓ is largest."""
    return tl.minimum(tl.maximum(tl.floor(centre + 0.5), 0.0), L - 1.0)


@triton.jit
def _shifted_logit(src, mode, centre, inv_two_var):
    """λ = ℓ_j − ℓ_j* = −((u + t*)² − t*²) / (2σ²) = −u (u + 2t*) / (2σ²), with u = j − j*, t* = j* − i − μ.

    All arguments broadcast to one tile of (query i, source j) pairs; returns (λ, u). λ is exactly 0 at the
    mode and ≤ 0 at every j on the line, so the softmax needs no running max, and every kernel that rebuilds
    the weights gets them bit for bit alike even where ℓ itself is huge (tiny σ). The clamp at 0 only acts on
    masked positions beyond the line.
    """
    u = src - mode
    return tl.minimum(-u * (u + 2.0 * (mode - centre)) * inv_two_var, 0.0), u


@triton.jit
def _gaussian(p_at, ok, pos, L):
    """Load one atom's (μ, σ) at the pointers p_at for query positions pos: returns the centre i + μ, the
    nearest grid position j* (_mode), 1/(2σ²) and σ, each (BLOCK,)."""
    mu = tl.load(p_at + MU, mask=ok, other=0.0)
    sigma = tl.load(p_at + SIGMA, mask=ok, other=1.0)
    centre = pos.to(tl.float32) + mu
    return centre, _mode(centre, L), 0.5 / (sigma * sigma), sigma


@triton.jit
def _axis_lse_kernel(p_ptr, lse_ptr, heads, L, M,
                     p_sb, p_sh, p_sline, p_spos, p_satom,
                     l_sb, l_sh, l_sline, l_spos, l_satom,
                     BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    """lse[i, m] = log Σ_j exp(λ_ij), the log-normalizer of the shifted logits, for BLOCK_O positions i of a line.

    Online softmax keeps a running max; here the max of ℓ is known in closed form (at the mode j*), so the
    shifted logits λ ≤ 0 need only a running sum over blocks of j, and nothing of size L is stored.
    """
    bh, line = tl.program_id(0), tl.program_id(1)
    b, h, line = (bh // heads).to(tl.int64), (bh % heads).to(tl.int64), line.to(tl.int64)
    p_ptr += b * p_sb + h * p_sh + line * p_sline  # this program's line of parameters
    lse_ptr += b * l_sb + h * l_sh + line * l_sline
    i = tl.program_id(2) * BLOCK_O + tl.arange(0, BLOCK_O)  # (BLOCK_O,) output positions
    i_ok = i < L
    for m in range(M):
        p_at = p_ptr + i.to(tl.int64) * p_spos + m * p_satom  # (BLOCK_O,) pointers to (μ, σ, α)
        centre, mode, inv_two_var, sigma = _gaussian(p_at, i_ok, i, L)
        run_sum = tl.zeros((BLOCK_O,), tl.float32)
        for k0 in range(0, L, BLOCK_K):
            j = k0 + tl.arange(0, BLOCK_K)  # (BLOCK_K,) source positions
            lam, _ = _shifted_logit(j[None, :].to(tl.float32), mode[:, None], centre[:, None],
                                    inv_two_var[:, None])  # (BLOCK_O, BLOCK_K)
            run_sum += tl.sum(tl.where(j[None, :] < L, tl.exp(lam), 0.0), axis=1)
        tl.store(lse_ptr + i.to(tl.int64) * l_spos + m * l_satom, tl.log(run_sum), mask=i_ok)


@triton.jit
def _axis_apply_kernel(x_ptr, out_ptr, p_ptr, lse_ptr, heads, L, M, D,
                       x_sb, x_sh, x_sline, x_spos, x_satom,
                       o_sb, o_sh, o_sline, o_spos, o_satom,
                       p_sb, p_sh, p_sline, p_spos, p_satom,
                       l_sb, l_sh, l_sline, l_spos, l_satom,
                       TRANSPOSED: tl.constexpr, SUM_ATOMS: tl.constexpr, PRECISION: tl.constexpr,
                       BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[o, m, :] = Σ_k W_m[o, k] · x[k, m, :] for BLOCK_O positions o of one line and BLOCK_D channels.

    W_m[i, j] = α_m(i) · exp(λ_ij − lse_i) is the stage's weight matrix; TRANSPOSED uses W_mᵀ (the adjoint,
    i.e. the gradient with respect to the stage's input). The parameters always belong to the *query* position
    i: the program's own positions o in the forward direction, the loop positions k in the transposed one.
    SUM_ATOMS accumulates Σ_m in registers and writes one output (out's atom stride is then unused); otherwise
    each atom is written at its own atom offset. An atom stride of 0 on x reads the same input for every atom.
    """
    bh, line = tl.program_id(0), tl.program_id(1)
    b, h, line = (bh // heads).to(tl.int64), (bh % heads).to(tl.int64), line.to(tl.int64)
    x_ptr += b * x_sb + h * x_sh + line * x_sline  # this program's line of each tensor
    out_ptr += b * o_sb + h * o_sh + line * o_sline
    p_ptr += b * p_sb + h * p_sh + line * p_sline
    lse_ptr += b * l_sb + h * l_sh + line * l_sline
    num_d_blocks = tl.cdiv(D, BLOCK_D)
    o = (tl.program_id(2) // num_d_blocks) * BLOCK_O + tl.arange(0, BLOCK_O)  # (BLOCK_O,) own positions
    ch = (tl.program_id(2) % num_d_blocks) * BLOCK_D + tl.arange(0, BLOCK_D)  # (BLOCK_D,) channels
    o_ok, ch_ok = o < L, ch < D
    total = tl.zeros((BLOCK_O, BLOCK_D), tl.float32)
    for m in range(M):
        acc = tl.zeros((BLOCK_O, BLOCK_D), tl.float32)
        for k0 in range(0, L, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)  # (BLOCK_K,) loop positions
            k_ok = k < L
            if TRANSPOSED:  # query positions, whose parameters define the Gaussian: the loop's
                q, q_ok = k, k_ok
            else:  # or the program's own
                q, q_ok = o, o_ok
            p_at = p_ptr + q.to(tl.int64) * p_spos + m * p_satom
            centre, mode, inv_two_var, sigma = _gaussian(p_at, q_ok, q, L)
            amp = tl.load(p_at + AMP, mask=q_ok, other=0.0)
            lse = tl.load(lse_ptr + q.to(tl.int64) * l_spos + m * l_satom, mask=q_ok, other=0.0)
            if TRANSPOSED:  # tile[o, k] = W[i = k, j = o]
                lam, _ = _shifted_logit(o[:, None].to(tl.float32), mode[None, :], centre[None, :],
                                        inv_two_var[None, :])  # (BLOCK_O, BLOCK_K)
                w = amp[None, :] * tl.exp(lam - lse[None, :])
            else:  # tile[o, k] = W[i = o, j = k]
                lam, _ = _shifted_logit(k[None, :].to(tl.float32), mode[:, None], centre[:, None],
                                        inv_two_var[:, None])  # (BLOCK_O, BLOCK_K)
                w = amp[:, None] * tl.exp(lam - lse[:, None])
            w = tl.where(o_ok[:, None] & k_ok[None, :], w, 0.0)
            x_at = x_ptr + k.to(tl.int64) * x_spos + m * x_satom  # (BLOCK_K,)
            x = tl.load(x_at[:, None] + ch[None, :], mask=k_ok[:, None] & ch_ok[None, :], other=0.0)
            acc += tl.dot(w.to(x.dtype), x, input_precision=PRECISION)  # (BLOCK_O, BLOCK_D), fp32 accumulate
        if SUM_ATOMS:
            total += acc
        else:
            out_at = out_ptr + o.to(tl.int64) * o_spos + m * o_satom
            tl.store(out_at[:, None] + ch[None, :], acc.to(out_ptr.dtype.element_ty),
                     mask=o_ok[:, None] & ch_ok[None, :])
    if SUM_ATOMS:
        out_at = out_ptr + o.to(tl.int64) * o_spos
        tl.store(out_at[:, None] + ch[None, :], total.to(out_ptr.dtype.element_ty),
                 mask=o_ok[:, None] & ch_ok[None, :])


@triton.jit
def _axis_param_grad_kernel(dout_ptr, x_ptr, p_ptr, lse_ptr, grad_ptr, heads, L, M, D,
                            d_sb, d_sh, d_sline, d_spos, d_satom,
                            x_sb, x_sh, x_sline, x_spos, x_satom,
                            p_sb, p_sh, p_sline, p_spos, p_satom,
                            l_sb, l_sh, l_sline, l_spos, l_satom,
                            g_sb, g_sh, g_sline, g_spos, g_satom, PRECISION: tl.constexpr,
                            BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """Gradients of μ, σ, α for BLOCK_O output positions i of one line (all atoms, one pass over j).

    The stage computes out_i = α Σ_j w_j x_j with w = softmax(ℓ). With g_j = ⟨dOut_i, x_j⟩ and S = Σ_j w_j g_j:
        dα = S,   dℓ_j = α w_j (g_j − S),   dμ = Σ_j dℓ_j t_j / σ²,   dσ = Σ_j dℓ_j t_j² / σ³,   t_j = j − i − μ.
    Expanding Σ_j w_j (g_j − S) t_j into running sums would cancel catastrophically when w is nearly one-hot
    (tiny σ: each term is ~g·t while the result is ~0, and it is then divided by σ³). Because Σ_j w_j (g_j − S)
    = 0, any constant may be subtracted from t: subtracting t* = j* − i − μ at the mode leaves u_j = j − j*,
    an integer that is 0 where the weight is largest, and
        Σ w (g − S) t  = A − S·B,                        A = Σ w g u,  B = Σ w u,
        Σ w (g − S) t² = C − S·E + 2 t* (A − S·B),       C = Σ w g u², E = Σ w u²,
    all accumulated in one pass over blocks of j.
    """
    bh, line = tl.program_id(0), tl.program_id(1)
    b, h, line = (bh // heads).to(tl.int64), (bh % heads).to(tl.int64), line.to(tl.int64)
    dout_ptr += b * d_sb + h * d_sh + line * d_sline  # this program's line of each tensor
    x_ptr += b * x_sb + h * x_sh + line * x_sline
    p_ptr += b * p_sb + h * p_sh + line * p_sline
    lse_ptr += b * l_sb + h * l_sh + line * l_sline
    grad_ptr += b * g_sb + h * g_sh + line * g_sline
    i = tl.program_id(2) * BLOCK_O + tl.arange(0, BLOCK_O)  # (BLOCK_O,) output positions
    i_ok = i < L
    for m in range(M):
        p_at = p_ptr + i.to(tl.int64) * p_spos + m * p_satom
        centre, mode, inv_two_var, sigma = _gaussian(p_at, i_ok, i, L)
        amp = tl.load(p_at + AMP, mask=i_ok, other=0.0)
        lse = tl.load(lse_ptr + i.to(tl.int64) * l_spos + m * l_satom, mask=i_ok, other=0.0)
        dout_at = dout_ptr + i.to(tl.int64) * d_spos + m * d_satom  # (BLOCK_O,)
        s_wg = tl.zeros((BLOCK_O,), tl.float32)  # S
        s_wgu = tl.zeros((BLOCK_O,), tl.float32)  # A
        s_wu = tl.zeros((BLOCK_O,), tl.float32)  # B
        s_wguu = tl.zeros((BLOCK_O,), tl.float32)  # C
        s_wuu = tl.zeros((BLOCK_O,), tl.float32)  # E
        for k0 in range(0, L, BLOCK_K):
            j = k0 + tl.arange(0, BLOCK_K)  # (BLOCK_K,) source positions
            j_ok = j < L
            lam, u = _shifted_logit(j[None, :].to(tl.float32), mode[:, None], centre[:, None],
                                    inv_two_var[:, None])  # (BLOCK_O, BLOCK_K)
            w = tl.where(i_ok[:, None] & j_ok[None, :], tl.exp(lam - lse[:, None]), 0.0)
            x_at = x_ptr + j.to(tl.int64) * x_spos + m * x_satom  # (BLOCK_K,)
            g = tl.zeros((BLOCK_O, BLOCK_K), tl.float32)  # g[i, j] = ⟨dOut_i, x_j⟩
            for d0 in range(0, D, BLOCK_D):
                ch = d0 + tl.arange(0, BLOCK_D)
                ch_ok = ch < D
                dy = tl.load(dout_at[:, None] + ch[None, :], mask=i_ok[:, None] & ch_ok[None, :], other=0.0)
                x = tl.load(x_at[:, None] + ch[None, :], mask=j_ok[:, None] & ch_ok[None, :], other=0.0)
                g += tl.dot(dy, tl.trans(x), input_precision=PRECISION)
            wg = w * g
            s_wg += tl.sum(wg, axis=1)
            s_wgu += tl.sum(wg * u, axis=1)
            s_wu += tl.sum(w * u, axis=1)
            s_wguu += tl.sum(wg * u * u, axis=1)
            s_wuu += tl.sum(w * u * u, axis=1)
        first = s_wgu - s_wg * s_wu  # Σ w (g − S) t
        second = s_wguu - s_wg * s_wuu + 2.0 * (mode - centre) * first  # Σ w (g − S) t²
        g_at = grad_ptr + i.to(tl.int64) * g_spos + m * g_satom
        tl.store(g_at + MU, amp * first / (sigma * sigma), mask=i_ok)
        tl.store(g_at + SIGMA, amp * second / (sigma * sigma * sigma), mask=i_ok)
        tl.store(g_at + AMP, s_wg, mask=i_ok)


# ---------------------------------------------------------------------------------------------------------------
# Block sizes: autotuned on GPU; fixed small blocks in the interpreter (it runs every program in Python).
# ---------------------------------------------------------------------------------------------------------------

def _tuned(kernel, configs: list[dict], fixed: dict, key: list[str]):
    """The kernel with autotuned meta-parameters on GPU, or with `fixed` ones in the interpreter."""
    if INTERPRET:
        return kernel, fixed
    autotune = triton.autotune([triton.Config(c, num_warps=w) for c, w in configs], key=key, cache_results=True)
    return autotune(kernel), {}


_LSE_CONFIGS = [({"BLOCK_O": bo, "BLOCK_K": bk}, 4) for bo in (32, 64) for bk in (32, 64)]
_TILE_CONFIGS = [({"BLOCK_O": bo, "BLOCK_K": bk, "BLOCK_D": bd}, w)
                 for bo, bk, bd, w in ((32, 32, 64, 4), (64, 32, 64, 4), (64, 64, 64, 8), (32, 64, 32, 4),
                                       (64, 32, 32, 4), (128, 32, 64, 8))]
_INTERP_BLOCKS = {"BLOCK_O": 16, "BLOCK_K": 16, "BLOCK_D": 16}

lse_kernel, _LSE_FIXED = _tuned(_axis_lse_kernel, _LSE_CONFIGS, {"BLOCK_O": 16, "BLOCK_K": 16}, ["L", "M"])
apply_kernel, _APPLY_FIXED = _tuned(_axis_apply_kernel, _TILE_CONFIGS, _INTERP_BLOCKS,
                                    ["L", "M", "D", "TRANSPOSED", "SUM_ATOMS"])
param_grad_kernel, _GRAD_FIXED = _tuned(_axis_param_grad_kernel, _TILE_CONFIGS, _INTERP_BLOCKS, ["L", "M", "D"])


# ---------------------------------------------------------------------------------------------------------------
# Launchers: every tensor is seen as (B, heads, H, W, M, last) and addressed in *stage coordinates*
# (batch b, head h, line, position along the axis, atom); the last dim (channels or fields) has stride 1.
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    """One axial stage: axis 1 mixes along rows (columns change), axis 0 along columns (rows change)."""

    axis: int  # which grid coordinate varies along the line: 1 = column (stage 1), 0 = row (stage 2)
    grid: tuple[int, int]

    @property
    def lines(self) -> int:
        return self.grid[1 - self.axis]

    @property
    def length(self) -> int:
        return self.grid[self.axis]

    def strides(self, t: Tensor) -> tuple[int, int, int, int, int]:
        """(b, h, line, pos, atom) strides of a 6-D tensor (B, heads, H, W, M, last); size-1 dims count as 0."""
        s = [st if size > 1 else 0 for st, size in zip(t.stride(), t.shape, strict=True)]
        row, col = s[2], s[3]
        line, pos = (row, col) if self.axis == 1 else (col, row)
        return s[0], s[1], line, pos, s[4]


def _dot_precision(x: Tensor) -> str:
    """tl.dot input precision: exact float32 products ("ieee", not TF32) for float32; bfloat16 ignores it."""
    return "ieee" if x.dtype == torch.float32 else "tf32"


def _stage_lse(stage: Stage, params: Tensor, heads: int) -> Tensor:
    """lse (B, heads, H, W, M) float32 of the stage's logits, for every output token and atom."""
    lse = params.new_empty(params.shape[:-1])
    grid = lambda meta: (params.shape[0] * heads, stage.lines, triton.cdiv(stage.length, meta["BLOCK_O"]))
    lse_kernel[grid](params, lse, heads, stage.length, params.shape[4],
                     *stage.strides(params), *stage.strides(lse[..., None]), **_LSE_FIXED)
    return lse


def _stage_apply(stage: Stage, x: Tensor, out: Tensor, params: Tensor, lse: Tensor, heads: int,
                 transposed: bool, sum_atoms: bool) -> Tensor:
    """Launch the weighted sum (or its adjoint) of one stage; x and out are 6-D views (atom dim may be stride 0)."""
    d = x.shape[-1]
    grid = lambda meta: (x.shape[0] * heads, stage.lines,
                         triton.cdiv(stage.length, meta["BLOCK_O"]) * triton.cdiv(d, meta["BLOCK_D"]))
    apply_kernel[grid](x, out, params, lse, heads, stage.length, params.shape[4], d,
                       *stage.strides(x), *stage.strides(out), *stage.strides(params), *stage.strides(lse[..., None]),
                       TRANSPOSED=transposed, SUM_ATOMS=sum_atoms, PRECISION=_dot_precision(x), **_APPLY_FIXED)
    return out


def _stage_param_grads(stage: Stage, dout: Tensor, x: Tensor, params: Tensor, lse: Tensor, heads: int) -> Tensor:
    """(dμ, dσ, dα) per output token and atom: (B, heads, H, W, M, 3) float32."""
    b, _, height, width, atoms, _ = dout.shape
    grads = torch.empty(b, heads, height, width, atoms, 3, device=dout.device, dtype=torch.float32)
    grid = lambda meta: (b * heads, stage.lines, triton.cdiv(stage.length, meta["BLOCK_O"]))
    param_grad_kernel[grid](dout, x, params, lse, grads, heads, stage.length, atoms, dout.shape[-1],
                            *stage.strides(dout), *stage.strides(x), *stage.strides(params),
                            *stage.strides(lse[..., None]), *stage.strides(grads), PRECISION=_dot_precision(x),
                            **_GRAD_FIXED)
    return grads


def _stage_params(mu: Tensor, sigma: Tensor, amp: Tensor | None, axis: int, batch: int,
                  grid: tuple[int, int]) -> Tensor:
    """Pack (μ, σ, α) of one axis as (B, heads, H, W, M, 3) float32; fixed parameters are a stride-0 broadcast.

    amp None means α = 1 (the column stage).
    """
    height, width = grid
    fields = [mu[..., axis], sigma[..., axis], torch.ones_like(mu[..., axis]) if amp is None else amp]
    packed = torch.stack(fields, dim=-1).float().contiguous()  # (heads, M, 3) or (B, heads, N, M, 3)
    if packed.dim() == 3:
        heads, atoms = packed.shape[:2]
        return packed[None, :, None, None].expand(batch, heads, height, width, atoms, 3)
    return packed.view(batch, packed.shape[1], height, width, packed.shape[3], 3)


class SSoGFunction(torch.autograd.Function):
    """Autograd wiring of the Triton SSoG: v (B, heads, N, d) → (B, heads, N, d), gradients for v, μ, σ, α."""

    @staticmethod
    def forward(ctx, v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
        b, heads, n, d = v.shape
        height, width = grid
        atoms = mu.shape[-2]
        rows, cols = Stage(0, grid), Stage(1, grid)
        p_col = _stage_params(mu, sigma, None, 1, b, grid)  # (B, heads, H, W, M, 3)
        p_row = _stage_params(mu, sigma, amp, 0, b, grid)
        v6 = v.contiguous().view(b, heads, height, width, 1, d).expand(b, heads, height, width, atoms, d)
        z = v.new_empty(b, heads, height, width, atoms, d)  # (B, heads, H, W, M, d)
        y = v.new_empty(b, heads, height, width, 1, d)  # (B, heads, H, W, 1, d)
        lse_col = _stage_lse(cols, p_col, heads)  # (B, heads, H, W, M)
        _stage_apply(cols, v6, z, p_col, lse_col, heads, transposed=False, sum_atoms=False)
        lse_row = _stage_lse(rows, p_row, heads)
        _stage_apply(rows, z, y.expand_as(z), p_row, lse_row, heads, transposed=False, sum_atoms=True)
        ctx.save_for_backward(v6, z, p_col, p_row, lse_col, lse_row, mu, sigma, amp)
        ctx.grid = grid
        return y.view(b, heads, n, d)

    @staticmethod
    @once_differentiable  # the backward kernels are not themselves differentiable
    def backward(ctx, dy: Tensor):
        v6, z, p_col, p_row, lse_col, lse_row, mu, sigma, amp = ctx.saved_tensors
        b, heads, height, width, atoms, d = z.shape
        rows, cols = Stage(0, ctx.grid), Stage(1, ctx.grid)
        need_v, need_mu, need_sigma, need_amp = ctx.needs_input_grad[:4]
        need_params = need_mu or need_sigma or need_amp
        dy6 = dy.contiguous().view(b, heads, height, width, 1, d).expand_as(z)  # same dY for every atom
        # Stage 2 backward: dZ = W_rowᵀ dY per atom; (dμ_row, dσ_row, dα) from the Jacobian.
        dz = torch.empty_like(z)
        _stage_apply(rows, dy6, dz, p_row, lse_row, heads, transposed=True, sum_atoms=False)
        g_row = _stage_param_grads(rows, dy6, z, p_row, lse_row, heads) if need_params else None
        # Stage 1 backward: dV = Σ_m W_colᵀ dZ_m; (dμ_col, dσ_col).
        dv = None
        if need_v:
            dv6 = torch.empty(b, heads, height, width, 1, d, device=z.device, dtype=v6.dtype)
            _stage_apply(cols, dz, dv6.expand_as(z), p_col, lse_col, heads, transposed=True, sum_atoms=True)
            dv = dv6.view(b, heads, height * width, d)
        g_col = _stage_param_grads(cols, dz, v6, p_col, lse_col, heads) if need_params else None
        dmu = dsigma = damp = None
        if need_params:
            per_token = lambda g: g.view(b, heads, height * width, atoms, *g.shape[5:])  # (B, heads, N, M, ...)
            dmu = per_token(torch.stack([g_row[..., MU.value], g_col[..., MU.value]], dim=-1))  # (B, heads, N, M, 2)
            dsigma = per_token(torch.stack([g_row[..., SIGMA.value], g_col[..., SIGMA.value]], dim=-1))
            damp = per_token(g_row[..., AMP.value])  # (B, heads, N, M)
            if mu.dim() == 3:  # fixed parameters: sum the per-token contributions over batch and tokens
                dmu, dsigma, damp = (g.sum(dim=(0, 2)) for g in (dmu, dsigma, damp))
            dmu, dsigma, damp = dmu.to(mu.dtype), dsigma.to(sigma.dtype), damp.to(amp.dtype)
        return (dv, dmu if need_mu else None, dsigma if need_sigma else None, damp if need_amp else None, None)


def ssog_triton(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """SSoG through the Triton kernels; shapes as in `ssog_lab.ops.ssog` (validated there).

    v float32, or on GPU also bfloat16 (and float16, which autocast produces on GPUs without bfloat16); weights
    and accumulation in float32, Z and Y in v's dtype.
    """
    allowed = (torch.float32,) if INTERPRET else (torch.float32, torch.bfloat16, torch.float16)
    if v.dtype not in allowed:
        raise ValueError(f"v must be {' or '.join(str(t).removeprefix('torch.') for t in allowed)} for the Triton "
                         f"backend{' in the interpreter' if INTERPRET else ''}, got {v.dtype}")
    return SSoGFunction.apply(v, mu, sigma, amp, tuple(grid))


# ---------------------------------------------------------------------------------------------------------------
# Roofline estimate
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Peaks:
    """Peak rates of a GPU: bytes/s of DRAM, FLOP/s of the dot units per input dtype, FP32 FLOP/s, exp/s."""

    name: str
    bandwidth: float  # DRAM bytes per second
    dot_flops: dict  # {"float32": FLOP/s of tl.dot with input_precision="ieee", "bfloat16": tensor-core FLOP/s}
    fp32_flops: float  # CUDA-core FP32 FLOP/s (weight construction; also runs the ieee fp32 dots)
    exps: float  # exponentials per second (special-function units)


# NVIDIA H200 SXM data-sheet figures (dense): 4.8 TB/s HBM3e, 67 TFLOP/s FP32, 989 TFLOP/s BF16 tensor cores;
# exp: 16 MUFU ops per clock per SM × 132 SMs × 1.98 GHz.
H200 = Peaks("NVIDIA H200 SXM", 4.8e12, {"float32": 67e12, "bfloat16": 989e12}, 67e12, 16 * 132 * 1.98e9)

# Approximate FP32 operations to build one weight w_ij (position difference, λ, exp argument, α, mask) and to
# accumulate the five Jacobian sums of the parameter-gradient kernel.
_WEIGHT_FLOPS, _GRAD_SUM_FLOPS = 10, 12


@dataclass(frozen=True)
class Roofline:
    """Estimated work of one SSoG call and the time each resource alone would need (seconds)."""

    bytes: float  # compulsory DRAM traffic: every kernel reads its inputs and writes its outputs once
    flops: float  # FLOPs inside tl.dot (2 per multiply-add)
    vector_flops: float  # FP32 FLOPs outside tl.dot (weight construction, gradient sums)
    exps: float  # exponentials
    t_memory: float  # bytes / bandwidth
    t_dot: float  # dot FLOPs / dot peak of the dtype
    t_fp32: float  # CUDA-core time: vector FLOPs, plus the dots themselves for float32 ("ieee" runs there)
    t_exp: float  # exps / exp rate

    @property
    def time_s(self) -> float:
        """Lower bound: the busiest resource."""
        return max(self.t_memory, self.t_dot, self.t_fp32, self.t_exp)

    @property
    def bound(self) -> str:
        """Which resource sets time_s: "memory", "dot", "fp32" or "exp"."""
        times = {"memory": self.t_memory, "dot": self.t_dot, "fp32": self.t_fp32, "exp": self.t_exp}
        return max(times, key=times.get)

    @property
    def intensity(self) -> float:
        """Dot FLOPs per byte of DRAM traffic."""
        return self.flops / self.bytes


def roofline(batch: int, heads: int, grid: tuple[int, int], head_dim: int, atoms: int, *, steered: bool,
             dtype_bytes: int = 4, backward: bool = False, d_blocks: int = 1, peaks: Peaks = H200) -> Roofline:
    """Roofline estimate of the Triton SSoG forward (or backward) pass for the given shapes.

    dtype_bytes: bytes per element of V, Z, Y (4 float32, 2 bfloat16); parameters, lse and parameter gradients
    are float32. d_blocks: how many BLOCK_D tiles cover head_dim (the weights are rebuilt once per d tile).
    """
    height, width = grid
    n, bh, d, m = height * width, batch * heads, head_dim, atoms
    pairs = bh * n * m * (height + width)  # (query i, source j, atom) triples over both stages
    params = 3 * 4 * (bh * n * m if steered else heads * m)  # (μ, σ, α) float32 of one stage
    stats = bh * n * m * 4  # one float32 per (token, atom): lse or one gradient field
    if not backward:
        # V → Z → Y; lse written by the lse kernel and read by the apply kernel; params read by both kernels.
        data = bh * n * d * dtype_bytes * (2 + 2 * m)
        bytes_ = data + 2 * 2 * stats + 2 * 2 * params
        flops = 2 * pairs * d
        exps = pairs * (1 + d_blocks)
        vector = _WEIGHT_FLOPS * exps
    else:
        # Per stage: adjoint (dOut → dInput) and parameter gradients (dOut, input → 3 fields); dY, V: N·d each,
        # Z, dZ: N·M·d each, every one read twice or written once as counted in the module docstring.
        data = bh * n * d * dtype_bytes * (4 + 4 * m)
        bytes_ = data + 2 * 2 * stats + 2 * 2 * params + 2 * 3 * stats
        flops = 2 * (2 * pairs * d)
        exps = pairs * (d_blocks + 1)
        vector = _WEIGHT_FLOPS * exps + _GRAD_SUM_FLOPS * pairs
    dtype = "bfloat16" if dtype_bytes == 2 else "float32"
    t_dot = flops / peaks.dot_flops[dtype]
    t_fp32 = vector / peaks.fp32_flops + (t_dot if dtype == "float32" else 0.0)
    return Roofline(bytes_, flops, vector, exps, bytes_ / peaks.bandwidth, t_dot, t_fp32, exps / peaks.exps)
