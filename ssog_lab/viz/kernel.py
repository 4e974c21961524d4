"""Notebook 08: read the Triton kernel (`ssog_lab.ops.triton_kernel`), check it in Triton's CPU interpreter
against the torch reference, and time it on a GPU.

`ssog_lab.ops.triton_kernel` is imported inside the functions: on a CPU the interpreter must be switched on
(TRITON_INTERPRET=1) before triton is first imported, and importing `ssog_lab.viz` must not import it.
"""

from __future__ import annotations

import inspect
import math
import time

import ipywidgets as widgets
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import ops
from ..bench import cuda_time_ms
from ._base import LiveFigure
from .common import as_array, heatmap, image_axes, photo_grid

# The parts of the kernel module in reading order: the same list as `triton_kernel.READING_ORDER` (spelled out here
# because importing ssog_lab.viz must not import triton; tests/test_triton.py checks that the two agree).
KERNEL_PARTS = ("_mode", "_atom", "_weights", "_line_sources", "_line_base", "_stage_forward_kernel",
                "_stage_backward_kernel", "Stage", "stage_forward", "stage_backward", "SSoGFunction")


def _kernel_module():
    from ..ops import triton_kernel

    return triton_kernel


def kernel_source(name: str) -> str:
    """The source code of one part of `ssog_lab.ops.triton_kernel` (a @triton.jit function is unwrapped)."""
    if name not in KERNEL_PARTS:
        raise ValueError(f"name must be one of {KERNEL_PARTS}, got {name!r}")
    obj = getattr(_kernel_module(), name)
    return inspect.getsource(getattr(obj, "fn", obj))


def show_source(name: str):
    """`kernel_source(name)` as a Markdown code block (JupyterLab highlights it) for a notebook."""
    from IPython.display import Markdown

    return Markdown(f"```python\n{kernel_source(name)}\n```")


# `viz.random_atoms` is the library's one distribution of example atoms (`ssog_lab.ops.random_atoms`).
random_atoms = ops.random_atoms


def _atoms(heads: int, atoms: int, grid: tuple[int, int], steered: bool = False,
           seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """`ops.random_atoms` for one image (batch 1 when steered), float32, drawn from `seed`."""
    return ops.random_atoms(heads, atoms, grid, batch=1 if steered else None, steered=steered,
                            generator=torch.Generator().manual_seed(seed))


def lse_step(grid: tuple[int, int] = (3, 5), atoms: int = 2, seed: int = 0) -> dict[str, float]:
    """The forward kernel's normalizers on their own: stage 1 (column mixing, parameters [..., 1]) against torch.

    The kernel stores 1/Σ_j e_ij with e_ij = exp(ℓ_ij − ℓ_ij*) (logits shifted by their maximum, at the grid
    position j* nearest the centre); `triton_kernel.stage_lse` returns lse_i = log Σ_j e_ij from it. Rebuilding
    the weights exp(ℓ_ij − ℓ_ij* − lse_i) from it must give `ops.axis_weights`. Returns the largest errors of
    both, float32.
    """
    tk = _kernel_module()
    height, width = grid
    mu, sigma, amp = _atoms(1, atoms, grid, seed=seed)  # (1, M, 2), (1, M)
    lse = tk.stage_lse(tk.Stage(1, grid), mu, sigma)[0, 0]  # (H, W, M)
    cols = torch.arange(width, dtype=torch.float32)
    centre = cols[:, None] + mu[0, :, 1]  # (W, M): query column i plus μ_col
    logits = -(cols[None, None, :] - centre[..., None]) ** 2 / (2 * sigma[0, :, 1, None] ** 2)  # (W, M, W)
    reference = torch.logsumexp(logits, -1) - logits.max(-1).values  # (W, M)
    weights = torch.exp(logits - logits.max(-1, keepdim=True).values - lse[0][..., None])  # (W, M, W)
    expected = ops.axis_weights(cols[:, None], mu[0, :, 1], sigma[0, :, 1], width)  # (W, M, W)
    return {"max |lse_kernel − lse_torch|": float((lse - reference).abs().max()),
            "max |weights from lse − ops.axis_weights|": float((weights - expected).abs().max())}


def interpreter_check(grid: tuple[int, int] = (3, 5), heads: int = 2, atoms: int = 2, d: int = 4,
                      steered: bool = False, seed: int = 0) -> dict[str, float]:
    """Forward and backward of `ops.ssog(backend="triton")` against the torch reference (float32), and the
    seconds the Triton run took (in the interpreter, on a CPU: seconds, not microseconds)."""
    generator = torch.Generator().manual_seed(seed + 1)
    v = torch.randn(1, heads, grid[0] * grid[1], d, generator=generator)
    params = _atoms(heads, atoms, grid, steered=steered, seed=seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results, grads = {}, {}
    for backend in ("triton", "torch"):
        inputs = [t.clone().to(device).requires_grad_() for t in (v, *params)]
        start = time.perf_counter()
        y = ops.ssog(*inputs, grid, backend=backend)
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


def interpreter_widget(side: int = 8) -> LiveFigure:
    """One atom applied to a side×side photo grid by the Triton kernel and by the torch reference, with their
    difference. Sliders for σ and μ_col, a checkbox for steered parameters (μ_col then grows along each row)."""
    image = photo_grid("camera", side).float()  # (side, side)
    grid = (side, side)
    v = image.reshape(1, 1, side * side, 1)  # (B, heads, N, d = 1)
    controls = {
        "sigma": widgets.FloatSlider(value=1.5, min=0.3, max=4.0, step=0.1, description="σ",
                                     continuous_update=False),
        "mu_col": widgets.FloatSlider(value=1.0, min=-side, max=side, step=0.5, description="μ_col",
                                      continuous_update=False),
        "steered": widgets.Checkbox(value=False, description="steered (μ_col varies per token)", indent=False,
                                    layout=widgets.Layout(width="auto")),  # the whole label, never cut
    }
    figure = make_subplots(rows=1, cols=3, horizontal_spacing=0.05,
                           subplot_titles=("Triton kernel", "torch reference", "|difference|"))
    for col in (1, 2):
        figure.add_trace(heatmap(image, showscale=False), row=1, col=col)
    figure.add_trace(heatmap(image, colorscale="Magma", colorbar={"exponentformat": "e"}), row=1, col=3)
    figure.update_layout(height=330, width=900, margin={"t": 40, "b": 10})
    image_axes(figure)

    def redraw(fig: go.Figure, sigma: float, mu_col: float, steered: bool) -> str:
        mu = torch.tensor([[[0.0, mu_col]]])  # (heads=1, M=1, 2)
        sigmas = torch.full((1, 1, 2), sigma)
        amp = torch.ones(1, 1)
        if steered:  # per token: μ_col rises from 0 at column 0 to mu_col at the last column
            ramp = torch.arange(side, dtype=torch.float32).repeat(side) / max(side - 1, 1)  # (N,)
            mu = torch.stack([torch.zeros_like(ramp), ramp * mu_col], -1).reshape(1, 1, side * side, 1, 2)
            sigmas = sigmas.reshape(1, 1, 1, 1, 2).expand(1, 1, side * side, 1, 2).contiguous()
            amp = torch.ones(1, 1, side * side, 1)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        start = time.perf_counter()
        fast = ops.ssog(v.to(device), mu.to(device), sigmas.to(device), amp.to(device), grid, backend="triton")
        seconds = time.perf_counter() - start
        reference = ops.ssog(v, mu, sigmas, amp, grid, backend="torch")
        fast = fast.cpu().reshape(grid)
        reference = reference.reshape(grid)
        fig.data[0].z, fig.data[1].z = as_array(fast), as_array(reference)
        fig.data[2].z = as_array((fast - reference).abs())
        where = "the interpreter (CPU)" if device == "cpu" else "the GPU"
        kind = "steered" if steered else "fixed"
        return (f"max |Triton − torch| = {float((fast - reference).abs().max()):.2e} · {kind} parameters · "
                f"{seconds:.2f} s in {where}")

    return LiveFigure(figure, controls, redraw)


def gpu_timings(sides: tuple[int, ...] = (16, 32, 64), batch: int = 8, heads: int = 6, d: int = 64, atoms: int = 4,
                dtype: torch.dtype = torch.float32, repeats: int = 20) -> list[dict]:
    """Milliseconds per call on the GPU (CUDA events, median of `repeats` after warm-up) of SSoG's Triton kernel
    and the torch reference, forward and forward + backward, fixed parameters. Needs CUDA."""
    if not torch.cuda.is_available():
        raise ValueError("gpu_timings needs a CUDA GPU; this machine has none")
    rows = []
    for side in sides:
        grid, n = (side, side), side * side
        v = torch.randn(batch, heads, n, d, device="cuda", dtype=dtype, requires_grad=True)
        mu, sigma, amp = (t.cuda().requires_grad_() for t in _atoms(heads, atoms, grid))
        for backend in ("triton", "torch"):
            run = lambda b=backend: ops.ssog(v, mu, sigma, amp, grid, backend=b)
            step = lambda r=run: r().float().square().mean().backward()
            rows.append({"side": side, "tokens": n, "backend": backend,
                         "forward_ms": _forward_ms(run, repeats),
                         "forward_backward_ms": cuda_time_ms(step, min_repeats=repeats, min_seconds=0),
                         "batch": batch, "heads": heads, "d": d, "atoms": atoms, "dtype": str(dtype)})
    return rows


def _forward_ms(run, repeats: int) -> float:
    with torch.no_grad():
        return cuda_time_ms(run, min_repeats=repeats, min_seconds=0)


def gpu_timing_figure(rows: list[dict]) -> go.Figure:
    """`gpu_timings` rows as ms against tokens (log–log), one line per backend and pass."""
    figure = go.Figure()
    for backend in dict.fromkeys(r["backend"] for r in rows):
        mine = [r for r in rows if r["backend"] == backend]
        for key, dash in (("forward_ms", "solid"), ("forward_backward_ms", "dot")):
            figure.add_trace(go.Scatter(x=[r["tokens"] for r in mine], y=[r[key] for r in mine], mode="lines+markers",
                                        name=f"{backend}, {key.removesuffix('_ms').replace('_', ' + ')}",
                                        line={"dash": dash}))
    figure.update_layout(xaxis={"type": "log", "title": "tokens N"}, yaxis={"type": "log", "title": "ms"},
                         height=400, width=760, title=f"{torch.cuda.get_device_name(0)}: Triton against torch")
    return figure


def roofline_table(sides: tuple[int, ...] = (16, 32, 64), batch: int = 8, heads: int = 6, d: int = 64,
                   atoms: int = 4) -> go.Figure:
    """The roofline *estimate* of `ssog_lab.ops.roofline` (H200 ceilings, not a measurement) as a table."""
    from ..ops import roofline as rf

    cells = {k: [] for k in ("grid", "dtype", "MB moved", "GFLOP (dots)", "FLOP/byte", "bound", "estimate (ms)")}
    for side in sides:
        for dtype_bytes, name in ((4, "float32"), (2, "bfloat16")):
            r = rf.roofline(batch, heads, (side, side), d, atoms, steered=False, dtype_bytes=dtype_bytes)
            for key, value in zip(cells, (f"{side}×{side}", name, f"{r.bytes / 1e6:.1f}", f"{r.flops / 1e9:.2f}",
                                          f"{r.intensity:.1f}", r.bound, f"{1e3 * r.time_s:.3f}"), strict=True):
                cells[key].append(value)
    figure = go.Figure(go.Table(header={"values": list(cells)}, cells={"values": list(cells.values())}))
    figure.update_layout(height=80 + 28 * len(cells["grid"]), width=900, margin={"t": 30, "b": 10},
                         title=f"roofline estimate, fixed forward, B = {batch}, {heads} heads, d = {d}, M = {atoms} "
                               f"({rf.H200.name} ceilings)")
    return figure


def speed_ratio(rows: list[dict], key: str = "forward_ms") -> dict[int, float]:
    """torch ms / Triton ms per grid side from `gpu_timings` rows (> 1: the kernel is faster)."""
    by = {(r["side"], r["backend"]): r[key] for r in rows}
    return {side: by[side, "torch"] / by[side, "triton"] for side in dict.fromkeys(r["side"] for r in rows)
            if math.isfinite(by[side, "triton"])}
