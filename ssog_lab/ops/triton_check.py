"""The Triton kernels checked against the torch reference at small sizes, on whatever device runs them (Triton's
CPU interpreter without CUDA, TRITON_INTERPRET=1 set before triton is first imported): stage 1's normalizers
alone (`lse_step`) and the whole operator, forward and backward (`interpreter_check`). Notebook 08 runs both;
the GPU check (`ssog_lab.bench.gpu`) checks the shipped shapes on a GPU.

`triton_kernel` is imported inside `lse_step`: importing this module does not import triton.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from . import axis_weights, random_atoms, ssog


def _atoms(heads: int, atoms: int, grid: tuple[int, int], steered: bool = False,
           seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """`random_atoms` for one image (batch 1 when steered), float32, drawn from `seed`."""
    return random_atoms(heads, atoms, grid, batch=1 if steered else None, steered=steered,
                        generator=torch.Generator().manual_seed(seed))


def lse_step(grid: tuple[int, int] = (3, 5), atoms: int = 2, seed: int = 0) -> dict[str, float]:
    """The forward kernel's normalizers on their own: stage 1 (column mixing, parameters [..., 1]) against torch.

    The kernel stores 1/Σ_j e_ij with e_ij = exp(ℓ_ij − ℓ_ij*) (logits shifted by their maximum, at the grid
    position j* nearest the centre); `triton_kernel.stage_lse` returns lse_i = log Σ_j e_ij from it. Rebuilding
    the weights exp(ℓ_ij − ℓ_ij* − lse_i) from it must give `ops.axis_weights`. grid: (H, W) tokens. Returns the
    largest absolute errors of both, float32.
    """
    from . import triton_kernel as tk

    width = grid[1]
    mu, sigma, _ = _atoms(1, atoms, grid, seed=seed)  # (1, M, 2), (1, M, 2)
    lse = tk.stage_lse(tk.Stage(1, grid), mu, sigma)[0, 0]  # (H, W, M)
    cols = torch.arange(width, dtype=torch.float32)
    centre = cols[:, None] + mu[0, :, 1]  # (W, M): query column i plus μ_col
    logits = -(cols[None, None, :] - centre[..., None]) ** 2 / (2 * sigma[0, :, 1, None] ** 2)  # (W, M, W)
    reference = torch.logsumexp(logits, -1) - logits.max(-1).values  # (W, M)
    weights = torch.exp(logits - logits.max(-1, keepdim=True).values - lse[0][..., None])  # (W, M, W)
    expected = axis_weights(cols[:, None], mu[0, :, 1], sigma[0, :, 1], width)  # (W, M, W)
    return {"max |lse_kernel − lse_torch|": float((lse - reference).abs().max()),
            "max |weights from lse − ops.axis_weights|": float((weights - expected).abs().max())}


def interpreter_check(grid: tuple[int, int] = (3, 5), heads: int = 2, atoms: int = 2, d: int = 4,
                      steered: bool = False, seed: int = 0) -> dict[str, float]:
    """Forward and backward of `ops.ssog(backend="triton")` against the torch reference (float32, one image of
    grid (H, W) tokens, `heads` heads of width d): the largest output error, each gradient's largest error over
    its largest entry, and the seconds the Triton run took (in the interpreter, on a CPU: seconds, not
    microseconds). Runs on CUDA where there is a GPU."""
    generator = torch.Generator().manual_seed(seed + 1)
    v = torch.randn(1, heads, grid[0] * grid[1], d, generator=generator)  # (B, heads, N, d)
    params = _atoms(heads, atoms, grid, steered=steered, seed=seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results, grads = {}, {}
    for backend in ("triton", "torch"):
        inputs = [t.clone().to(device).requires_grad_() for t in (v, *params)]
        start = time.perf_counter()
        y = ssog(*inputs, grid, backend=backend)
        (y * torch.linspace(-1, 1, y.numel(), device=device).reshape(y.shape)).sum().backward()
        if device == "cuda":
            torch.cuda.synchronize()
        results[backend], grads[backend] = y.detach().cpu(), [t.grad.cpu() for t in inputs]
        if backend == "triton":
            seconds = time.perf_counter() - start
    out = {"max |Y_triton − Y_torch|": float((results["triton"] - results["torch"]).abs().max())}
    for name, a, b in zip(("v", "mu", "sigma", "amp"), grads["triton"], grads["torch"], strict=True):
        out[f"max |d{name} error| / max |d{name}|"] = float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
    out["seconds (triton forward + backward)"] = seconds
    return out
