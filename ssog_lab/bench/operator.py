"""The operator alone (no model around it) on the CPU: SSoG's torch reference against SDPA.

Forward and forward+backward milliseconds (median of `timing.cpu_time`) of SSoG, fixed and steered,
on the dense and separable paths of the reference, and of SDPA (PyTorch's choice and the math backend),
on square grids, all on the same (batch, heads, N, head_dim) float32 values (`operator_rows`, the benchmark's
table); `operator_timings`: SDPA and fixed SSoG on one image, the best of a short time budget (notebook 02's
live figure), and `flop_counts`: what the same three `OPERATORS` cost by formula, FLOPs and numbers held
(notebook 02's table and cost figure).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..ops import random_atoms
from ..ops.reference import ssog_reference
from .config import check_device, check_distinct
from .measure import machine
from .timing import cpu_time, time_ms

# Notebook 02's three operators, as `operator_timings` times them and `flop_counts` counts them.
OPERATORS = ("SDPA (dense attention)", "SSoG separable", "SSoG via the N×N kernel")


def _math_sdpa(q, k, v):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v)


def _candidates(side: int, batch: int, heads: int, head_dim: int, atoms: int, dense_max_tokens: int,
                generator: torch.Generator, device: str) -> dict:
    """label → a function computing that operator's output (inputs require grad)."""
    n = side * side
    v = torch.randn(batch, heads, n, head_dim, generator=generator).to(device).requires_grad_()  # (B, heads, N, d)
    q, k = (torch.randn_like(v).requires_grad_() for _ in range(2))
    candidates = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v), "sdpa-math": lambda: _math_sdpa(q, k, v)}
    for name in ("fixed", "steered"):
        params = random_atoms(heads, atoms, (side, side), batch=batch, steered=name == "steered", generator=generator,
                              device=device)
        params = [p.requires_grad_() for p in params]
        for dense in (True, False):
            if dense and n > dense_max_tokens:
                continue
            label = f"ssog {name} {'dense' if dense else 'separable'}"
            candidates[label] = lambda p=params, d=dense: ssog_reference(v, *p, (side, side), dense=d)
    return candidates


def operator_rows(sides=(8, 12, 16, 24, 32, 48, 64), batch: int = 8, heads: int = 3, head_dim: int = 64,
                  atoms: int = 4, repeats: int = 5, dense_max_tokens: int = 1024, device: str = "cpu") -> list[dict]:
    """One row per (grid side, operator): forward_ms, forward_backward_ms, the sizes and the machine
    columns (`measure.machine`). `sides`: square grid sides in tokens. Dense paths run up to `dense_max_tokens`
    tokens."""
    for name, value in (("batch", batch), ("heads", heads), ("head_dim", head_dim), ("atoms", atoms),
                        ("repeats", repeats), *(("sides", s) for s in sides)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    check_distinct("sides", sides)
    check_device(device)
    generator = torch.Generator().manual_seed(0)
    provenance = machine()
    rows = []
    for side in sides:
        for label, fn in _candidates(side, batch, heads, head_dim, atoms, dense_max_tokens, generator,
                                     device).items():
            with torch.no_grad():
                forward = cpu_time(fn, repeats=repeats).median_ms
            backward = cpu_time(lambda fn=fn: fn().sum().backward(), repeats=repeats).median_ms
            rows.append(dict(grid=f"{side}×{side}", tokens=side * side, op=label, forward_ms=forward,
                             forward_backward_ms=backward, batch=batch, heads=heads, head_dim=head_dim, atoms=atoms,
                             **provenance))
    return rows


def operator_timings(side: int, d: int = 32, heads: int = 2, atoms: int = 4, dense_max_tokens: int = 2304,
                     seed: int = 0) -> dict[str, float]:
    """Forward milliseconds on this CPU for one image, (heads, N = side², d) float32 values: SDPA, SSoG's
    separable path and SSoG through the N×N kernel (up to `dense_max_tokens` tokens; NaN above)."""
    generator = torch.Generator().manual_seed(seed)
    n = side * side
    q, k, v = (torch.randn(1, heads, n, d, generator=generator) for _ in range(3))  # (1, heads, N, d)
    mu, sigma, amp = random_atoms(heads, atoms, (side, side), generator=generator)  # (heads, M, 2), (heads, M)
    sdpa, separable, dense = OPERATORS
    with torch.no_grad():
        timings = {sdpa: time_ms(lambda: F.scaled_dot_product_attention(q, k, v)),
                   separable: time_ms(lambda: ssog_reference(v, mu, sigma, amp, (side, side), dense=False))}
        timings[dense] = (
            time_ms(lambda: ssog_reference(v, mu, sigma, amp, (side, side), dense=True)) if n <= dense_max_tokens
            else math.nan)
    return timings


def flop_counts(side: int, d: int = 64, atoms: int = 4) -> dict[str, dict[str, float]]:
    """Cost of mixing one head of one image, (N, d) values on a side×side grid (N = side², H = W = side), by
    formula; a multiply–add is 2 FLOPs.

    SDPA: the scores XW_Q(XW_K)ᵀ and AV, 4N²d FLOPs; the math path stores the N×N scores (flash-type kernels do not).
    SSoG separable: stage 1 (column mixing, G_col) 2MNWd + stage 2 (row mixing, G_row) 2MNHd = 2MN(H+W)d; it
    stores M(H² + W²) Gaussian weights and the M·N·d intermediate. SSoG via the N×N kernel: building K costs about
    3MN² (product and sum), KV 2N²d, and K itself is N² numbers.
    Returns {operator (`OPERATORS`): {"flops": …, "memory": numbers held besides the N·d inputs and outputs}}.
    """
    n, h, w = side * side, side, side
    sdpa, separable, dense = OPERATORS
    return {
        sdpa: {"flops": 4.0 * n * n * d, "memory": float(n * n)},
        separable: {"flops": 2.0 * atoms * n * (h + w) * d, "memory": float(atoms * (h * h + w * w) + atoms * n * d)},
        dense: {"flops": 3.0 * atoms * n * n + 2.0 * n * n * d, "memory": float(n * n)},
    }
