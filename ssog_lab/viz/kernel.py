"""Notebook 08: read the Triton kernel (`ssog_lab.ops.triton_kernel`) and watch it in Triton's CPU interpreter
against the torch reference; the figures of its GPU timings and of its roofline estimate.

What these figures show is computed by the library: the checks in `ssog_lab.ops.triton_check`, the GPU timings in
`ssog_lab.bench.gpu` (`gpu_timings`), the estimate in `ssog_lab.ops.roofline` (`roofline_rows`).
`ssog_lab.ops.triton_kernel` is imported inside the functions: on a CPU the interpreter must be switched on
(TRITON_INTERPRET=1) before triton is first imported, and importing `ssog_lab.viz` must not import it.
"""

from __future__ import annotations

import inspect
import time

import ipywidgets as widgets
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import ops
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


def gpu_timing_figure(rows: list[dict]) -> go.Figure:
    """`bench.gpu.gpu_timings` rows as ms against tokens (log–log), one line per backend and pass."""
    figure = go.Figure()
    for backend in dict.fromkeys(r["backend"] for r in rows):
        mine = [r for r in rows if r["backend"] == backend]
        for key, dash in (("forward_ms", "solid"), ("forward_backward_ms", "dot")):
            figure.add_trace(go.Scatter(x=[r["tokens"] for r in mine], y=[r[key] for r in mine], mode="lines+markers",
                                        name=f"{backend}, {key.removesuffix('_ms').replace('_', ' + ')}",
                                        line={"dash": dash}))
    figure.update_layout(xaxis={"type": "log", "title": "tokens N"}, yaxis={"type": "log", "title": "ms"},
                         height=400, width=760, title=f"{rows[0]['device']}: Triton against torch")
    return figure


def roofline_figure(rows: list[dict]) -> go.Figure:
    """`ops.roofline.roofline_rows` (an *estimate* from the GPU's ceilings, not a measurement) as a table."""
    cells = {"grid": [f"{r['side']}×{r['side']}" for r in rows], "dtype": [r["dtype"] for r in rows],
             "MB moved": [f"{r['bytes'] / 1e6:.1f}" for r in rows],
             "GFLOP (dots)": [f"{r['flops'] / 1e9:.2f}" for r in rows],
             "FLOP/byte": [f"{r['intensity']:.1f}" for r in rows], "bound": [r["bound"] for r in rows],
             "estimate (ms)": [f"{1e3 * r['time_s']:.3f}" for r in rows]}
    first = rows[0]
    figure = go.Figure(go.Table(header={"values": list(cells)}, cells={"values": list(cells.values())}))
    figure.update_layout(height=80 + 28 * len(rows), width=900, margin={"t": 30, "b": 10},
                         title=f"roofline estimate, fixed forward, B = {first['batch']}, {first['heads']} heads, "
                               f"d = {first['head_dim']}, M = {first['atoms']} ({first['peaks']} ceilings)")
    return figure
