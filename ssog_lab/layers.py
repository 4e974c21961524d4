"""Token mixers with one interface: forward(x (B, N, C), grid=(H, W)) -> (B, N, C).

* `SSoGMixer`     — value projection, SSoG over the grid, output projection (fixed or steered);
* `SDPAMixer`     — dense self-attention through `scaled_dot_product_attention`;
* `AxialSDPAMixer`— attention along rows, then along columns: the attention peer with SSoG's
                    O(N·√N·d) cost.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from . import ops
from .ops import reference

# The fixed SSoGMixer keeps its prepared Gaussian matrices between no-grad calls only up to this many entries
# (1 MiB in float32; ViT-Tiny's 24 heads × 4 atoms stay below it up to a 36×36 grid, 576² images). Building them
# evaluates heads·M·(H² + W²) Gaussian weights (an exponential and a normalization each, in elementwise passes over
# short rows); applying them costs B·heads·M·N·(H + W)·d multiply–adds, B·side·d times as many operations on a
# square grid, but in thin GEMMs. So for one image on a small grid with narrow heads the build is a share of each
# call worth caching; on a large grid it is a small share, and the matrices would only stay in memory for every layer.
FIXED_CACHE_MAX_ENTRIES = 2**18

_SDPA_BACKENDS = {
    "auto": None,
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def _split_heads(x: Tensor, heads: int) -> Tensor:
    b, n, c = x.shape
    return x.reshape(b, n, heads, c // heads).transpose(1, 2)  # (B, heads, N, d)


def _merge_heads(x: Tensor) -> Tensor:
    b, heads, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, heads * d)  # (B, N, C)


def _check_dims(dim: int, heads: int) -> None:
    if heads < 1 or dim % heads:
        raise ValueError(f"dim={dim} must be a positive multiple of heads={heads}")


def _check_input(x: Tensor, dim: int, grid: tuple[int, int]) -> None:
    if x.dim() != 3 or x.shape[-1] != dim:
        raise ValueError(f"x must have shape (B, N, {dim}), got {tuple(x.shape)}")
    if grid[0] * grid[1] != x.shape[1]:
        raise ValueError(f"x has N={x.shape[1]} tokens but grid {grid[0]}×{grid[1]} holds {grid[0] * grid[1]}")


INIT_AMPLITUDES = ("centre-surround", "blur")  # SSoGMixer's amplitude starts


class SSoGMixer(nn.Module):
    """Separable sum-of-Gaussians token mixer.

    Per head h and atom m: offsets mu (row, col), widths sigma = exp(log_sigma), amplitude amp, all in token
    units. Initialization spreads the atoms over positions and scales: offsets uniform in ±`init_spread`
    tokens, widths geometric across atoms from half a token to `init_spread` tokens (at least half a token).
    ViTConfig sets init_spread to half its grid side, so the atoms start covering the whole grid rather than a
    neighbourhood (docs/DESIGN.md §3: in token units, training moves them only a few tokens). Amplitudes
    (`init_amplitudes`): "centre-surround" (the default) starts them at +1, −1, +1, … from the narrowest atom to
    the widest, so every head begins as a difference of Gaussians that passes edges and contrast; "blur" starts
    them at 1/M each, a positive sum of Gaussians, i.e. a low-pass filter, which shape must build up through
    depth and training (docs/DESIGN.md §3 gives the measurements).
    For fixed atoms more heads are more distinct filters at no extra mixing cost ("heads are nearly free");
    that holds for fixed atoms only: a steered head evaluates M·(H+W) Gaussian weights per token, so the
    steered cost grows with the head count (docs/DESIGN.md §3).

    steered=True adds a light steering head that maps each token to per-atom adjustments
    (Δμ_row, Δμ_col, Δlog σ_row, Δlog σ_col, Δα). It is low-rank — `steer_down` (C → steer_rank, default
    C // 4) then `steer` (steer_rank → heads·M·5) — so that it costs less than the Q and K projections SSoG
    removes (a full C → heads·M·5 map would cost 2.5·C² with heads = C // 8, more than attention's 2·C²).
    `steer` is zero-initialized, so a steered layer starts as its fixed twin.

    Fixed atoms without autograd (torch.no_grad / inference_mode) reuse their Gaussian matrices between calls:
    they depend on the parameters and the grid only, and for one image on a small grid building them is a share of
    each call worth saving (FIXED_CACHE_MAX_ENTRIES's comment gives the counts). The cache
    holds one grid, at most FIXED_CACHE_MAX_ENTRIES numbers, and is rebuilt when the grid, the dtype, or a
    parameter changes: replaced, moved, or updated in place (optimizer steps, load_state_dict and copy_ bump the
    tensor's version counter). Writes through `param.data`, which bypass the counter, are not seen.
    """

    def __init__(self, dim: int, heads: int, atoms: int = 4, steered: bool = False,
                 init_spread: float = 2.0, init_amplitudes: str = "centre-surround", backend: str = "auto",
                 steer_rank: int | None = None):
        super().__init__()
        _check_dims(dim, heads)
        if atoms < 1:
            raise ValueError(f"atoms must be ≥ 1, got {atoms}")
        self.dim, self.heads, self.atoms, self.steered, self.backend = dim, heads, atoms, steered, backend
        self.value = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        if not (math.isfinite(init_spread) and init_spread >= 0):
            raise ValueError(f"init_spread must be a finite number ≥ 0, got {init_spread!r}")
        widest = max(0.5, init_spread)
        # (M,): half a token to `widest`, geometric; one atom sits at their geometric mean
        widths = torch.logspace(math.log10(0.5), math.log10(widest), atoms) if atoms > 1 else \
            torch.tensor([math.sqrt(0.5 * widest)])
        self.mu = nn.Parameter((torch.rand(heads, atoms, 2) * 2 - 1) * init_spread)  # (heads, M, 2)
        self.log_sigma = nn.Parameter(widths.log()[None, :, None].repeat(heads, 1, 2))  # (heads, M, 2)
        if init_amplitudes not in INIT_AMPLITUDES:
            raise ValueError(f"init_amplitudes must be one of {INIT_AMPLITUDES}, got {init_amplitudes!r}")
        # (M,): +1, −1, +1, … with the widths ascending (narrow centres, wider surrounds), or 1/M each
        amps = (-1.0) ** torch.arange(atoms) if init_amplitudes == "centre-surround" \
            else torch.full((atoms,), 1 / atoms)
        self.amp = nn.Parameter(amps[None].repeat(heads, 1))  # (heads, M)
        self.steer_down, self.steer = None, None
        if steered:
            rank = steer_rank or max(1, dim // 4)
            self.steer_down = nn.Linear(dim, rank, bias=False)
            self.steer = nn.Linear(rank, heads * atoms * 5)
            nn.init.zeros_(self.steer.weight)
            nn.init.zeros_(self.steer.bias)
        # (key, operator, parameters) of the last prepared fixed operator, see _fixed_operator
        self._prepared: tuple[tuple, reference.FixedOperator, tuple[Tensor, ...]] | None = None

    def atom_parameters(self, x: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(mu, sigma, amp): fixed shapes (heads, M, 2), (heads, M, 2), (heads, M), or, when steered and
        given tokens x (B, N, C), per-token shapes (B, heads, N, M, 2), (B, heads, N, M, 2), (B, heads, N, M)."""
        if self.steer is None or x is None:
            return self.mu, self.log_sigma.exp(), self.amp
        b, n, _ = x.shape
        delta = self.steer(self.steer_down(x))  # (B, N, heads·M·5)
        delta = delta.reshape(b, n, self.heads, self.atoms, 5).transpose(1, 2)  # (B, heads, N, M, 5)
        # split, not slices: its backward concatenates the three gradients into one buffer, where each slice's
        # backward would zero-fill a gradient of delta's full size.
        d_mu, d_log_sigma, d_amp = delta.split((2, 2, 1), dim=-1)  # (B, heads, N, M, 2 | 2 | 1)
        mu = self.mu[:, None] + d_mu  # (B, heads, N, M, 2)
        sigma = (self.log_sigma[:, None] + d_log_sigma).exp()
        amp = self.amp[:, None] + d_amp.squeeze(-1)  # (B, heads, N, M)
        return mu, sigma, amp

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        _check_input(x, self.dim, grid)
        v = _split_heads(self.value(x), self.heads)  # (B, heads, N, d)
        # Parameters created under inference_mode have no version counter to key a cache on.
        if (self.steer is None and self.backend != "triton" and not torch.is_grad_enabled()
                and not self.mu.is_inference()):
            op = self._fixed_operator(ops._check_grid(grid, v.shape[2]), v.dtype)
            y = reference.apply_fixed(v, op)  # (B, heads, N, d)
        else:
            mu, sigma, amp = self.atom_parameters(x)
            # σ = exp(·) > 0 by construction: skip the value checks (a device sync on GPU).
            y = ops.ssog(v, mu.to(v.dtype), sigma.to(v.dtype), amp.to(v.dtype), grid, backend=self.backend,
                         check_values=False)
        return self.proj(_merge_heads(y))  # (B, N, C)

    def _fixed_operator(self, grid: tuple[int, int], dtype: torch.dtype) -> reference.FixedOperator:
        """The prepared fixed operator for grid and dtype, from the cache when the parameters are unchanged:
        the same objects (compared by identity), at the same version and storage address."""
        params = (self.mu, self.log_sigma, self.amp)
        key = (grid, dtype, *((p._version, p.data_ptr()) for p in params))
        cached = self._prepared
        if cached is not None and cached[0] == key and all(a is b for a, b in zip(cached[2], params, strict=True)):
            return cached[1]
        mu, sigma, amp = self.atom_parameters()
        op = reference.prepare_fixed(mu.to(dtype), sigma.to(dtype), amp.to(dtype), grid)
        entries = sum(t.numel() for t in (op.kernel, op.row, op.col_t) if t is not None)
        self._prepared = (key, op, params) if entries <= FIXED_CACHE_MAX_ENTRIES else None
        return op


class _AttentionBase(nn.Module):
    """Q/K/V projection (packed like nn.MultiheadAttention's in_proj) and output projection."""

    def __init__(self, dim: int, heads: int, backend: str = "auto"):
        super().__init__()
        _check_dims(dim, heads)
        if backend not in _SDPA_BACKENDS:
            raise ValueError(f"backend must be one of {tuple(_SDPA_BACKENDS)}, got {backend!r}")
        self.dim, self.heads, self.backend = dim, heads, backend
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        choice = _SDPA_BACKENDS[self.backend]
        with sdpa_kernel(choice) if choice is not None else nullcontext():
            return F.scaled_dot_product_attention(q, k, v)

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 × (B, N, C)
        return _split_heads(q, self.heads), _split_heads(k, self.heads), _split_heads(v, self.heads)


class SDPAMixer(_AttentionBase):
    """Dense multi-head self-attention: softmax(QKᵀ/√d) V over all N tokens, O(N²·d).

    backend: "auto" (PyTorch picks), "math", "flash", "efficient" or "cudnn" (the last three need a GPU).
    """

    def forward(self, x: Tensor, grid: tuple[int, int] | None = None) -> Tensor:
        if grid is not None:
            _check_input(x, self.dim, grid)
        q, k, v = self._project(x)  # (B, heads, N, d) each
        return self.proj(_merge_heads(self._attend(q, k, v)))  # (B, N, C)


class AxialSDPAMixer(_AttentionBase):
    """Axial attention in SSoG's two stages (docs/DESIGN.md): stage 1 = column mixing, each token attends
    along its row (c → c'); stage 2 = row mixing, the result attends along each column (r → r').

    Both stages reuse the same queries and keys; the second stage's values are the first stage's
    output, so after two stages every token has seen the whole grid, as in SSoG's two axial stages.
    """

    @staticmethod
    def col_stage(t: Tensor, grid: tuple[int, int]) -> Tensor:
        """One sequence per image row: (B, heads, N, d) -> (B, heads·H, W, d)."""
        b, heads, _, d = t.shape
        return t.reshape(b, heads * grid[0], grid[1], d)

    @staticmethod
    def row_stage(t: Tensor, grid: tuple[int, int]) -> Tensor:
        """One sequence per image column: (B, heads, N, d) -> (B, heads·W, H, d)."""
        b, heads, _, d = t.shape
        height, width = grid
        return t.reshape(b, heads, height, width, d).transpose(2, 3).reshape(b, heads * width, height, d)

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        _check_input(x, self.dim, grid)
        height, width = grid
        q, k, v = self._project(x)  # (B, heads, N, d)
        b, heads, n, d = q.shape
        col, row = self.col_stage, self.row_stage
        z = self._attend(col(q, grid), col(k, grid), col(v, grid)).reshape(b, heads, n, d)  # stage 1: c → c'
        y = self._attend(row(q, grid), row(k, grid), row(z, grid))  # (B, heads·W, H, d), stage 2: r → r'
        y = y.reshape(b, heads, width, height, d).transpose(2, 3).reshape(b, heads, n, d)
        return self.proj(_merge_heads(y))  # (B, N, C)
