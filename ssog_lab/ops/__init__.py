"""The SSoG operator: one functional entry point, two backends (PyTorch reference, Triton kernel).

    ssog(v, mu, sigma, amp, grid, backend="auto") -> (B, heads, N, d)

Parameters are *fixed* (mu, sigma (heads, M, 2); amp (heads, M)) or *steered*, one set per token
(mu, sigma (B, heads, N, M, 2); amp (B, heads, N, M)). `[..., 0]` is the row axis, `[..., 1]` the
column axis; offsets and widths are in token units. See docs/DESIGN.md §1 for the maths.
"""

from __future__ import annotations

import numbers
import os

import torch
from torch import Tensor

from .atoms import random_atoms
from .kronecker import kronecker_kernel, separability_check
from .reference import (
    DENSE_MAX_TOKENS,
    TAIL_LOG2_CUTOFF,
    axis_matrices,
    axis_weights,
    dense_kernel_reference,
    ssog_reference,
)

__all__ = ["ssog", "dense_kernel", "axis_weights", "axis_matrices", "kronecker_kernel", "separability_check",
           "triton_available", "random_atoms", "DENSE_MAX_TOKENS", "TAIL_LOG2_CUTOFF"]

_BACKENDS = ("auto", "torch", "triton")


def _check_grid(grid, n: int | None) -> tuple[int, int]:
    if not (isinstance(grid, (tuple, list)) and len(grid) == 2
            and all(isinstance(g, numbers.Integral) and not isinstance(g, bool) and g >= 1 for g in grid)):
        raise ValueError(f"grid must be a pair (H, W) of positive integers, got {grid!r}")
    height, width = int(grid[0]), int(grid[1])
    if n is not None and height * width != n:
        raise ValueError(f"v has N={n} tokens but grid {height}×{width} holds H·W={height * width}")
    return height, width


def _check_params(mu: Tensor, sigma: Tensor, amp: Tensor, v: Tensor | None, n: int | None,
                  check_values: bool = True) -> bool:
    """Validate shapes and (unless check_values=False) values; return True for steered parameters."""
    for name, t in (("mu", mu), ("sigma", sigma), ("amp", amp)):
        if not isinstance(t, Tensor) or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {type(t).__name__}"
                             + (f" of dtype {t.dtype}" if isinstance(t, Tensor) else ""))
    if mu.shape != sigma.shape:
        raise ValueError(f"sigma must have the shape of mu {tuple(mu.shape)}, got {tuple(sigma.shape)}")
    if mu.dim() not in (3, 5) or mu.shape[-1] != 2:
        raise ValueError("mu must have shape (heads, M, 2) (fixed) or (B, heads, N, M, 2) (steered), "
                         f"got {tuple(mu.shape)}")
    steered = mu.dim() == 5
    if mu.shape[-2] < 1:
        raise ValueError(f"mu must hold at least one atom (M ≥ 1), got shape {tuple(mu.shape)}")
    if 0 in mu.shape[:-2]:
        raise ValueError(f"mu must have B, heads, N ≥ 1, got shape {tuple(mu.shape)}")
    if amp.shape != mu.shape[:-1]:
        raise ValueError(f"amp must have shape {tuple(mu.shape[:-1])} to match mu {tuple(mu.shape)} "
                         f"(mismatched heads/atoms?), got {tuple(amp.shape)}")
    if v is not None:
        if steered and (mu.shape[0] != v.shape[0] or mu.shape[2] != n):
            raise ValueError(f"steered mu {tuple(mu.shape)} must be (B, heads, N, M, 2) with B={v.shape[0]}, "
                             f"N={n} from v {tuple(v.shape)}")
        heads = mu.shape[1] if steered else mu.shape[0]
        if heads != v.shape[1]:
            raise ValueError(f"mu has {heads} heads but v {tuple(v.shape)} has {v.shape[1]}")
    if not check_values:
        return steered
    with torch.no_grad():
        if not bool(torch.isfinite(sigma).all()) or not bool((sigma > 0).all()):
            raise ValueError(f"sigma must be finite and > 0 (min {sigma.min().item():.3g})")
        for name, t in (("mu", mu), ("amp", amp)) + ((("v", v),) if v is not None else ()):
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name} must be finite ({int((~torch.isfinite(t)).sum())} NaN/inf entries)")
    return steered


def triton_available(device: torch.device | str = "cuda") -> bool:
    """True when the Triton backend can run on tensors of `device` (GPU, or CPU under TRITON_INTERPRET=1)."""
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return False
    elif not (device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"):
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _triton_pays_off(v: Tensor, steered: bool) -> bool:
    """backend="auto": Triton for steered parameters on CUDA in a dtype the kernel takes. Fixed parameters
    stay on the reference's GEMM path (two small Gaussian matrices per head and atom, built once per call,
    then large cuBLAS matrix products): predicted faster than the kernel, which rebuilds the weights for every
    token; a prediction until measured on a GPU. float64 always goes to torch (the kernel rejects it)."""
    return (steered and v.is_cuda and v.dtype in (torch.float32, torch.bfloat16, torch.float16)
            and triton_available(v.device))


def ssog(v: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int],
         backend: str = "auto", *, check_values: bool = True) -> Tensor:
    """Apply SSoG to values `v` (B, heads, N, d) on an H×W token grid (N = H·W, row-major).

    backend: "torch" (reference), "triton" (fused kernel; CUDA, or CPU under TRITON_INTERPRET=1),
    "auto" (triton for steered parameters on CUDA in float32/bfloat16/float16 when importable, else torch).
    Returns (B, heads, N, d),
    differentiable in v, mu, sigma and amp.

    check_values=False skips the σ > 0 / finiteness checks of the parameters and of v (shapes are always
    checked): they read tensor values, which costs a device synchronization on a GPU. Callers whose σ is
    positive by construction (SSoGMixer's σ = exp(log σ)) pass False.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if not isinstance(v, Tensor) or v.dim() != 4 or not v.is_floating_point() or 0 in v.shape:
        raise ValueError("v must be a floating-point tensor of shape (B, heads, N, d), all ≥ 1, got "
                         + (f"shape {tuple(v.shape)}" if isinstance(v, Tensor) else type(v).__name__))
    grid = _check_grid(grid, v.shape[2])
    steered = _check_params(mu, sigma, amp, v, v.shape[2], check_values)
    if backend == "auto":
        backend = "triton" if _triton_pays_off(v, steered) else "torch"
    if backend == "triton":
        if not triton_available(v.device):
            raise ValueError(f"backend='triton' cannot run on a {v.device.type} tensor here: it needs CUDA, "
                             "or TRITON_INTERPRET=1 set before triton is imported (CPU interpreter), "
                             "and triton installed")
        from .triton_kernel import ssog_triton

        return ssog_triton(v, mu, sigma, amp, grid)
    return ssog_reference(v, mu, sigma, amp, grid)


def dense_kernel(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """The N×N SSoG kernel K (Y = K V): (heads, N, N) for fixed, (B, heads, N, N) for steered parameters.

    For teaching and tests; the operator itself never builds it except on small grids.
    """
    height, width = _check_grid(grid, None)
    steered = _check_params(mu, sigma, amp, None, None)
    if steered and mu.shape[2] != height * width:
        raise ValueError(f"steered mu {tuple(mu.shape)} has N={mu.shape[2]} but grid {height}×{width} "
                         f"holds {height * width}")
    return dense_kernel_reference(mu, sigma, amp, (height, width))
